//! An emulated board with one design loaded: the fabric, its DMA memory pool,
//! its AXI DMA engine and the register window PYNQ's MMIO reaches.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dmaflow::axi::Config as AxiConfig;
use dmaflow::dsp::bgsub::Params as BgParams;
use dmaflow::mem::{CachePolicy, DmaPool};
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimRegisters};
use dmaflow::platform::{MemoryModel, RegisterSpace};
use dmaflow::rig::{Rig, policy_for};
use dmaflow::sim::{BgSubCore, Clock, Fabric, Faults, FirCore, Loopback, StreamProcessor};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// Where the first engine's register window sits in the physical address
/// map (where PYNQ's designs put `axi_dma_0`).
pub(crate) const REGISTER_BASE: u64 = 0x4040_0000;
/// The window's size (the AXI DMA IP's 64 KiB range).
pub(crate) const REGISTER_SIZE: u64 = 0x1_0000;
/// DMA memory of an emulated board.
const DDR_BYTES: usize = 64 << 20;

/// The engine of a board, its interrupt lines and its pool.
pub(crate) use dmaflow::rig::SimEngine;

/// What a board holds, shared by its buffers and channels.
pub(crate) struct BoardInner {
    /// The DMA memory.
    pub(crate) pool: DmaPool,
    /// The AXI DMA engines, engine i at register window i (one caller at a
    /// time each).
    pub(crate) engines: Vec<Mutex<SimEngine>>,
    /// The register windows as PYNQ's MMIO sees them: the engines', then the
    /// core's own where it has one.
    regs: Vec<SimRegisters>,
    /// The window of the core's own registers, where it has them.
    control: Option<usize>,
    /// Per engine: a packet ring holds it (for the ring's whole life).
    pub(crate) in_ring: Vec<std::sync::atomic::AtomicBool>,
    /// Whether the engine has its scatter-gather engine (`c_include_sg`).
    pub(crate) sg: bool,
    /// The design loaded.
    design: String,
    /// Width of the length register in bits.
    length_width: u32,
    fabric: Fabric,
    _board: SimBoard,
}

