//! The board a server drives: the design loaded (its register windows), its
//! DMA memory and the PS registers; the emulated board running a design, or a
//! real one through the library's board layer (UIO, u-dma-buf).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dmaflow::axi::regs::{DMACR, DMACR_RESET, MM2S};
use dmaflow::mem::{DmaBuf, DmaPool};
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, REGISTER_WINDOW, SimBoard};
use dmaflow::platform::{MemoryModel, RegisterSpace};
use dmaflow::rig::policy_for;
use dmaflow::sim::{Clock, Fabric, Loopback, StreamProcessor};

use crate::Error;
use crate::design::{Design, Dma, Ip};

/// DMA memory of the emulated board.
pub const EMULATED_DDR_BYTES: usize = 256 << 20;
/// Most words of plain memory kept for the IP the emulator does not model.
const PLAIN_WORDS: usize = 1 << 20;

/// Registers of an IP: the device's (emulated or real), or plain memory for
/// IP the emulator does not model.
enum Regs {
    /// The device's register window.
    Device(Box<dyn RegisterSpace>),
    /// Words written, read back as written (0 until then).
    Plain(std::sync::Mutex<std::collections::BTreeMap<u64, u32>>),
}

/// One IP's register window.
struct Window {
    ip: Ip,
    regs: Regs,
}

/// The emulated hardware, kept running while the design is loaded: one
/// fabric per board, the boards on one bus (the server's [`Ddr`]). The
/// fabrics go before the boards they are attached to.
struct Emulated {
    _fabrics: Vec<Fabric>,
    _boards: Vec<SimBoard>,
}

/// The emulated board's DMA memory, one for the server's life: each design
/// loaded is built over it (its engines reach this DDR), and buffers come
/// from its one pool whatever design is loaded.
pub(crate) struct Ddr {
    /// A board of no windows that holds the DDR the designs' boards share.
    root: SimBoard,
    pool: DmaPool,
    bytes: usize,
}

impl Ddr {
    /// `bytes` of DDR at the emulated board's DDR base, with CPU caches as
    /// `model` says.
    pub(crate) fn new(model: MemoryModel, bytes: usize) -> Result<Self, Error> {
        let root = SimBoard::with_model(0, bytes, DEFAULT_DDR_BASE, 0, model)?;
        let pool = DmaPool::new(Arc::new(root.memory()?), policy_for(model))?;
        Ok(Ddr { root, pool, bytes })
    }
}

/// Register windows of emulated IP, by instance name.
type Devices = std::collections::HashMap<String, Box<dyn RegisterSpace>>;

impl Emulated {
    /// A built-in design: its own stream processor behind its engines (one
    /// board, one fabric), and the core's control registers if it has any.
    fn core(
        design: &Design,
        core: Box<dyn StreamProcessor>,
        ddr: &Ddr,
    ) -> Result<(Self, Devices), Error> {
        let dmas: Vec<(&Ip, Dma)> = design.dmas().collect();
        let sg = dmas.first().is_some_and(|(_, d)| d.params.include_sg);
        let n = core.streams().max(1);
        let control = core.control_bytes() > 0;
        let board = ddr.root.sharing_ddr(n + usize::from(control), 2 * n)?;
        let fabric = Fabric::with_processor(&board, Clock::Unlimited, sg, core)?;
        if let Some((_, d)) = dmas.first() {
            fabric.set_length_width(d.params.sg_length_width)?;
        }
        // A board does not refuse a register write; what PG021 leaves
        // undefined is recorded, not failed.
        fabric.set_strict(false);
        let mut regs = Devices::new();
        for (i, (ip, _)) in dmas.iter().enumerate().take(n) {
            regs.insert(ip.name.clone(), Box::new(board.registers(i)?));
        }
        if control && let Some(ip) = design.ips.iter().find(|ip| ip.dma.is_none()) {
            regs.insert(ip.name.clone(), Box::new(board.registers(n)?));
        }
        Ok((
            Emulated {
                _fabrics: vec![fabric],
                _boards: vec![board],
            },
            regs,
        ))
    }

