//! The `Board` class: a board with one design loaded, as Python makes and
//! uses it. What it holds is [`crate::state::BoardState`]; this module checks
//! Python's arguments, hands the state to the classes made from a board
//! (buffers, channels, engines, packet rings) and turns the state's errors
//! into Python's.

use std::sync::Arc;
use std::time::Duration;

use dmaflow::axi::Config as AxiConfig;
use dmaflow::designs::{self, Core};
use dmaflow::dsp::bgsub::Params as BgParams;
use dmaflow::mem::CachePolicy;
use dmaflow::sim::Faults;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::buffer::DmaBuffer;
use crate::channel::Channel;
use crate::engine::Engine;
use crate::errors::value;
use crate::names;
use crate::packets::PacketRing;
use crate::state::BoardState;

/// A board with a design loaded. `Board(design, ...)` is the emulated board
/// running one of the designs of `emulated_designs()`: `"loopback"` (an AXI
/// DMA in direct register mode around a loopback stream), `"loopback-sg"`
/// (the same with its scatter-gather engine) or `"fir"` (a FIR filter core
/// behind a scatter-gather AXI DMA, its taps in a register window of its own:
/// little-endian f32 samples in, the "valid" convolution of each packet out)
/// or `"bgsub"` (paper 000's background-subtraction core for `width` x
/// `height` 8-bit frames and `threshold`, behind two scatter-gather AXI DMA
/// engines: engine 0 takes the frame and gives the new background, engine 1
/// takes the background and gives the mask). `memory` is `"coherent"` or
/// `"noncoherent"` (the CPU's caches apart from DRAM: buffers need
/// `flush()`/`invalidate()`, which the channels do). `timeout` is the longest
/// wait for a transfer, in seconds. `length_width` is the width of the
/// engine's buffer-length register in bits (PG021's `c_sg_length_width`,
/// 8..=26; 26 by default: transfers up to 64 MiB - 1). `Board.open(...)`
/// opens a real board instead.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Board {
    state: Arc<BoardState>,
}

/// Checks a timeout and a length-register width, and makes the driver's
/// configuration of them.
fn config(timeout: f64, length_width: u32) -> PyResult<AxiConfig> {
    if !(8..=26).contains(&length_width) {
        return Err(PyValueError::new_err(format!(
            "length_width must be 8..=26 bits, not {length_width}"
        )));
    }
    if !(timeout.is_finite() && timeout > 0.0 && timeout <= 3600.0) {
        return Err(PyValueError::new_err(format!(
            "timeout must be between 0 and 3600 seconds, not {timeout}"
        )));
    }
    Ok(AxiConfig {
        timeout: Duration::from_secs_f64(timeout),
        length_width,
    })
}

