//! A board with one design loaded: its DMA memory pool, its AXI DMA
//! engines and the register windows PYNQ's MMIO reaches. Either the emulated
//! board (the fabric running one of its designs) or a real one opened
//! through UIO and u-dma-buf ([`dmaflow::board::Board`]); the rest of the
//! package does not tell them apart.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dmaflow::axi::Config as AxiConfig;
use dmaflow::dma::DynEngine;
use dmaflow::dsp::bgsub::Params as BgParams;
use dmaflow::mem::{CachePolicy, DmaPool};
use dmaflow::platform::sim::SimBoard;
use dmaflow::platform::{MemoryModel, RegisterSpace};
use dmaflow::rig::{Rig, policy_for};
use dmaflow::sim::{BgSubCore, Clock, Fabric, Faults, FirCore, Loopback, StreamProcessor};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Where the first engine's register window sits in the emulated board's
/// physical address map (where PYNQ's designs put `axi_dma_0`).
const REGISTER_BASE: u64 = 0x4040_0000;
/// The size of each emulated window (the AXI DMA IP's 64 KiB range).
const REGISTER_SIZE: u64 = 0x1_0000;
/// DMA memory of an emulated board.
const DDR_BYTES: usize = 64 << 20;

/// The engine of a board, its interrupt lines and its pool.
pub(crate) type BoardEngine = DynEngine;

/// A register window of the design, by IP name and physical address.
struct Window {
    name: String,
    phys: u64,
    regs: Box<dyn RegisterSpace>,
}

/// The emulated board behind a design, kept running while the board lives.
struct Emulated {
    fabric: Fabric,
    _board: SimBoard,
}

/// Engines behind their locks, and their interrupt lines beside them.
#[allow(clippy::type_complexity)]
fn share(
    engines: Vec<BoardEngine>,
) -> (
    Vec<Mutex<BoardEngine>>,
    Vec<[Arc<dyn dmaflow::platform::IrqLine>; 2]>,
) {
    engines
        .into_iter()
        .map(|e| {
            let (e, lines) = e.share_lines();
            (Mutex::new(e), lines)
        })
        .unzip()
}

/// What a board holds, shared by its buffers and channels.
pub(crate) struct BoardInner {
    /// The DMA memory.
    pub(crate) pool: DmaPool,
    /// The AXI DMA engines (one caller at a time each), with their names.
    pub(crate) engines: Vec<Mutex<BoardEngine>>,
    /// Per engine: its MM2S and S2MM interrupt lines, reachable without the
    /// engine (a wait sleeps on its line, not holding the engine).
    lines: Vec<[Arc<dyn dmaflow::platform::IrqLine>; 2]>,
    engine_names: Vec<String>,
    /// Per engine: built with its scatter-gather engine (`c_include_sg`,
    /// read from DMASR at its reset), known without taking the engine.
    sg: Vec<bool>,
    /// Per engine: whether its MM2S and S2MM interrupt lines are wired here.
    wired: Vec<[bool; 2]>,
    /// The register windows as PYNQ's MMIO sees them.
    windows: Vec<Window>,
    /// Per engine: a packet ring holds it (for the ring's whole life).
    pub(crate) in_ring: Vec<std::sync::atomic::AtomicBool>,
    /// The design loaded (a real board's: its root directory).
    design: String,
    /// Width of the length register in bits.
    length_width: u32,
    /// The emulated board, where it is one.
    emulated: Option<Emulated>,
}

