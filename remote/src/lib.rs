//! A PYNQ.remote server: PYNQ 4.0's gRPC protocol (the `RemoteDevice`,
//! `Mmio`, `RemoteBuffer` and `Gpio` services PYNQ's client calls when
//! `PYNQ_REMOTE_DEVICES` is set) over dmaflow's emulated board or a real one,
//! so that unmodified PYNQ on a PC loads overlays, allocates buffers, reads
//! and writes registers and runs its own DMA driver against a PG021-faithful
//! AXI DMA.
//!
//! The server binds loopback unless told otherwise, bounds every message,
//! checks every id, address, offset and length a client sends (an error in the
//! reply, never a crash), scopes buffers to the connection that allocated
//! them, and serves a set of files of its own ([`files`]), never the host's.
//!
//! The AXI DMA engines belong to the server: a client's writes to an
//! engine's channel registers reach a view of its own, and the server
//! programs the engine itself when a channel starts (LENGTH in direct mode,
//! TAILDESC in scatter-gather), with addresses checked against that client's
//! buffers; scatter-gather descriptors are copied into memory no client can
//! reach, and their status copied back. One client holds an engine at a
//! time, from its first start until it stops or resets the engine, frees a
//! buffer a transfer in flight reaches (the engine is halted first) or
//! disconnects.
//!
//! Every resource a client can make the server hold is capped ([`Limits`],
//! each an option of `dmaflow serve`): connections (and how long one may
//! take to open HTTP/2), DMA memory per client and in all, data in flight
//! (uploads not yet finished, reads not yet taken) per client and in all. A
//! request past a cap is refused with an error naming the cap and its
//! option. The emulated board has one DMA memory for the server's life:
//! loading another design reuses it.

mod board;
mod caps;
mod design;
mod engine;
mod files;
mod gpio;
pub mod hwh;
pub mod proto;
mod ps;
mod server;
mod service;

pub use board::{EMULATED_DDR_BYTES, Target};
pub use caps::{
    DEFAULT_CLIENT_DMA, DEFAULT_CLIENT_IN_FLIGHT, DEFAULT_CONNECTIONS, DEFAULT_HANDSHAKE,
    DEFAULT_TOTAL_DMA, DEFAULT_TOTAL_IN_FLIGHT, Limits,
};
pub use design::{Design, Dma, Ip};
pub use server::{DEFAULT_LISTEN, Options, Server};
pub use service::{Connection, Service};

use std::path::PathBuf;

/// What went wrong setting up or running the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No emulated design of that name.
    #[error("no emulated design called {0:?} ({known})", known = dmaflow::designs::names().join(", "))]
    UnknownDesign(String),
    /// A `.hwh` that cannot be read as a design.
    #[error("{path}: {reason}")]
    Hwh {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A design the emulated board cannot hold.
    #[error("{0}")]
    Design(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The emulated board could not be set up.
    #[error("emulated board: {0}")]
    Platform(#[from] dmaflow::platform::Error),
    /// DMA memory could not be set up.
    #[error(transparent)]
    Mem(#[from] dmaflow::mem::Error),
    /// A real board could not be opened.
    #[error("board at {root}: {reason}")]
    Board {
        /// Its root directory.
        root: PathBuf,
        /// Why.
        reason: String,
    },
    /// The address could not be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("server: {0}")]
    Serve(#[from] tonic::transport::Error),
}