    /// A user's design: each AXI DMA on a board of its own sharing the first
    /// board's DDR, with a fabric built as that DMA is (direct or
    /// scatter-gather, its length width), its streams looped back.
    fn loopbacks(design: &Design, ddr: &Ddr) -> Result<(Self, Devices), Error> {
        let mut boards = Vec::new();
        let mut fabrics = Vec::new();
        let mut regs = Devices::new();
        for (i, (ip, d)) in design.dmas().enumerate() {
            boards.push(ddr.root.sharing_ddr(1, 2)?);
            let board = &boards[i];
            let fabric = Fabric::with_processor(
                board,
                Clock::Unlimited,
                d.params.include_sg,
                Box::new(Loopback),
            )?;
            fabric.set_length_width(d.params.sg_length_width)?;
            fabric.set_strict(false);
            fabrics.push(fabric);
            regs.insert(ip.name.clone(), Box::new(board.registers(0)?));
        }
        Ok((
            Emulated {
                _fabrics: fabrics,
                _boards: boards,
            },
            regs,
        ))
    }
}

/// A design loaded on the board.
pub(crate) struct Loaded {
    /// The design.
    pub(crate) design: Design,
    windows: Vec<Window>,
    /// The DMA memory buffers come from.
    pub(crate) pool: DmaPool,
    /// What the emulator does not model, said at start.
    pub(crate) notes: Vec<String>,
    _emulated: Option<Emulated>,
}

/// What a register access was refused for.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AccessError {
    /// Outside every IP's window and every PS register block.
    #[error(
        "{addr:#x}..{end:#x} is outside every IP of the {design:?} design and the PS registers"
    )]
    Unmapped {
        /// First byte.
        addr: u64,
        /// One past the last byte.
        end: u64,
        /// The design loaded.
        design: String,
    },
    /// The device refused it.
    #[error("{ip} at offset {offset:#x}: {reason}")]
    Device {
        /// The IP.
        ip: String,
        /// Offset in its window.
        offset: u64,
        /// What the device said.
        reason: String,
    },
    /// The plain memory of an IP is full.
    #[error("{0}: the plain memory standing in for this IP is full")]
    Full(String),
}

impl Loaded {
    /// The emulated board running `design` over the server's `ddr`: a
    /// built-in design's own stream processor behind its engines; for any
    /// other design each AXI DMA it declares at its address, built with its
    /// own parameters, its streams looped back, and the rest as plain memory
    /// (said in [`notes`](Self::notes)).
    pub(crate) fn emulate(design: Design, ddr: &Ddr) -> Result<Self, Error> {
        let ddr_end = DEFAULT_DDR_BASE + ddr.bytes as u64;
        if let Some(ip) = design
            .ips
            .iter()
            .find(|ip| ip.base < ddr_end && ip.base + ip.range > DEFAULT_DDR_BASE)
        {
            return Err(Error::Design(format!(
                "{} at {:#x} overlaps the emulated board's DDR ({DEFAULT_DDR_BASE:#x}..{ddr_end:#x})",
                ip.name, ip.base
            )));
        }
        let builtin = Design::builtin(&design.name).is_some_and(|b| b == design);
        let (emulated, mut regs) = match design.builtin_core().filter(|_| builtin) {
            Some(core) => Emulated::core(&design, core, ddr)?,
            None => Emulated::loopbacks(&design, ddr)?,
        };
        let pool = ddr.pool.clone();
        let mut notes = Vec::new();
        let mut windows = Vec::new();
        for ip in &design.ips {
            let regs = match regs.remove(&ip.name) {
                Some(r) => Regs::Device(r),
                None => {
                    notes.push(format!(
                        "{} ({}) at {:#x}: not emulated, its registers are plain memory",
                        ip.name, ip.vlnv, ip.base
                    ));
                    Regs::Plain(Default::default())
                }
            };
            if let Regs::Device(r) = &regs
                && (ip.range as usize) > r.len().max(REGISTER_WINDOW)
            {
                notes.push(format!(
                    "{}: its {} bytes of address range beyond the first {} read as the window's end",
                    ip.name,
                    ip.range,
                    r.len()
                ));
            }
            windows.push(Window {
                ip: ip.clone(),
                regs,
            });
        }
        Ok(Loaded {
            design,
            windows,
            pool,
            notes,
            _emulated: Some(emulated),
        })
    }

