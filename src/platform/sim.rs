//! The sim platform: the "board" the emulated fabric lives on. A register page and a
//! "DDR" region are memory objects (memfd) mapped once for the CPU side and once for
//! the device side, as a real device and CPU see the same physical memory; interrupt
//! lines are eventfds with UIO's masking semantics.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustix::event::{EventfdFlags, eventfd};
use rustix::fs::{MemfdFlags, ftruncate, memfd_create};

use super::map::Mapping;
use super::shared_copy::{copy_from_shared, copy_to_shared};
use super::sim_cache::{CpuCache, MemoryModel};
use super::{DmaMemory, Error, IrqLine, RegisterSpace, check_range, wait_readable};

/// Default size of the emulated DDR region.
pub const DEFAULT_DDR_BYTES: usize = 64 << 20;
/// Default bus address of the emulated DDR region.
pub const DEFAULT_DDR_BASE: u64 = 0x1000_0000;
/// Size of one register window (the AXI DMA IP's 64 KiB address range).
pub const REGISTER_WINDOW: usize = 0x1_0000;

fn os_err(what: &str) -> impl FnOnce(rustix::io::Errno) -> Error + '_ {
    move |e| Error::Io {
        path: what.to_string(),
        source: e.into(),
    }
}

fn memfd(name: &str, len: usize) -> Result<OwnedFd, Error> {
    let fd = memfd_create(name, MemfdFlags::CLOEXEC).map_err(os_err(name))?;
    ftruncate(&fd, len as u64).map_err(os_err(name))?;
    Ok(fd)
}

/// Where the CPU's register writes go once a device model is attached: the model
/// applies them with the IP's semantics (write-1-to-clear bits, self-clearing reset,
/// a LENGTH write that starts a transfer) and keeps the register page, which the CPU
/// reads directly, up to date.
pub trait BusTarget: Send + Sync {
    /// The CPU wrote `value` to `offset` of register window `window`; an error
    /// when the model refuses the access (a protocol checker in strict mode).
    fn write(&self, window: usize, offset: usize, value: u32) -> Result<(), Error>;
}

type Target = Arc<std::sync::OnceLock<Arc<dyn BusTarget>>>;

/// One interrupt line's state: UIO masks the line after each interrupt until the
/// program re-enables it; an interrupt raised while masked stays pending.
struct Line {
    fd: OwnedFd,
    /// (armed, pending, count)
    state: Mutex<(bool, bool, u32)>,
    /// Operations on the line so far: (enables, waits, interrupts raised).
    ops: [std::sync::atomic::AtomicU64; 3],
}

/// What a program did with an emulated interrupt line, counted: on a board
/// each enable is a `write()` to the UIO device and each wait a `poll()` and
/// a `read()`, so these count the system calls a driver makes on the line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineOps {
    /// [`IrqLine::enable`] calls (re-arms).
    pub enables: u64,
    /// [`IrqLine::wait`] calls (sleeps, whether an interrupt or the timeout
    /// ended them).
    pub waits: u64,
    /// Interrupts the device raised on the line (delivered or left pending).
    pub raised: u64,
}

impl LineOps {
    /// Operations since `before` (a count taken earlier on the same line).
    pub fn since(self, before: LineOps) -> LineOps {
        LineOps {
            enables: self.enables - before.enables,
            waits: self.waits - before.waits,
            raised: self.raised - before.raised,
        }
    }
}

/// CPU time the emulated devices' threads spent delivering interrupts, in
/// nanoseconds, over every board of the process.
static DELIVERY_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// CPU time spent so far, by every emulated board of this process, delivering
/// interrupts: the eventfd write that signals a line and the wake-up of the
/// thread waiting on it, which the kernel does on the signalling (device)
/// thread. On a board that work is the interrupt handler's, on the host CPU,
/// so a measurement of what waiting on an interrupt costs the host includes
/// it.
pub fn interrupt_delivery_cpu() -> std::time::Duration {
    std::time::Duration::from_nanos(DELIVERY_NS.load(std::sync::atomic::Ordering::Relaxed))
}

