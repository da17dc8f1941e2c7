//! dmaflow moves streams of data between programs and accelerators with as few
//! copies, system calls and wake-ups as the hardware allows, and measures how close
//! it gets.
//!
//! - [`ring`]: zero-copy circular queues built on virtual-memory mirroring, with
//!   firing thresholds.
//! - [`graph`]: Kahn process networks (Computational Process Networks) of nodes
//!   on those queues, with bounded scheduling.
//! - [`dsp`]: signal processing nodes (the overlap-save FIR filter).
//! - [`platform`]: what a device offers (registers, DMA memory, interrupts), on
//!   real boards (UIO, u-dma-buf) and on the emulated fabric.
//! - [`mem`]: buffer pools in DMA memory with a cache policy.
//! - [`axi`]: a register-exact AXI DMA driver (PG021).
//! - [`dma`]: two-way transfers, zero-copy or through standard I/O, completed by
//!   polling, scheduled polling or interrupts.
//! - [`gpu`]: a CUDA GPU as a second real DMA device (loaded at run time).
//! - [`sim`]: the emulated fabric the driver runs against without an FPGA.
//! - [`board`]: a real board's engines (UIO) and DMA memory (u-dma-buf),
//!   found by the names its device tree gives them.
//! - [`rig`]: emulated boards ready to use (fabric, drivers, DMA memory) and the
//!   coprocessor set-ups on them.
//! - [`designs`]: the emulated board's designs: their IP, addresses, AXI DMA
//!   parameters, interrupt lines and register maps.
//!
//! The experiments, reports and command line (`dmaflow bench`, `fir`, `bgsub`,
//! `info`) live in the `dmaflow-cli` crate; this library depends on none of them.
//! Graph edges over ZeroMQ are the `dmaflow-net` crate, the PYNQ.remote server
//! `dmaflow-remote`.
//!
//! # A first stream
//!
//! Two nodes on threads of their own with one queue between them. The reader
//! looks at 256 samples in place and releases 128, so each window overlaps the
//! last by half and nothing is copied to make it:
//!
//! ```
//! use dmaflow::graph::Graph;
//!
//! let mut g = Graph::new();
//! let (mut out, mut inp) = g.connect::<f32>(("source", "out"), ("energy", "in"))?;
//! g.node("source", move || {
//!     out.write(&[0.5; 10_000])?; // copied into the queue once
//!     Ok(())
//! })?;
//! g.node("energy", move || loop {
//!     let w = inp.peek(256)?; // 256 samples in place, no copy
//!     if w.len() < 256 {
//!         return Ok(()); // the source has ended
//!     }
//!     let _energy: f32 = w[..256].iter().map(|x| x * x).sum();
//!     inp.consume(128)?; // slide by 128: the overlap stays
//! })?;
//! g.run()?; // every node ran to its end
//! # Ok::<(), dmaflow::graph::Error>(())
//! ```
//!
//! Where to go from there:
//!
//! - a queue on its own, or shared with another process: [`ring::Builder`],
//!   [`ring::shm`];
//! - an AXI DMA engine without a board: [`rig::Rig`] (an emulated board with
//!   its engines, DMA memory and coprocessor) and [`dma`]'s transfers; on a
//!   board, [`board::Board`] over UIO and u-dma-buf;
//! - a coprocessor as a node of a graph, its queues in DMA memory:
//!   [`accel::stage`].
//!
//! The guide (the repository's `docs/`, built with `cargo doc -p dmaflow-guide`)
//! covers each of these, Python and PYNQ, and the benchmarks.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod accel;
pub mod axi;
pub mod board;
pub mod copies;
pub mod designs;
pub mod dma;
pub mod dsp;
pub mod gpu;
pub mod graph;
pub mod mem;
pub mod platform;
pub mod rig;
pub mod ring;
pub mod sim;
mod sync;

/// Any error dmaflow reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue operation failed.
    #[error(transparent)]
    Ring(#[from] ring::Error),
    /// A process network failed.
    #[error(transparent)]
    Graph(#[from] graph::Error),
    /// A filter could not be built.
    #[error(transparent)]
    Fir(#[from] dsp::fir::Error),
    /// A device could not be reached.
    #[error(transparent)]
    Platform(#[from] platform::Error),
    /// DMA memory could not be had.
    #[error(transparent)]
    Mem(#[from] mem::Error),
    /// The DMA engine failed.
    #[error(transparent)]
    Axi(#[from] axi::Error),
    /// A transfer failed.
    #[error(transparent)]
    Dma(#[from] dma::Error),
    /// An emulated board could not be set up or driven.
    #[error(transparent)]
    Rig(#[from] rig::Error),
    /// What went wrong opening a board's device, named.
    #[error("{name}: {source}")]
    Device {
        /// The device (an IP instance such as `axi_dma_0`).
        name: String,
        /// What went wrong.
        source: Box<Error>,
    },
}
