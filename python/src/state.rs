//! What a board with one design loaded holds: its DMA memory pool, its AXI
//! DMA engines with their interrupt lines, and the register windows PYNQ's
//! MMIO reaches. Either the emulated board (the fabric running one of the
//! designs of [`dmaflow::designs`]) or a real one opened through UIO and
//! u-dma-buf ([`dmaflow::board::Board`]); nothing past this module tells them
//! apart. The buffer, channel, engine and packet-ring classes each hold a
//! handle to it (an `Arc`); it knows nothing of them, nor of Python: its
//! errors are the library's, turned into Python's by the `errors` module.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use dmaflow::axi::{Channel, Config as AxiConfig};
use dmaflow::designs::{Design, IpKind, Window as DesignWindow};
use dmaflow::dma::DynEngine;
use dmaflow::dsp::bgsub::Params as FrameParams;
use dmaflow::mem::DmaPool;
use dmaflow::platform::sim::SimBoard;
use dmaflow::platform::{IrqLine, MemoryModel, RegisterSpace};
use dmaflow::rig::Rig;
use dmaflow::sim::{Fabric, Faults};

/// What went wrong with a board or one of its engines, windows or cores.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The emulated board could not be set up.
    #[error(transparent)]
    Rig(#[from] dmaflow::rig::Error),
    /// The real board could not be opened.
    #[error(transparent)]
    Open(dmaflow::Error),
    /// An engine of the real board could not be opened (named).
    #[error(transparent)]
    Engine(dmaflow::Error),
    /// A register window of the real board could not be opened.
    #[error(transparent)]
    Window(dmaflow::Error),
    /// An engine could not be reset.
    #[error(transparent)]
    Reset(dmaflow::axi::Error),
    /// A packet ring holds the engine.
    #[error("DMA engine {0} is held by a packet ring: close the ring first")]
    InRing(usize),
    /// No engine of that index.
    #[error("the {design:?} design has {engines} DMA engine(s), not {}", index + 1)]
    NoEngine {
        /// The design loaded.
        design: String,
        /// Its engines.
        engines: usize,
        /// The index asked for.
        index: usize,
    },
    /// An address outside every register window.
    #[error("physical address {phys:#x} is not inside a register window of the {design:?} design")]
    NoWindow {
        /// The design loaded.
        design: String,
        /// The address.
        phys: u64,
    },
    /// A register access refused by its window.
    #[error(transparent)]
    Register(dmaflow::platform::Error),
    /// The design has no FIR core.
    #[error("the {0:?} design has no FIR core (fir_0)")]
    NoFir(String),
    /// The FIR core refused its taps.
    #[error(transparent)]
    Taps(#[from] dmaflow::accel::fir::Error),
    /// Faults are the emulated board's.
    #[error("faults are injected on the emulated board only")]
    NotEmulated,
}

/// Direct-mode transfers up to this size are moved by the thread that starts
/// them on the emulated board: about what a Zynq UltraScale+ engine (4 GB/s)
/// moves in the few microseconds until a Python program's next statement.
const PROMPT_BYTES: usize = 16 << 10;

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

/// One engine, behind its lock, with what is known of it without the lock.
struct Slot {
    /// One caller at a time.
    engine: Mutex<DynEngine>,
    /// Its MM2S and S2MM interrupt lines, reachable without the engine (a
    /// wait sleeps on its line, not holding the engine).
    lines: [Arc<dyn IrqLine>; 2],
    /// Its name (`axi_dma_0`).
    name: String,
    /// Built with its scatter-gather engine (`c_include_sg`, read from DMASR
    /// at its reset).
    sg: bool,
    /// Whether its MM2S and S2MM interrupt lines are wired here.
    wired: [bool; 2],
    /// A packet ring holds it (for the ring's whole life).
    in_ring: AtomicBool,
}

impl Slot {
    fn new(engine: DynEngine, name: String) -> Self {
        let sg = engine.dma().sg_included();
        let wired = [
            engine.irq(Channel::Mm2s).wired(),
            engine.irq(Channel::S2mm).wired(),
        ];
        let (engine, lines) = engine.share_lines();
        Slot {
            engine: Mutex::new(engine),
            lines,
            name,
            sg,
            wired,
            in_ring: AtomicBool::new(false),
        }
    }
}

/// A board with a design loaded, shared by its buffers, channels, engines
/// and packet rings.
pub(crate) struct BoardState {
    /// The DMA memory.
    pub(crate) pool: DmaPool,
    engines: Vec<Slot>,
    /// The register windows as PYNQ's MMIO sees them.
    windows: Vec<Window>,
    /// The design loaded (a real board's: its root directory).
    design: String,
    /// Width of the length register in bits.
    length_width: u32,
    /// The emulated board, where it is one.
    emulated: Option<Emulated>,
}

impl BoardState {
    /// The emulated board running `design`, its memory as `model` says, its
    /// engines as `cfg` says, a background-subtraction core built for
    /// `frames`.
    pub(crate) fn emulate(
        design: &Design,
        frames: Option<FrameParams>,
        model: MemoryModel,
        cfg: AxiConfig,
    ) -> Result<Self, Error> {
        let rig = Rig::emulate(design, frames, model, cfg)?;
        // A short transfer is done when the notebook's next line runs, as on
        // a board, not once the device thread has been scheduled.
        rig.fabric.set_prompt_bytes(PROMPT_BYTES);
        let mut windows = Vec::new();
        let mut names = Vec::new();
        for ip in design.ips(cfg.length_width) {
            if let IpKind::AxiDma { .. } = ip.kind {
                names.push(ip.name.clone());
            }
            if let Some(DesignWindow { index, base, .. }) = ip.window {
                let regs = rig
                    .board
                    .registers(index)
                    .map_err(dmaflow::rig::Error::from)?;
                windows.push(Window {
                    name: ip.name,
                    phys: base,
                    regs: Box::new(regs),
                });
            }
        }
        let pool = rig.engines[0].pool().clone();
        let Rig {
            engines,
            fabric,
            board,
        } = rig;
        Ok(BoardState {
            pool,
            engines: engines
                .into_iter()
                .zip(names)
                .map(|(e, name)| Slot::new(e.boxed(), name))
                .collect(),
            windows,
            design: design.name.to_string(),
            length_width: cfg.length_width,
            emulated: Some(Emulated {
                fabric,
                _board: board,
            }),
        })
    }

    /// The real board under `root`, buffers from the u-dma-buf `memory`,
    /// driving the engines `engines` (by default every UIO device whose name
    /// starts with `axi_dma` and that has registers), each reset here.
    pub(crate) fn open(
        root: &str,
        memory: &str,
        engines: Option<Vec<String>>,
        cfg: AxiConfig,
    ) -> Result<Self, Error> {
        let board =
            dmaflow::board::Board::open(std::path::Path::new(root), memory).map_err(Error::Open)?;
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
                regs: Box::new(board.registers(&d.name).map_err(Error::Window)?),
            });
        }
        let engines = names
            .into_iter()
            .map(|n| Ok(Slot::new(board.engine(&n, cfg).map_err(Error::Engine)?, n)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(BoardState {
            pool: board.pool().clone(),
            engines,
            windows,
            design: root.to_string(),
            length_width: cfg.length_width,
            emulated: None,
        })
    }

    /// The design loaded (a real board's: its root directory).
    pub(crate) fn design(&self) -> &str {
        &self.design
    }

    /// Width of the engines' length register in bits.
    pub(crate) fn length_width(&self) -> u32 {
        self.length_width
    }

    /// Whether this is the emulated board.
    pub(crate) fn emulated(&self) -> bool {
        self.emulated.is_some()
    }

    /// Engines of the design.
    pub(crate) fn engines(&self) -> usize {
        self.engines.len()
    }

    /// The engines' names, engine `i` at position `i`.
    pub(crate) fn engine_names(&self) -> Vec<String> {
        self.engines.iter().map(|s| s.name.clone()).collect()
    }

    /// Checks that engine `i` exists.
    pub(crate) fn check_engine(&self, i: usize) -> Result<(), Error> {
        if i >= self.engines.len() {
            return Err(Error::NoEngine {
                design: self.design.clone(),
                engines: self.engines.len(),
                index: i,
            });
        }
        Ok(())
    }

    /// Engine `i`, for one call (`i` checked when its user was made).
    pub(crate) fn engine(&self, i: usize) -> MutexGuard<'_, DynEngine> {
        self.engines[i]
            .engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Engine `i` if no other call holds it now (never waits: for a look
    /// taken with the GIL held).
    pub(crate) fn try_engine(&self, i: usize) -> Option<MutexGuard<'_, DynEngine>> {
        match self.engines[i].engine.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The interrupt line of engine `i`'s channel `ch`.
    pub(crate) fn line(&self, i: usize, ch: Channel) -> Arc<dyn IrqLine> {
        self.engines[i].lines[ch as usize].clone()
    }

    /// Whether engine `i` has its scatter-gather engine (`c_include_sg`).
    pub(crate) fn sg(&self, i: usize) -> bool {
        self.engines[i].sg
    }

    /// Whether engine `i`'s channel `ch` has an interrupt line here.
    pub(crate) fn wired(&self, i: usize, ch: Channel) -> bool {
        self.engines[i].wired[ch as usize]
    }

    /// Refuses engine `i` while a packet ring holds it (waiting for it would
    /// wait for the ring to be closed).
    pub(crate) fn not_in_a_ring(&self, i: usize) -> Result<(), Error> {
        if self.in_ring(i) {
            return Err(Error::InRing(i));
        }
        Ok(())
    }

    /// Whether a packet ring holds engine `i`.
    pub(crate) fn in_ring(&self, i: usize) -> bool {
        self.engines[i].in_ring.load(Ordering::Acquire)
    }

    /// A packet ring takes engine `i` (refused while another holds it).
    pub(crate) fn take_for_ring(&self, i: usize) -> Result<(), Error> {
        self.engines[i]
            .in_ring
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| Error::InRing(i))
    }

    /// The packet ring on engine `i` lets it go.
    pub(crate) fn release_from_ring(&self, i: usize) {
        self.engines[i].in_ring.store(false, Ordering::Release);
    }

    /// The register windows: `(name, physical address, size)` for each IP
    /// with registers (the engines' first).
    pub(crate) fn windows(&self) -> Vec<(String, u64, usize)> {
        self.windows
            .iter()
            .map(|w| (w.name.clone(), w.phys, w.regs.len()))
            .collect()
    }

    /// The window holding physical bytes `phys..phys + 4`, and the offset in it.
    fn window(&self, phys: u64) -> Result<(&Window, usize), Error> {
        self.windows
            .iter()
            .find(|w| phys >= w.phys && phys + 4 <= w.phys + w.regs.len() as u64)
            .map(|w| (w, (phys - w.phys) as usize))
            .ok_or_else(|| Error::NoWindow {
                design: self.design.clone(),
                phys,
            })
    }

    /// Reads the 32-bit register at physical address `phys`.
    pub(crate) fn read_register(&self, phys: u64) -> Result<u32, Error> {
        let (w, at) = self.window(phys)?;
        w.regs.read(at).map_err(Error::Register)
    }

    /// Writes the 32-bit register at physical address `phys`.
    ///
    /// # Safety
    ///
    /// As [`RegisterSpace::write`]: the caller is the IP's driver (PYNQ's
    /// MMIO, the Python program by hand).
    pub(crate) unsafe fn write_register(&self, phys: u64, value: u32) -> Result<(), Error> {
        let (w, at) = self.window(phys)?;
        // SAFETY: the caller's, above.
        unsafe { w.regs.write(at, value) }.map_err(Error::Register)
    }

    /// Loads the FIR core's taps through its register window (`fir_0`).
    pub(crate) fn load_taps(&self, taps: &[f32]) -> Result<(), Error> {
        let w = self
            .windows
            .iter()
            .find(|w| w.name == "fir_0")
            .ok_or_else(|| Error::NoFir(self.design.clone()))?;
        Ok(dmaflow::accel::fir::load_taps(&w.regs, taps)?)
    }

    /// Resets every engine to its power-on state, one at a time once
    /// nothing else holds it.
    pub(crate) fn reset(&self) -> Result<(), Error> {
        for i in 0..self.engines.len() {
            self.engine(i).dma().reset().map_err(Error::Reset)?;
        }
        Ok(())
    }

    /// Injects `faults` into the emulated fabric.
    pub(crate) fn inject(&self, faults: Faults) -> Result<(), Error> {
        let emulated = self.emulated.as_ref().ok_or(Error::NotEmulated)?;
        emulated.fabric.inject(faults);
        Ok(())
    }
}