impl Line {
    fn count(&self, op: usize) {
        self.ops[op].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn signal(&self) {
        let before = super::cpu::thread_cpu_time();
        // An eventfd write of 1 only fails on counter overflow, which needs 2^64
        // unread interrupts.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
        let spent = super::cpu::thread_cpu_time().saturating_sub(before);
        DELIVERY_NS.fetch_add(
            spent.as_nanos().min(u64::MAX as u128) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    fn raise(&self) {
        self.count(2);
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.2 = s.2.wrapping_add(1);
        if s.0 {
            s.0 = false;
            drop(s);
            self.signal();
        } else {
            s.1 = true;
        }
    }
}

/// `n` register windows, each zeroed.
fn windows_of(n: usize) -> Result<Vec<OwnedFd>, Error> {
    (0..n)
        .map(|i| memfd(&format!("dmaflow-sim-regs{i}"), REGISTER_WINDOW))
        .collect()
}

/// `n` interrupt lines, each enabled and not pending.
fn lines_of(n: usize) -> Result<Vec<Arc<Line>>, Error> {
    (0..n)
        .map(|_| {
            let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
                .map_err(os_err("eventfd"))?;
            Ok(Arc::new(Line {
                fd,
                state: Mutex::new((true, false, 0)),
                ops: Default::default(),
            }))
        })
        .collect()
}

/// An emulated board: register windows, a DDR region and interrupt lines.
pub struct SimBoard {
    regs: Vec<OwnedFd>,
    ddr: OwnedFd,
    /// On a non-coherent board: the CPU's cached view of DDR, and its cache state.
    cache: Option<(OwnedFd, Arc<CpuCache>)>,
    /// Device reads of lines the CPU wrote and did not clean.
    uncleaned: Arc<Mutex<Vec<u64>>>,
    ddr_bytes: usize,
    ddr_base: u64,
    lines: Vec<Arc<Line>>,
    target: Target,
    /// This board's bus: its own address space ([`DmaMemory::domain`]).
    domain: u64,
}

/// Emulated boards' buses are numbered from 1 ([`super::PHYSICAL`] is 0).
static NEXT_DOMAIN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl SimBoard {
    /// A board with `windows` register windows, `ddr_bytes` of DDR at bus address
    /// `ddr_base` and `irq_lines` interrupt lines; coherent.
    pub fn new(
        windows: usize,
        ddr_bytes: usize,
        ddr_base: u64,
        irq_lines: usize,
    ) -> Result<Self, Error> {
        Self::with_model(
            windows,
            ddr_bytes,
            ddr_base,
            irq_lines,
            MemoryModel::Coherent,
        )
    }

    /// Like [`new`](Self::new), with the CPU caches related to DDR as `model`
    /// says: on a [`MemoryModel::NonCoherent`] board the CPU works on its own copy
    /// of DDR, which only cache maintenance ([`DmaMemory::sync_for_device`],
    /// [`DmaMemory::sync_for_cpu`]) exchanges with what the device sees.
    pub fn with_model(
        windows: usize,
        ddr_bytes: usize,
        ddr_base: u64,
        irq_lines: usize,
        model: MemoryModel,
    ) -> Result<Self, Error> {
        let regs = windows_of(windows)?;
        let ddr = memfd("dmaflow-sim-ddr", ddr_bytes)?;
        let cache = match model {
            MemoryModel::Coherent => None,
            MemoryModel::NonCoherent => {
                let view = memfd("dmaflow-sim-cpu-cache", ddr_bytes)?;
                let state = CpuCache::new(
                    Mapping::new(&view, ddr_bytes, 0, "sim CPU cache")?,
                    Mapping::new(&ddr, ddr_bytes, 0, "sim DDR (cache)")?,
                );
                Some((view, Arc::new(state)))
            }
        };
        let lines = lines_of(irq_lines)?;
        Ok(SimBoard {
            regs,
            ddr,
            cache,
            uncleaned: Arc::default(),
            ddr_bytes,
            ddr_base,
            lines,
            target: Target::default(),
            domain: NEXT_DOMAIN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// Another board on the same bus: `windows` register windows and
    /// `irq_lines` interrupt lines of its own, and this board's DDR (the same
    /// memory at the same bus addresses, seen through the same CPU caches).
    /// A second fabric attaches to it, so that engines built differently
    /// (one in direct mode, one with scatter-gather) reach one DDR.
    pub fn sharing_ddr(&self, windows: usize, irq_lines: usize) -> Result<Self, Error> {
        let dup = |fd: &OwnedFd| {
            fd.try_clone().map_err(|source| Error::Io {
                path: "sim DDR".into(),
                source,
            })
        };
        let regs = windows_of(windows)?;
        let cache = match &self.cache {
            None => None,
            Some((view, state)) => Some((dup(view)?, state.clone())),
        };
        let lines = lines_of(irq_lines)?;
        Ok(SimBoard {
            regs,
            ddr: dup(&self.ddr)?,
            cache,
            uncleaned: self.uncleaned.clone(),
            ddr_bytes: self.ddr_bytes,
            ddr_base: self.ddr_base,
            lines,
            target: Target::default(),
            domain: self.domain,
        })
    }

    /// How the board's CPU caches relate to DDR.
    pub fn model(&self) -> MemoryModel {
        match self.cache {
            None => MemoryModel::Coherent,
            Some(_) => MemoryModel::NonCoherent,
        }
    }

    /// The CPU's view of register window `i`.
    pub fn registers(&self, i: usize) -> Result<SimRegisters, Error> {
        let fd = self.regs.get(i).ok_or(Error::BadOffset {
            offset: i,
            len: self.regs.len(),
        })?;
        Ok(SimRegisters {
            map: Mapping::new(fd, REGISTER_WINDOW, 0, "sim register window")?,
            window: i,
            target: self.target.clone(),
        })
    }

    /// Routes the CPU's register writes to a device model (once per board).
    pub fn attach(&self, target: Arc<dyn BusTarget>) -> bool {
        self.target.set(target).is_ok()
    }

    /// The CPU's view of the DDR region.
    pub fn memory(&self) -> Result<SimMemory, Error> {
        let (fd, cache) = match &self.cache {
            None => (&self.ddr, None),
            Some((view, state)) => (view, Some(state.clone())),
        };
        Ok(SimMemory {
            map: Mapping::new(fd, self.ddr_bytes, 0, "sim DDR")?,
            file: fd.try_clone().map_err(|source| Error::Io {
                path: "sim DDR".into(),
                source,
            })?,
            bus_base: self.ddr_base,
            cache,
            domain: self.domain,
        })
    }

    /// The CPU's end of interrupt line `i`.
    pub fn irq(&self, i: usize) -> Result<SimIrq, Error> {
        let line = self.lines.get(i).ok_or(Error::BadOffset {
            offset: i,
            len: self.lines.len(),
        })?;
        Ok(SimIrq { line: line.clone() })
    }

    /// The device's view of the board, for the emulated fabric.
    pub fn device(&self) -> Result<DeviceView, Error> {
        Ok(DeviceView {
            regs: self
                .regs
                .iter()
                .map(|fd| Mapping::new(fd, REGISTER_WINDOW, 0, "sim register window (device)"))
                .collect::<Result<_, _>>()?,
            ddr: Mapping::new(&self.ddr, self.ddr_bytes, 0, "sim DDR (device)")?,
            ddr_base: self.ddr_base,
            lines: self.lines.clone(),
            cache: self.cache.as_ref().map(|(_, c)| c.clone()),
            uncleaned: self.uncleaned.clone(),
        })
    }

    /// Fault injection on a non-coherent board: when on, the CPU's dirty cache
    /// lines over memory the device writes are written back right after it,
    /// overwriting the device's data, as an eviction may at any time. A driver that
    /// cleans and invalidates receive buffers before the device writes them is
    /// immune; one that does not reads its own stale bytes. No effect on a
    /// coherent board.
    pub fn set_dirty_eviction(&self, on: bool) {
        if let Some((_, c)) = &self.cache {
            c.set_eviction(on);
        }
    }

    /// Seeded random eviction on a non-coherent board (`None`: off, the
    /// default): at every device write, some of the CPU's lines over it and a
    /// few anywhere are written back if dirty, as a real cache evicts at any
    /// moment. A driver that leaves no dirty line over memory the device writes
    /// is immune. No effect on a coherent board.
    pub fn set_random_eviction(&self, seed: Option<u64>) {
        if let Some((_, c)) = &self.cache {
            c.set_random_eviction(seed);
        }
    }

    /// Whether an invalidate for the CPU ([`DmaMemory::sync_for_cpu`]) discards
    /// the CPU's dirty lines wholly inside its range, as ARM's
    /// `dma_sync_*_for_cpu` from the device does (on, the default), or writes
    /// them back first (off: kinder than the boards). No effect on a coherent
    /// board.
    pub fn set_discard_on_invalidate(&self, on: bool) {
        if let Some((_, c)) = &self.cache {
            c.set_discard(on);
        }
    }

    /// Device reads of memory the CPU wrote and did not clean, on a non-coherent
    /// board: the bus address of the first dirty line of each such read, oldest
    /// first (at most 64 kept). On a board they read stale data.
    pub fn uncleaned_reads(&self) -> Vec<u64> {
        self.uncleaned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The CPU's view of a sim register window.
pub struct SimRegisters {
    map: Mapping,
    window: usize,
    target: Target,
}

impl RegisterSpace for SimRegisters {
    fn read(&self, offset: usize) -> Result<u32, Error> {
        self.map.load_u32(offset)
    }
    unsafe fn write(&self, offset: usize, value: u32) -> Result<(), Error> {
        match self.target.get() {
            Some(t) => {
                // Same bounds as a plain store, so a bad offset is an error either way.
                self.map.check_offset(offset)?;
                t.write(self.window, offset, value)
            }
            None => self.map.store_u32(offset, value),
        }
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// The CPU's view of the sim DDR region. On a coherent board it is DDR itself,
/// and maintenance, when asked for, is the host CPU's own (`clflushopt` over the
/// range, then `sfence`), so its cost can be measured. On a non-coherent board it
/// is the CPU's cached copy, and maintenance moves lines between it and DDR.
pub struct SimMemory {
    map: Mapping,
    /// The memory object mapped (the CPU's view).
    file: OwnedFd,
    bus_base: u64,
    cache: Option<Arc<CpuCache>>,
    domain: u64,
}

impl SimMemory {
    /// One cache operation over a range: the modelled cache's on a non-coherent
    /// board, the host CPU's on a coherent one.
    fn maintain(&self, op: super::cache::Op, offset: usize, len: usize) -> Result<(), Error> {
        check_range(offset, len, self.size())?;
        match (&self.cache, op) {
            (Some(c), super::cache::Op::Clean) => c.clean(offset, len),
            (Some(c), super::cache::Op::CleanInvalidate) => c.invalidate_for_cpu(offset, len),
            (None, _) => {
                // Only the addresses are used (no byte is read or written), and
                // the range was checked to lie inside the mapping.
                let start = self.map.base().wrapping_add(offset);
                super::cache::maintain(op, start, len);
            }
        }
        Ok(())
    }
}

// SAFETY: the mapping covers the whole DDR object and lives as long as the
// value; byte `k` of it is what the device thread reaches at `bus_base + k`
// (through the cache model on a non-coherent board); the domain is the board's
// own number, drawn once per board; maintenance checks its range.
unsafe impl DmaMemory for SimMemory {
    fn domain(&self) -> u64 {
        self.domain
    }
    fn name(&self) -> String {
        format!("emulated board {} DDR at {:#x}", self.domain, self.bus_base)
    }
    fn cpu_base(&self) -> *mut u8 {
        self.map.base()
    }
    fn size(&self) -> usize {
        self.map.len()
    }
    fn bus_base(&self) -> u64 {
        self.bus_base
    }
    fn coherent(&self) -> bool {
        self.cache.is_none()
    }
    fn sync_for_device(&self, offset: usize, len: usize) -> Result<(), Error> {
        self.maintain(super::cache::Op::Clean, offset, len)
    }
    fn sync_for_cpu(&self, offset: usize, len: usize) -> Result<(), Error> {
        // On the host, invalidation is the same flush: the next read misses and
        // fetches what the device wrote.
        self.maintain(super::cache::Op::CleanInvalidate, offset, len)
    }
    fn file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        use std::os::fd::AsFd;
        Some((self.file.as_fd(), 0))
    }
}

/// The CPU's end of a sim interrupt line.
pub struct SimIrq {
    line: Arc<Line>,
}

impl SimIrq {
    /// The operations on this line so far (every handle to the line shares
    /// the count).
    pub fn operations(&self) -> LineOps {
        let n = |i: usize| self.line.ops[i].load(std::sync::atomic::Ordering::Relaxed);
        LineOps {
            enables: n(0),
            waits: n(1),
            raised: n(2),
        }
    }
}

impl IrqLine for SimIrq {
    fn wait(&self, timeout: Duration) -> Result<u32, Error> {
        self.line.count(1);
        loop {
            wait_readable(&self.line.fd, timeout, "eventfd")?;
            let mut buf = [0u8; 8];
            match rustix::io::read(self.line.fd.as_fd(), &mut buf) {
                Ok(_) => {
                    let s = self
                        .line
                        .state
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    return Ok(s.2);
                }
                // Another waiter took it first.
                Err(rustix::io::Errno::AGAIN) => continue,
                Err(e) => return Err(os_err("eventfd")(e)),
            }
        }
    }

    fn enable(&self) -> Result<(), Error> {
        let mut s = self
            .line
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Armed already (no interrupt since the last enable): no system call
        // on a board, none counted here.
        if s.0 {
            return Ok(());
        }
        self.line.count(0);
        if s.1 {
            s.1 = false;
            drop(s);
            self.line.signal();
        } else {
            s.0 = true;
        }
        Ok(())
    }
}

/// The emulated device's view of the board: its register windows, the DDR region
/// by bus address, and its interrupt outputs.
pub struct DeviceView {
    regs: Vec<Mapping>,
    ddr: Mapping,
    ddr_base: u64,
    lines: Vec<Arc<Line>>,
    cache: Option<Arc<CpuCache>>,
    uncleaned: Arc<Mutex<Vec<u64>>>,
}

/// A bus access outside the DDR region (the AXI DECERR response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no memory at bus address {addr:#x} (+{len:#x})")]
pub struct DecodeError {
    /// Bus address.
    pub addr: u64,
    /// Length of the access.
    pub len: usize,
}

impl DeviceView {
    /// Number of register windows.
    pub fn windows(&self) -> usize {
        self.regs.len()
    }

    /// Number of interrupt lines.
    pub fn lines(&self) -> usize {
        self.lines.len()
    }

    /// Reads register `offset` of window `w`.
    pub fn reg(&self, w: usize, offset: usize) -> u32 {
        self.regs
            .get(w)
            .and_then(|m| m.load_u32(offset).ok())
            .unwrap_or(0)
    }

    /// Writes register `offset` of window `w`, with release ordering: the data
    /// the device wrote before a status bit is visible to a driver that sees the
    /// bit and issues its read barrier ([`crate::platform::dma_rmb`]).
    pub fn set_reg(&self, w: usize, offset: usize, value: u32) {
        if let Some(m) = self.regs.get(w) {
            let _ = m.store_u32(offset, value);
        }
    }

    fn ddr_offset(&self, addr: u64, len: usize) -> Result<usize, DecodeError> {
        let err = DecodeError { addr, len };
        let off = usize::try_from(addr.checked_sub(self.ddr_base).ok_or(err)?).map_err(|_| err)?;
        check_range(off, len, self.ddr.len()).map_err(|_| err)?;
        Ok(off)
    }

    /// Copies `out.len()` bytes from bus address `addr` (an MM2S read).
    pub fn read_ddr(&self, addr: u64, out: &mut [u8]) -> Result<(), DecodeError> {
        let off = self.ddr_offset(addr, out.len())?;
        if let Some(line) = self
            .cache
            .as_ref()
            .and_then(|c| c.first_dirty(off, out.len()))
        {
            let mut seen = self
                .uncleaned
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if seen.len() < 64 {
                seen.push(self.ddr_base + line as u64);
            }
        }
        // SAFETY: the range lies inside the mapping (checked), which lives as
        // long as `self`; the copy reads it with atomic accesses only.
        unsafe { copy_from_shared(self.ddr.base().add(off), out) };
        Ok(())
    }

    /// Copies `data` to bus address `addr` (an S2MM write).
    pub fn write_ddr(&self, addr: u64, data: &[u8]) -> Result<(), DecodeError> {
        let off = self.ddr_offset(addr, data.len())?;
        // SAFETY: as in `read_ddr`; the copy writes with atomic accesses only.
        unsafe { copy_to_shared(data, self.ddr.base().add(off)) };
        if let Some(c) = &self.cache {
            c.device_wrote(off, data.len());
        }
        Ok(())
    }

    /// Reads a little-endian 32-bit word at bus address `addr` (descriptor fields).
    pub fn read_word(&self, addr: u64) -> Result<u32, DecodeError> {
        let mut b = [0u8; 4];
        self.read_ddr(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// On a non-coherent board: the bus address of the first line of
    /// `addr..addr + len` that the device wrote and the CPU has not invalidated
    /// since (`None` on a coherent board, or when every line was invalidated).
    pub fn first_uninvalidated(&self, addr: u64, len: usize) -> Option<u64> {
        let off = self.ddr_offset(addr, len).ok()?;
        let line = self.cache.as_ref()?.first_unread(off, len)?;
        Some(self.ddr_base + line as u64)
    }

    /// Writes a little-endian 32-bit word at bus address `addr` (a descriptor's
    /// status) with one atomic store with release ordering where it is aligned:
    /// the data written before it is visible to a driver that sees the word and
    /// issues its read barrier ([`crate::platform::dma_rmb`]).
    pub fn write_word(&self, addr: u64, value: u32) -> Result<(), DecodeError> {
        let off = self.ddr_offset(addr, 4)?;
        if !off.is_multiple_of(4) {
            return self.write_ddr(addr, &value.to_le_bytes());
        }
        // SAFETY: the word lies inside the mapping (checked) and is aligned; the
        // driver reads such words atomically too (`DmaBuf::load_word`).
        let word =
            unsafe { std::sync::atomic::AtomicU32::from_ptr(self.ddr.base().add(off).cast()) };
        word.store(value.to_le(), std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Raises interrupt line `i`.
    pub fn raise(&self, i: usize) {
        if let Some(l) = self.lines.get(i) {
            l.raise();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_device_see_the_same_registers_and_memory() {
        let b = SimBoard::new(1, 1 << 20, DEFAULT_DDR_BASE, 1).unwrap();
        let regs = b.registers(0).unwrap();
        let mem = b.memory().unwrap();
        let dev = b.device().unwrap();
        // SAFETY: no device model is attached: the write only stores the word.
        unsafe { regs.write(0x30, 0xDEAD_BEEF) }.unwrap();
        assert_eq!(dev.reg(0, 0x30), 0xDEAD_BEEF);
        dev.set_reg(0, 0x34, 7);
        assert_eq!(regs.read(0x34).unwrap(), 7);
        dev.write_ddr(DEFAULT_DDR_BASE + 100, b"hello").unwrap();
        // SAFETY: 5 bytes at offset 100 of the 1 MiB region, written just above.
        let seen = unsafe { std::slice::from_raw_parts(mem.cpu_base().add(100), 5) };
        assert_eq!(seen, b"hello");
        assert!(dev.read_word(DEFAULT_DDR_BASE - 4).is_err());
        assert!(
            dev.write_ddr(DEFAULT_DDR_BASE + (1 << 20) - 2, b"abc")
                .is_err()
        );
        assert!(matches!(regs.read(0x1_0000), Err(Error::BadOffset { .. })));
        assert!(matches!(regs.read(2), Err(Error::BadOffset { .. })));
        mem.sync_for_device(0, 4096).unwrap();
        assert!(matches!(
            mem.sync_for_cpu(1 << 20, 1),
            Err(Error::BadRange { .. })
        ));
    }

    #[test]
    fn interrupts_are_masked_until_enabled() {
        let b = SimBoard::new(1, 4096, 0, 1).unwrap();
        let irq = b.irq(0).unwrap();
        let dev = b.device().unwrap();
        assert!(matches!(
            irq.wait(Duration::from_millis(10)),
            Err(Error::Timeout(_))
        ));
        dev.raise(0);
        assert_eq!(irq.wait(Duration::from_secs(1)).unwrap(), 1);
        // Masked now: the next interrupt stays pending until enabled.
        dev.raise(0);
        assert!(matches!(
            irq.wait(Duration::from_millis(10)),
            Err(Error::Timeout(_))
        ));
        irq.enable().unwrap();
        assert_eq!(irq.wait(Duration::from_secs(1)).unwrap(), 2);
        irq.enable().unwrap();
        dev.raise(0);
        assert_eq!(irq.wait(Duration::from_secs(1)).unwrap(), 3);
    }

    #[test]
    fn delivering_an_interrupt_is_counted() {
        let b = SimBoard::new(1, 4096, 0, 1).unwrap();
        let irq = b.irq(0).unwrap();
        let dev = b.device().unwrap();
        // The counter only grows (other tests add to it too).
        let before = interrupt_delivery_cpu();
        for _ in 0..200 {
            dev.raise(0);
            irq.wait(Duration::from_secs(1)).unwrap();
            irq.enable().unwrap();
        }
        assert!(interrupt_delivery_cpu() > before);
    }

    /// The CPU's view of a non-coherent board's memory, as bytes.
    #[allow(clippy::mut_from_ref)]
    fn cpu(mem: &SimMemory, at: usize, n: usize) -> &mut [u8] {
        // SAFETY: test ranges lie inside the 1 MiB region; nothing else
        // touches them while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(mem.cpu_base().add(at), n) }
    }

    #[test]
    fn an_invalidate_for_the_cpu_discards_interior_dirty_lines_as_arm_does() {
        let b = SimBoard::with_model(1, 1 << 20, DEFAULT_DDR_BASE, 1, MemoryModel::NonCoherent)
            .unwrap();
        let mem = b.memory().unwrap();
        let dev = b.device().unwrap();
        dev.write_ddr(DEFAULT_DDR_BASE, &[7u8; 256]).unwrap();
        // The CPU dirties four lines, then invalidates 32..224 for the device's
        // data: lines 64..192 lie wholly inside (discarded), 0..64 and 192..256
        // only partly (cleaned first).
        cpu(&mem, 0, 256).fill(1);
        mem.sync_for_cpu(32, 192).unwrap();
        let view = cpu(&mem, 0, 256).to_vec();
        assert!(
            view[64..192].iter().all(|&x| x == 7),
            "interior lines discarded"
        );
        assert!(
            view[..64].iter().all(|&x| x == 1),
            "a partial line keeps the CPU's bytes"
        );
        assert!(view[192..].iter().all(|&x| x == 1));
        // Off: every line is cleaned first (the kinder model of before).
        b.set_discard_on_invalidate(false);
        cpu(&mem, 1024, 128).fill(2);
        mem.sync_for_cpu(1024, 128).unwrap();
        assert!(cpu(&mem, 1024, 128).iter().all(|&x| x == 2));
    }

    #[test]
    fn random_eviction_writes_dirty_lines_back_at_device_writes() {
        let b = SimBoard::with_model(1, 1 << 20, DEFAULT_DDR_BASE, 1, MemoryModel::NonCoherent)
            .unwrap();
        let mem = b.memory().unwrap();
        let dev = b.device().unwrap();
        let count_evicted = |b: &SimBoard, seed: Option<u64>, mark: u8| {
            b.set_random_eviction(seed);
            // A driver's mistake: dirty lines over memory the device writes.
            cpu(&mem, 8192, 4096).fill(mark);
            dev.write_ddr(DEFAULT_DDR_BASE + 8192, &[9u8; 4096])
                .unwrap();
            let mut back = [0u8; 4096];
            dev.read_ddr(DEFAULT_DDR_BASE + 8192, &mut back).unwrap();
            // Clean the CPU's lines away for the next round without eviction.
            b.set_random_eviction(None);
            mem.sync_for_device(8192, 4096).unwrap();
            back.chunks(64).filter(|l| l[0] == mark).count()
        };
        assert_eq!(count_evicted(&b, None, 1), 0, "off: nothing is evicted");
        let evicted = count_evicted(&b, Some(42), 2);
        assert!(evicted > 0 && evicted < 64, "{evicted} of 64 lines evicted");
        // Seeded: the same lines each time.
        let b2 = SimBoard::with_model(1, 1 << 20, DEFAULT_DDR_BASE, 1, MemoryModel::NonCoherent)
            .unwrap();
        let (mem2, dev2) = (b2.memory().unwrap(), b2.device().unwrap());
        b2.set_random_eviction(Some(42));
        cpu(&mem2, 8192, 4096).fill(2);
        dev2.write_ddr(DEFAULT_DDR_BASE + 8192, &[9u8; 4096])
            .unwrap();
        let mut back = [0u8; 4096];
        dev2.read_ddr(DEFAULT_DDR_BASE + 8192, &mut back).unwrap();
        assert_eq!(back.chunks(64).filter(|l| l[0] == 2).count(), evicted);
    }
}