#[pymethods]
impl Board {
    #[new]
    #[pyo3(signature = (
        design = "loopback",
        memory = "coherent",
        timeout = 1.0,
        length_width = 26,
        width = 320,
        height = 240,
        threshold = 25
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        design: &str,
        memory: &str,
        timeout: f64,
        length_width: u32,
        width: usize,
        height: usize,
        threshold: u8,
    ) -> PyResult<Self> {
        let cfg = config(timeout, length_width)?;
        let design = designs::find(design).map_err(value)?;
        let frames = (design.core == Core::BgSub)
            .then(|| BgParams::new(width, height, threshold, true))
            .transpose()
            .map_err(value)?;
        let model = names::memory(memory)?;
        let state = BoardState::emulate(design, frames, model, cfg)?;
        Ok(Board {
            state: Arc::new(state),
        })
    }

    /// A real board, through UIO and u-dma-buf under `root`: the design
    /// loaded on it (its bitstream programmed and its device tree overlay
    /// applied) names each IP's UIO device as its block-design instance
    /// (`axi_dma_0`, `fir_0`) and each DMA channel's interrupt, where Linux
    /// gets it, as `<engine>_mm2s_introut` / `<engine>_s2mm_introut`.
    /// `memory` is the u-dma-buf buffers come from; `engines` the AXI DMA
    /// engines to drive (by default every UIO device whose name starts with
    /// `axi_dma` and that has registers). Each engine is reset here.
    #[staticmethod]
    #[pyo3(signature = (root = "/", memory = "udmabuf0", engines = None, timeout = 1.0, length_width = 26))]
    fn open(
        root: &str,
        memory: &str,
        engines: Option<Vec<String>>,
        timeout: f64,
        length_width: u32,
    ) -> PyResult<Self> {
        let cfg = config(timeout, length_width)?;
        Ok(Board {
            state: Arc::new(BoardState::open(root, memory, engines, cfg)?),
        })
    }

    /// The design loaded.
    #[getter]
    fn design(&self) -> String {
        self.state.design().to_string()
    }

    /// Whether engine 0 has its scatter-gather engine (read from DMASR at
    /// its reset); `False` for a design without engines.
    #[getter]
    fn sg(&self) -> bool {
        self.state.engines() > 0 && self.state.sg(0)
    }

    /// Whether the CPU's caches are coherent with the device.
    #[getter]
    fn coherent(&self) -> bool {
        self.state.pool.policy() == CachePolicy::Coherent
    }

    /// Whether this is the emulated board (not a real one).
    #[getter]
    fn emulated(&self) -> bool {
        self.state.emulated()
    }

    /// The register windows: `(name, physical address, size)` for each IP
    /// with registers (the engines' first).
    #[getter]
    fn windows(&self) -> Vec<(String, u64, usize)> {
        self.state.windows()
    }

    /// The DMA engines' names, engine `i` at position `i`.
    #[getter]
    fn engine_names(&self) -> Vec<String> {
        self.state.engine_names()
    }

    /// DMA engines of the design (`axi_dma_0`, `axi_dma_1`, ...).
    #[getter]
    fn engines(&self) -> usize {
        self.state.engines()
    }

    /// Width of the engines' buffer-length register in bits (`c_sg_length_width`).
    #[getter]
    fn length_width(&self) -> u32 {
        self.state.length_width()
    }

    /// Whether engine `index`'s channel `direction` has an interrupt line
    /// here (without one it is completed by polling).
    #[pyo3(signature = (direction, index = 0))]
    fn has_interrupt(&self, direction: &str, index: usize) -> PyResult<bool> {
        self.state.check_engine(index)?;
        Ok(self.state.wired(index, names::direction(direction)?))
    }

    /// Physical address and size of the board's DMA memory.
    #[getter]
    fn memory_range(&self) -> (u64, usize) {
        self.state.pool.bus_range()
    }

    /// Bytes of DMA memory given up for good to an engine that could not be
    /// halted after a failure.
    #[getter]
    fn lost_bytes(&self) -> usize {
        self.state.pool.lost_bytes()
    }

    /// Reads the 32-bit register at physical address `phys`.
    fn read_register(&self, phys: u64) -> PyResult<u32> {
        Ok(self.state.read_register(phys)?)
    }

    /// Writes the 32-bit register at physical address `phys`, as PYNQ's
    /// MMIO does: the program drives the IP by hand.
    fn write_register(&self, phys: u64, value: u32) -> PyResult<()> {
        // SAFETY: register access by hand is PYNQ's MMIO: the Python program
        // is the driver. The engine reaches only this board's DMA memory, of
        // which Rust holds no reference across Python code (buffers are handed
        // to Python as raw pointers, channels touch them only while they own
        // a transfer): a transfer started by hand races with the Python
        // program's own views of its buffers, never with Rust.
        Ok(unsafe { self.state.write_register(phys, value) }?)
    }

    /// Loads the FIR core's taps through its register window (`fir_0`).
    fn load_taps(&self, taps: Vec<f32>) -> PyResult<()> {
        Ok(self.state.load_taps(&taps)?)
    }

    /// Resets every DMA engine of the design to its power-on state (PG021's
    /// soft reset: both channels halted, registers cleared), as reloading
    /// the design does (PYNQ's `Overlay.download()` and `PL.reset()`). Each
    /// engine is reset once nothing else holds it (a wait in progress ends
    /// first, within the board's timeout), with the GIL released; a
    /// transfer still in flight then ends in its own wait with a timeout,
    /// its buffer handed back (the engine is confirmed halted). A packet
    /// ring holding an engine makes this an error.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        for i in 0..self.state.engines() {
            self.state.not_in_a_ring(i)?;
        }
        let state = self.state.clone();
        Ok(py.detach(move || state.reset())?)
    }

    /// Fault injection for tests on the emulated board: the engine's next
    /// transfer stays in progress `seconds` longer (past the timeout, it
    /// times out).
    fn inject_stall(&self, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(PyValueError::new_err(format!("a stall of {seconds} s")));
        }
        Ok(self.state.inject(Faults {
            stall: Some(Duration::from_secs_f64(seconds)),
            ..Faults::default()
        })?)
    }

    /// A DMA buffer of `nbytes` bytes in the board's memory, on whole pages.
    fn allocate(&self, nbytes: usize) -> PyResult<DmaBuffer> {
        DmaBuffer::new(self.state.clone(), nbytes)
    }

    /// Engine `index`, for dmaflow's two-way transfers.
    #[pyo3(signature = (index = 0))]
    fn engine(&self, index: usize) -> PyResult<Engine> {
        self.state.check_engine(index)?;
        Ok(Engine::new(self.state.clone(), index))
    }

    /// A packet ring of `slots` buffers of `slot_bytes` on engine `engine`
    /// (scatter-gather designs), its descriptors handed over `batch` at a
    /// time, waiting as `completion` says. It holds the engine until closed.
    #[pyo3(signature = (slots = 8, slot_bytes = 4096, batch = 1, completion = "irq", engine = 0))]
    fn packet_ring(
        &self,
        slots: usize,
        slot_bytes: usize,
        batch: usize,
        completion: &str,
        engine: usize,
    ) -> PyResult<PacketRing> {
        self.state.check_engine(engine)?;
        PacketRing::new(
            self.state.clone(),
            engine,
            slots,
            slot_bytes,
            batch,
            names::completion(completion)?,
        )
    }

    /// Engine `engine`'s channel in `direction`: `"mm2s"` (send) or `"s2mm"`
    /// (receive).
    #[pyo3(signature = (direction, engine = 0))]
    fn channel(&self, direction: &str, engine: usize) -> PyResult<Channel> {
        self.state.check_engine(engine)?;
        Ok(Channel::new(
            self.state.clone(),
            engine,
            names::direction(direction)?,
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "Board(design={:?}, memory={:?})",
            self.state.design(),
            if self.coherent() {
                "coherent"
            } else {
                "noncoherent"
            }
        )
    }
}