    /// A real board under `root` (`/` on the board), through UIO and the
    /// u-dma-buf `memory`: each UIO device with registers is an IP window,
    /// named as its device; `design`, where given, names the IP instead (a
    /// UIO device by its instance name, the rest plain memory).
    pub(crate) fn open(root: &Path, memory: &str, design: Option<Design>) -> Result<Self, Error> {
        let board = dmaflow::board::Board::open(root, memory).map_err(|e| Error::Board {
            root: root.to_path_buf(),
            reason: e.to_string(),
        })?;
        let inv = board.inventory();
        let design = design.unwrap_or_else(|| Design {
            name: root.display().to_string(),
            ips: inv
                .uio
                .iter()
                .filter(|d| d.size > 0)
                .map(|d| Ip {
                    name: d.name.clone(),
                    vlnv: String::new(),
                    base: d.addr,
                    range: d.size,
                    dma: None,
                    registers: &[],
                    parameters: Vec::new(),
                })
                .collect(),
        });
        let mut notes = Vec::new();
        let mut windows = Vec::new();
        for ip in &design.ips {
            let regs = match board.registers(&ip.name) {
                Ok(r) => Regs::Device(Box::new(r)),
                Err(e) => {
                    notes.push(format!("{}: {e}; its registers are plain memory", ip.name));
                    Regs::Plain(Default::default())
                }
            };
            windows.push(Window {
                ip: ip.clone(),
                regs,
            });
        }
        Ok(Loaded {
            pool: board.pool().clone(),
            design,
            windows,
            notes,
            _emulated: None,
        })
    }

    /// The window holding `addr..addr + len`, and `addr`'s offset in it.
    fn window(&self, addr: u64, len: u64) -> Option<(&Window, u64)> {
        self.windows.iter().find_map(|w| {
            let end = addr.checked_add(len)?;
            (addr >= w.ip.base && end <= w.ip.base + w.ip.range).then(|| (w, addr - w.ip.base))
        })
    }

    /// Whether `addr..addr + len` lies in one IP's window.
    pub(crate) fn maps(&self, addr: u64, len: u64) -> bool {
        self.window(addr, len).is_some()
    }

    /// Reads the 32-bit register at `addr` (4-byte aligned, checked by the
    /// caller with [`maps`](Self::maps) or here).
    pub(crate) fn read(&self, addr: u64) -> Result<u32, AccessError> {
        let (w, offset) = self.window(addr, 4).ok_or_else(|| self.unmapped(addr))?;
        match &w.regs {
            Regs::Device(r) if (offset as usize) + 4 <= r.len() => {
                r.read(offset as usize).map_err(|e| device(w, offset, e))
            }
            Regs::Device(_) => Ok(0),
            Regs::Plain(m) => Ok(m
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&offset)
                .copied()
                .unwrap_or(0)),
        }
    }

    /// Writes the 32-bit register at `addr`, as PYNQ's MMIO does: the client
    /// drives the IP by hand.
    pub(crate) fn write(&self, addr: u64, value: u32) -> Result<(), AccessError> {
        let (w, offset) = self.window(addr, 4).ok_or_else(|| self.unmapped(addr))?;
        match &w.regs {
            Regs::Device(r) if (offset as usize) + 4 <= r.len() => {
                // SAFETY: the writes that can start an AXI DMA (its channel
                // registers) never come here: the server's engine view
                // (`crate::engine`) programs them with addresses it has
                // checked. What remains is an IP's own registers, which
                // start no DMA the server knows of: the emulated board's IP
                // other than AXI DMA reach no memory; on a real board served
                // without its `.hwh`, no IP is known as an AXI DMA and each is
                // driven by hand, as pynq-cpp serves it.
                unsafe { r.write(offset as usize, value) }.map_err(|e| device(w, offset, e))
            }
            Regs::Device(_) => Ok(()),
            Regs::Plain(m) => {
                let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
                if m.len() >= PLAIN_WORDS && !m.contains_key(&offset) {
                    return Err(AccessError::Full(w.ip.name.clone()));
                }
                m.insert(offset, value);
                Ok(())
            }
        }
    }

    /// The refusal of an access at `addr`.
    fn unmapped(&self, addr: u64) -> AccessError {
        AccessError::Unmapped {
            addr,
            end: addr.saturating_add(4),
            design: self.design.name.clone(),
        }
    }

    /// The AXI DMA engines of the design with a device behind them: the IP
    /// and its register window.
    pub(crate) fn engines(&self) -> impl Iterator<Item = (&Ip, Dma, &dyn RegisterSpace)> {
        self.windows
            .iter()
            .filter_map(|w| match (&w.regs, w.ip.dma) {
                (Regs::Device(r), Some(d)) => Some((&w.ip, d, r.as_ref())),
                _ => None,
            })
    }

    /// Resets every DMA engine of the design (PG021's soft reset: both
    /// channels halted, registers cleared), as loading the design does.
    pub(crate) fn reset(&self) {
        for (_, _, r) in self.engines() {
            // SAFETY: a soft reset stops the engine; it starts nothing.
            let _ = unsafe { r.write(MM2S + DMACR, DMACR_RESET) };
        }
    }
}