impl BoardInner {
    /// Engine `i`, for one call (`i` checked when its user was made).
    pub(crate) fn engine(&self, i: usize) -> std::sync::MutexGuard<'_, SimEngine> {
        self.engines[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
}

/// Maps any error of the library to a Python exception naming it.
pub(crate) fn runtime(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// An emulated Zynq board with a design loaded: `"loopback"` (an AXI DMA in
/// direct register mode around a loopback stream), `"loopback-sg"` (the same
/// with its scatter-gather engine) or `"fir"` (a FIR filter core behind a
/// scatter-gather AXI DMA, its taps in a register window of its own: little-
/// endian f32 samples in, the "valid" convolution of each packet out) or
/// `"bgsub"` (paper 000's background-subtraction core for `width` x `height`
/// 8-bit frames and `threshold`, behind two scatter-gather AXI DMA engines:
/// engine 0 takes the frame and gives the new background, engine 1 takes the
/// background and gives the mask). `memory` is `"coherent"` or
/// `"noncoherent"` (the CPU's caches apart from DRAM: buffers need
/// `flush()`/`invalidate()`, which the channels do). `timeout` is the longest
/// wait for a transfer, in seconds. `length_width` is the width of the
/// engine's buffer-length register in bits (PG021's `c_sg_length_width`,
/// 8..=26; 26 by default: transfers up to 64 MiB - 1).
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Board {
    pub(crate) inner: Arc<BoardInner>,
}

impl Board {
    /// The window and offset of byte `offset` from the first window.
    fn window(&self, offset: usize) -> PyResult<(&SimRegisters, usize)> {
        let w = offset / REGISTER_SIZE as usize;
        let r = self.inner.regs.get(w).ok_or_else(|| {
            PyValueError::new_err(format!(
                "offset {offset:#x} is past the design's {} register window(s)",
                self.inner.regs.len()
            ))
        })?;
        Ok((r, offset % REGISTER_SIZE as usize))
    }
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
        if !(8..=26).contains(&length_width) {
            return Err(PyValueError::new_err(format!(
                "length_width must be 8..=26 bits, not {length_width}"
            )));
        }
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
        let control = (core.control_bytes() > 0).then_some(n);
        let windows = n + usize::from(control.is_some());
        let model = match memory {
            "coherent" => MemoryModel::Coherent,
            "noncoherent" => MemoryModel::NonCoherent,
            other => {
                return Err(PyValueError::new_err(format!(
                    "memory must be \"coherent\" or \"noncoherent\", not {other:?}"
                )));
            }
        };
        if !(timeout.is_finite() && timeout > 0.0 && timeout <= 3600.0) {
            return Err(PyValueError::new_err(format!(
                "timeout must be between 0 and 3600 seconds, not {timeout}"
            )));
        }
        let cfg = AxiConfig {
            timeout: Duration::from_secs_f64(timeout),
            length_width,
        };
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
        let regs = (0..windows)
            .map(|i| rig.board.registers(i).map_err(runtime))
            .collect::<PyResult<_>>()?;
        let pool = rig.engines[0].pool().clone();
        let Rig {
            engines,
            fabric,
            board,
        } = rig;
        Ok(Board {
            inner: Arc::new(BoardInner {
                pool,
                in_ring: (0..n)
                    .map(|_| std::sync::atomic::AtomicBool::new(false))
                    .collect(),
                engines: engines.into_iter().map(Mutex::new).collect(),
                control,
                regs,
                sg,
                design: design.to_string(),
                length_width,
                fabric,
                _board: board,
            }),
        })
    }

    /// The design loaded.
    #[getter]
    fn design(&self) -> String {
        self.inner.design.clone()
    }

    /// Whether the engine has its scatter-gather engine.
    #[getter]
    fn sg(&self) -> bool {
        self.inner.sg
    }

    /// Whether the CPU's caches are coherent with the device.
    #[getter]
    fn coherent(&self) -> bool {
        self.inner.pool.policy() == CachePolicy::Coherent
    }

    /// Physical address of the engine's register window.
    #[getter]
    fn register_base(&self) -> u64 {
        REGISTER_BASE
    }

    /// Size of each register window in bytes (the engine's is first, the
    /// core's, where it has one, follows).
    #[getter]
    fn register_size(&self) -> u64 {
        REGISTER_SIZE
    }

    /// Register windows: one per DMA engine, then the core's own where it
    /// has registers.
    #[getter]
    fn register_windows(&self) -> usize {
        self.inner.regs.len()
    }

    /// DMA engines of the design (`axi_dma_0`, `axi_dma_1`, ...).
    #[getter]
    fn engines(&self) -> usize {
        self.inner.engines.len()
    }

    /// The register window of the core's own registers, where it has them.
    #[getter]
    fn control_window(&self) -> Option<usize> {
        self.inner.control
    }

    /// Width of the engine's buffer-length register in bits (`c_sg_length_width`).
    #[getter]
    fn length_width(&self) -> u32 {
        self.inner.length_width
    }

    /// Physical address and size of the board's DMA memory.
    #[getter]
    fn memory_range(&self) -> (u64, usize) {
        (DEFAULT_DDR_BASE, DDR_BYTES)
    }

    /// Bytes of DMA memory given up for good to an engine that could not be
    /// halted after a failure.
    #[getter]
    fn lost_bytes(&self) -> usize {
        self.inner.pool.lost_bytes()
    }

    /// Reads the 32-bit register at byte `offset` from the first window.
    fn read_register(&self, offset: usize) -> PyResult<u32> {
        let (regs, at) = self.window(offset)?;
        regs.read(at)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Writes the 32-bit register at byte `offset` from the first window, as
    /// PYNQ's MMIO does: the program drives the engine by hand.
    fn write_register(&self, offset: usize, value: u32) -> PyResult<()> {
        let (regs, at) = self.window(offset)?;
        // SAFETY: register access by hand is PYNQ's MMIO: the Python program
        // is the driver. The emulated engine reaches only this board's DMA
        // memory, of which Rust holds no reference across Python code (buffers
        // are handed to Python as raw pointers, channels touch them only while
        // they own a transfer): a transfer started by hand races with the
        // Python program's own views of its buffers, never with Rust.
        unsafe { regs.write(at, value) }.map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Loads the FIR core's taps through its register window (the `fir`
    /// design).
    fn load_taps(&self, taps: Vec<f32>) -> PyResult<()> {
        let regs = self.inner.regs.get(1).ok_or_else(|| {
            PyValueError::new_err(format!(
                "the {:?} design has no FIR core",
                self.inner.design
            ))
        })?;
        dmaflow::accel::fir::load_taps(regs, &taps)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Fault injection for tests: the engine's next transfer stays in progress
    /// `seconds` longer (past the timeout, it times out).
    fn inject_stall(&self, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(PyValueError::new_err(format!("a stall of {seconds} s")));
        }
        self.inner.fabric.inject(Faults {
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