impl BoardInner {
    /// Engine `i`, for one call (`i` checked when its user was made).
    pub(crate) fn engine(&self, i: usize) -> std::sync::MutexGuard<'_, BoardEngine> {
        self.engines[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The interrupt line of engine `i`'s channel `ch`.
    pub(crate) fn line(
        &self,
        i: usize,
        ch: dmaflow::axi::Channel,
    ) -> Arc<dyn dmaflow::platform::IrqLine> {
        self.lines[i][ch as usize].clone()
    }

    /// Engine `i` if no other call holds it now (never waits: for a look
    /// taken with the GIL held).
    pub(crate) fn try_engine(&self, i: usize) -> Option<std::sync::MutexGuard<'_, BoardEngine>> {
        match self.engines[i].try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Refuses engine `i` while a packet ring holds it (waiting for it would
    /// wait for the ring to be closed).
    pub(crate) fn not_in_a_ring(&self, i: usize) -> PyResult<()> {
        if self.in_ring[i].load(std::sync::atomic::Ordering::Acquire) {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                "DMA engine {i} is held by a packet ring: close the ring first"
            )));
        }
        Ok(())
    }

    /// Checks that engine `i` exists.
    pub(crate) fn check_engine(&self, i: usize) -> PyResult<()> {
        if i >= self.engines.len() {
            return Err(PyValueError::new_err(format!(
                "the {:?} design has {} DMA engine(s), not {}",
                self.design,
                self.engines.len(),
                i + 1
            )));
        }
        Ok(())
    }

    /// Whether engine `i` has its scatter-gather engine (`c_include_sg`).
    pub(crate) fn sg(&self, i: usize) -> bool {
        self.sg[i]
    }

    /// The window holding physical bytes `phys..phys + 4`, and the offset in it.
    fn window(&self, phys: u64) -> PyResult<(&Window, usize)> {
        self.windows
            .iter()
            .find(|w| phys >= w.phys && phys + 4 <= w.phys + w.regs.len() as u64)
            .map(|w| (w, (phys - w.phys) as usize))
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "physical address {phys:#x} is not inside a register window of the {:?} design",
                    self.design
                ))
            })
    }
}

/// Maps an error opening a board's engine to `DmaError`, naming it.
fn crate_error(e: dmaflow::Error) -> PyErr {
    crate::DmaError::new_err(e.to_string())
}

/// Maps any error of the library to a Python exception naming it.
pub(crate) fn runtime(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// A board with a design loaded. `Board(design, ...)` is the emulated board
/// running `"loopback"` (an AXI DMA in direct register mode around a
/// loopback stream), `"loopback-sg"` (the same with its scatter-gather
/// engine) or `"fir"` (a FIR filter core behind a scatter-gather AXI DMA, its
/// taps in a register window of its own: little-endian f32 samples in, the
/// "valid" convolution of each packet out) or `"bgsub"` (paper 000's
/// background-subtraction core for `width` x `height` 8-bit frames and
/// `threshold`, behind two scatter-gather AXI DMA engines: engine 0 takes the
/// frame and gives the new background, engine 1 takes the background and
/// gives the mask). `memory` is `"coherent"` or `"noncoherent"` (the CPU's
/// caches apart from DRAM: buffers need `flush()`/`invalidate()`, which the
/// channels do). `timeout` is the longest wait for a transfer, in seconds.
/// `length_width` is the width of the engine's buffer-length register in
/// bits (PG021's `c_sg_length_width`, 8..=26; 26 by default: transfers up to
/// 64 MiB - 1). `Board.open(...)` opens a real board instead.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Board {
    pub(crate) inner: Arc<BoardInner>,
}