/// A device's refusal of an access.
fn device(w: &Window, offset: u64, e: impl std::fmt::Display) -> AccessError {
    AccessError::Device {
        ip: w.ip.name.clone(),
        offset,
        reason: e.to_string(),
    }
}

/// A buffer of DMA memory a client allocated.
pub(crate) struct Buffer {
    /// The connection that allocated it (no other reaches it).
    pub(crate) owner: u64,
    /// Its memory, whole 32-bit words.
    pub(crate) buf: DmaBuf<u32>,
    /// Bytes the client asked for.
    pub(crate) bytes: usize,
    /// Its DMA memory, charged to its client until it goes.
    pub(crate) _charge: crate::caps::Charge,
    /// The design loaded when it was allocated (its memory is that board's).
    pub(crate) loaded: Arc<Loaded>,
}

impl Buffer {
    /// Copies `data` in at byte `at` (inside the buffer, checked by the
    /// caller), word by word: the device may be reading it meanwhile.
    pub(crate) fn write(&mut self, at: usize, data: &[u8]) {
        let mut i = at;
        let mut rest = data;
        while !i.is_multiple_of(4) && !rest.is_empty() {
            self.put_byte(i, rest[0]);
            i += 1;
            rest = &rest[1..];
        }
        let words = rest.chunks_exact(4);
        let tail = words.remainder();
        for c in words {
            self.buf
                .write_volatile(i / 4, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            i += 4;
        }
        for &b in tail {
            self.put_byte(i, b);
            i += 1;
        }
    }

    /// Writes byte `i` of the buffer.
    fn put_byte(&mut self, i: usize, b: u8) {
        let shift = (i % 4) * 8;
        let old = self.buf.load_word(i / 4).unwrap_or(0);
        self.buf
            .write_volatile(i / 4, (old & !(0xFF << shift)) | (u32::from(b) << shift));
    }

    /// Bytes `from..to` (inside the buffer, checked by the caller), word by
    /// word: the device may be writing it meanwhile.
    pub(crate) fn read(&self, from: usize, to: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(to - from);
        let first = from / 4;
        let last = to.div_ceil(4);
        for w in first..last {
            let bytes = self.buf.load_word(w).unwrap_or(0).to_le_bytes();
            let lo = if w == first { from % 4 } else { 0 };
            let hi = if w * 4 + 4 > to { to - w * 4 } else { 4 };
            out.extend_from_slice(&bytes[lo..hi]);
        }
        out
    }
}

/// Where the served board comes from.
#[derive(Debug, Clone)]
pub enum Target {
    /// The emulated board: the built-in designs (the bitstream downloaded
    /// names one), or the user's design read from a `.hwh`.
    Emulated {
        /// A user's design, loaded whatever bitstream is downloaded.
        hwh: Option<PathBuf>,
        /// How the CPU's caches relate to DMA memory.
        model: MemoryModel,
    },
    /// A real board under `root`, buffers from the u-dma-buf `memory`.
    Board {
        /// `/` on the board.
        root: PathBuf,
        /// The u-dma-buf's name.
        memory: String,
        /// The design's `.hwh`, naming its IP.
        hwh: Option<PathBuf>,
    },
}