/// Whether an engine's MM2S and S2MM interrupt lines are wired here.
fn wired<R: RegisterSpace, I: dmaflow::platform::IrqLine>(
    e: &dmaflow::dma::Engine<R, I>,
) -> [bool; 2] {
    use dmaflow::axi::Channel;
    [e.irq(Channel::Mm2s).wired(), e.irq(Channel::S2mm).wired()]
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
        let (sg, core): (bool, Box<dyn StreamProcessor>) = match design {
            "loopback" => (false, Box::new(Loopback)),
            "loopback-sg" => (true, Box::new(Loopback)),
            "fir" => (true, Box::new(FirCore::new())),
            "bgsub" => {
                let p = BgParams::new(width, height, threshold, true)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                (true, Box::new(BgSubCore::new(p)))
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "no design called {other:?} on the emulated board \
                     (loopback, loopback-sg, fir, bgsub)"
                )));
            }
        };
        let n = core.streams().max(1);
        let core_name = match design {
            "fir" => Some("fir_0"),
            _ => None,
        };
        let model = match memory {
            "coherent" => MemoryModel::Coherent,
            "noncoherent" => MemoryModel::NonCoherent,
            other => {
                return Err(PyValueError::new_err(format!(
                    "memory must be \"coherent\" or \"noncoherent\", not {other:?}"
                )));
            }
        };
        let control = core.control_bytes() > 0;
        let rig = Rig::configured(
            DDR_BYTES,
            Clock::Unlimited,
            sg,
            policy_for(model),
            model,
            core,
            cfg,
        )
        .map_err(runtime)?;
        let names: Vec<String> = (0..n).map(|i| format!("axi_dma_{i}")).collect();
        let mut windows = Vec::new();
        for (i, name) in names
            .iter()
            .map(String::as_str)
            .chain(core_name.filter(|_| control))
            .enumerate()
        {
            windows.push(Window {
                name: name.to_string(),
                phys: REGISTER_BASE + i as u64 * REGISTER_SIZE,
                regs: Box::new(rig.board.registers(i).map_err(runtime)?),
            });
        }
        let pool = rig.engines[0].pool().clone();
        let Rig {
            engines,
            fabric,
            board,
        } = rig;
        let sg = engines.iter().map(|e| e.dma().sg_included()).collect();
        let wired = engines.iter().map(wired).collect();
        let (engines, lines) = share(engines.into_iter().map(|e| e.boxed()).collect());
        Ok(Board {
            inner: Arc::new(BoardInner {
                pool,
                in_ring: (0..n)
                    .map(|_| std::sync::atomic::AtomicBool::new(false))
                    .collect(),
                sg,
                wired,
                lines,
                engines,
                engine_names: names,
                windows,
                design: design.to_string(),
                length_width,
                emulated: Some(Emulated {
                    fabric,
                    _board: board,
                }),
            }),
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
        let board =
            dmaflow::board::Board::open(std::path::Path::new(root), memory).map_err(runtime)?;
        let inv = board.inventory();
        let names = engines.unwrap_or_else(|| {
            inv.uio
                .iter()
                .filter(|d| d.name.starts_with("axi_dma") && d.size > 0)
                .map(|d| d.name.clone())
                .collect()
        });
        let mut windows = Vec::new();
        for d in inv.uio.iter().filter(|d| d.size > 0) {
            windows.push(Window {
                name: d.name.clone(),
                phys: d.addr,
                regs: Box::new(board.registers(&d.name).map_err(runtime)?),
            });
        }
        let engines = names
            .iter()
            .map(|n| board.engine(n, cfg).map_err(crate_error))
            .collect::<PyResult<Vec<_>>>()?;
        let sg = engines.iter().map(|e| e.dma().sg_included()).collect();
        let wired = engines.iter().map(wired).collect();
        let (engines, lines) = share(engines);
        Ok(Board {
            inner: Arc::new(BoardInner {
                lines,
                pool: board.pool().clone(),
                in_ring: names
                    .iter()
                    .map(|_| std::sync::atomic::AtomicBool::new(false))
                    .collect(),
                engines,
                engine_names: names,
                sg,
                wired,
                windows,
                design: root.to_string(),
                length_width,
                emulated: None,
            }),
        })
    }

    /// The design loaded.
    #[getter]
    fn design(&self) -> String {
        self.inner.design.clone()
    }

    /// Whether engine 0 has its scatter-gather engine (read from DMASR at
    /// its reset); `False` for a design without engines.
    #[getter]
    fn sg(&self) -> bool {
        !self.inner.engines.is_empty() && self.inner.sg(0)
    }

    /// Whether the CPU's caches are coherent with the device.
    #[getter]
    fn coherent(&self) -> bool {
        self.inner.pool.policy() == CachePolicy::Coherent
    }

    /// Whether this is the emulated board (not a real one).
    #[getter]
    fn emulated(&self) -> bool {
        self.inner.emulated.is_some()
    }

    /// The register windows: `(name, physical address, size)` for each IP
    /// with registers (the engines' first).
    #[getter]
    fn windows(&self) -> Vec<(String, u64, usize)> {
        self.inner
            .windows
            .iter()
            .map(|w| (w.name.clone(), w.phys, w.regs.len()))
            .collect()
    }

    /// The DMA engines' names, engine `i` at position `i`.
    #[getter]
    fn engine_names(&self) -> Vec<String> {
        self.inner.engine_names.clone()
    }

    /// DMA engines of the design (`axi_dma_0`, `axi_dma_1`, ...).
    #[getter]
    fn engines(&self) -> usize {
        self.inner.engines.len()
    }

    /// Width of the engines' buffer-length register in bits (`c_sg_length_width`).
    #[getter]
    fn length_width(&self) -> u32 {
        self.inner.length_width
    }

    /// Whether engine `index`'s channel `direction` has an interrupt line
    /// here (without one it is completed by polling).
    #[pyo3(signature = (direction, index = 0))]
    fn has_interrupt(&self, direction: &str, index: usize) -> PyResult<bool> {
        self.inner.check_engine(index)?;
        let ch = crate::channel::direction(direction)?;
        Ok(self.inner.wired[index][ch as usize])
    }

    /// Physical address and size of the board's DMA memory.
    #[getter]
    fn memory_range(&self) -> (u64, usize) {
        self.inner.pool.bus_range()
    }

    /// Bytes of DMA memory given up for good to an engine that could not be
    /// halted after a failure.
    #[getter]
    fn lost_bytes(&self) -> usize {
        self.inner.pool.lost_bytes()
    }

    /// Reads the 32-bit register at physical address `phys`.
    fn read_register(&self, phys: u64) -> PyResult<u32> {
        let (w, at) = self.inner.window(phys)?;
        w.regs
            .read(at)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Writes the 32-bit register at physical address `phys`, as PYNQ's
    /// MMIO does: the program drives the IP by hand.
    fn write_register(&self, phys: u64, value: u32) -> PyResult<()> {
        let (w, at) = self.inner.window(phys)?;
        // SAFETY: register access by hand is PYNQ's MMIO: the Python program
        // is the driver. The engine reaches only this board's DMA memory, of
        // which Rust holds no reference across Python code (buffers are handed
        // to Python as raw pointers, channels touch them only while they own
        // a transfer): a transfer started by hand races with the Python
        // program's own views of its buffers, never with Rust.
        unsafe { w.regs.write(at, value) }.map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Loads the FIR core's taps through its register window (`fir_0`).
    fn load_taps(&self, taps: Vec<f32>) -> PyResult<()> {
        let w = self
            .inner
            .windows
            .iter()
            .find(|w| w.name == "fir_0")
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "the {:?} design has no FIR core (fir_0)",
                    self.inner.design
                ))
            })?;
        dmaflow::accel::fir::load_taps(&w.regs, &taps)
            .map_err(|e| PyValueError::new_err(e.to_string()))
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
        for i in 0..self.inner.engines.len() {
            self.inner.not_in_a_ring(i)?;
        }
        let inner = self.inner.clone();
        py.detach(move || {
            for i in 0..inner.engines.len() {
                inner.engine(i).dma().reset().map_err(runtime)?;
            }
            Ok(())
        })
    }

    /// Fault injection for tests on the emulated board: the engine's next
    /// transfer stays in progress `seconds` longer (past the timeout, it
    /// times out).
    fn inject_stall(&self, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(PyValueError::new_err(format!("a stall of {seconds} s")));
        }
        let emulated = self.inner.emulated.as_ref().ok_or_else(|| {
            PyRuntimeError::new_err("faults are injected on the emulated board only")
        })?;
        emulated.fabric.inject(Faults {
            stall: Some(Duration::from_secs_f64(seconds)),
            ..Faults::default()
        });
        Ok(())
    }

    /// A DMA buffer of `nbytes` bytes in the board's memory, on whole pages.
    fn allocate(&self, nbytes: usize) -> PyResult<crate::buffer::DmaBuffer> {
        crate::buffer::DmaBuffer::new(self.inner.clone(), nbytes)
    }

    /// Engine `index`, for dmaflow's two-way transfers.
    #[pyo3(signature = (index = 0))]
    fn engine(&self, index: usize) -> PyResult<crate::engine::Engine> {
        self.inner.check_engine(index)?;
        Ok(crate::engine::Engine::new(self.inner.clone(), index))
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
    ) -> PyResult<crate::packets::PacketRing> {
        self.inner.check_engine(engine)?;
        crate::packets::PacketRing::new(
            self.inner.clone(),
            engine,
            slots,
            slot_bytes,
            batch,
            completion,
        )
    }

    /// Engine `engine`'s channel in `direction`: `"mm2s"` (send) or `"s2mm"`
    /// (receive).
    #[pyo3(signature = (direction, engine = 0))]
    fn channel(&self, direction: &str, engine: usize) -> PyResult<crate::channel::Channel> {
        self.inner.check_engine(engine)?;
        crate::channel::Channel::new(self.inner.clone(), engine, direction)
    }

    fn __repr__(&self) -> String {
        format!(
            "Board(design={:?}, memory={:?})",
            self.inner.design,
            if self.coherent() {
                "coherent"
            } else {
                "noncoherent"
            }
        )
    }
}
