//! The emulated board's CPU data cache, for a non-coherent board: the CPU's view
//! of DMA memory and the device's (DRAM) are separate copies, as they are on a
//! Zynq HP port. CPU writes reach DRAM only through a clean of their lines, device
//! writes reach the CPU only through an invalidate, so a missing cache operation
//! shows as stale data, as on the board.
//!
//! The model is a write-back cache holding every line: a line is *dirty* where the
//! CPU's view differs from what it last exchanged with DRAM (the shadow). A clean
//! writes dirty lines back; a clean-and-invalidate writes dirty lines back, then
//! reloads the lines from DRAM; an invalidate for the CPU (after the device
//! wrote) discards dirty lines wholly inside its range, as ARM's does.
//! Granularity: 64-byte lines. Optionally, seeded random eviction writes dirty
//! lines back at any device write, as a real cache may.

use std::sync::{Mutex, PoisonError};

use super::map::Mapping;

/// Cache line size of the model.
pub const LINE: usize = 64;

/// How the emulated board's CPU caches relate to DMA memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryModel {
    /// The device sees what the CPU wrote at once, and the CPU sees what the
    /// device wrote (an ACP or coherent port; every x86 machine).
    #[default]
    Coherent,
    /// CPU and device views apart: only cache maintenance moves lines between them
    /// (a Zynq HP port without coherency).
    NonCoherent,
}

/// The cache state of a non-coherent board: the CPU's view is one mapping, DRAM
/// another; the shadow holds what each line held when the CPU last exchanged it
/// with DRAM.
pub(crate) struct CpuCache {
    view: Mapping,
    dram: Mapping,
    shadow: Mutex<Vec<u8>>,
    /// Fault injection: dirty lines are written back right after the device
    /// writes over them, as a cache may evict them at any time.
    evict: std::sync::atomic::AtomicBool,
    /// Per line: the device wrote it and the CPU has not invalidated it since.
    unread: Mutex<Vec<bool>>,
    /// An invalidate for the CPU discards dirty lines wholly inside its range
    /// (Linux's `dma_sync_*_for_cpu` from the device on ARM: interior lines
    /// invalidated, partial lines at the ends cleaned and invalidated).
    discard: std::sync::atomic::AtomicBool,
    /// Seeded random eviction: the generator's state while on.
    random: Mutex<Option<u64>>,
}

impl CpuCache {
    pub(crate) fn new(view: Mapping, dram: Mapping) -> Self {
        let shadow = Mutex::new(vec![0u8; dram.len()]);
        let lines = dram.len().div_ceil(LINE);
        CpuCache {
            view,
            dram,
            shadow,
            evict: std::sync::atomic::AtomicBool::new(false),
            unread: Mutex::new(vec![false; lines]),
            discard: std::sync::atomic::AtomicBool::new(true),
            random: Mutex::new(None),
        }
    }

    /// The lines covering `offset..offset + len` (already checked to lie inside).
    fn lines(&self, offset: usize, len: usize) -> std::ops::Range<usize> {
        let start = offset / LINE * LINE;
        let end = (offset + len).div_ceil(LINE) * LINE;
        start..end.min(self.dram.len())
    }

    /// Bytes `at..at + n` of a mapping, read now.
    ///
    /// # Safety
    ///
    /// `at + n` must lie inside the mapping.
    unsafe fn read(map: &Mapping, at: usize, n: usize) -> [u8; LINE] {
        let mut line = [0u8; LINE];
        // SAFETY: in bounds by the caller's promise; `n <= LINE`.
        unsafe { std::ptr::copy_nonoverlapping(map.base().add(at), line.as_mut_ptr(), n) };
        line
    }

    /// Writes `bytes` at `at` of a mapping.
    ///
    /// # Safety
    ///
    /// `at + bytes.len()` must lie inside the mapping.
    unsafe fn write(map: &Mapping, at: usize, bytes: &[u8]) {
        // SAFETY: in bounds by the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.base().add(at), bytes.len()) };
    }

    /// Writes line `at` (of `n` bytes) back to DRAM if the CPU dirtied it.
    fn write_back(&self, shadow: &mut [u8], at: usize, n: usize) {
        // SAFETY: `at..at + n` lies inside both mappings (same size, `n` clipped
        // to it); the bytes belong to a buffer whose owner asked for maintenance.
        let view = unsafe { Self::read(&self.view, at, n) };
        if view[..n] != shadow[at..at + n] {
            // SAFETY: as above.
            unsafe { Self::write(&self.dram, at, &view[..n]) };
            shadow[at..at + n].copy_from_slice(&view[..n]);
        }
    }

    /// Marks the lines of the range as written by the device and not yet
    /// invalidated by the CPU (`true`), or as invalidated (`false`).
    fn mark_unread(&self, offset: usize, len: usize, unread_now: bool) {
        let mut unread = self.unread.lock().unwrap_or_else(PoisonError::into_inner);
        for at in self.lines(offset, len).step_by(LINE) {
            unread[at / LINE] = unread_now;
        }
    }

    /// Clean: every dirty line of the range is written back to DRAM.
    pub(crate) fn clean(&self, offset: usize, len: usize) {
        let mut shadow = self.shadow.lock().unwrap_or_else(PoisonError::into_inner);
        for at in self.lines(offset, len).step_by(LINE) {
            self.write_back(&mut shadow, at, LINE.min(self.dram.len() - at));
        }
    }

    /// Clean and invalidate: dirty lines are written back, then every line of the
    /// range is reloaded from DRAM.
    pub(crate) fn clean_invalidate(&self, offset: usize, len: usize) {
        self.mark_unread(offset, len, false);
        let mut shadow = self.shadow.lock().unwrap_or_else(PoisonError::into_inner);
        for at in self.lines(offset, len).step_by(LINE) {
            let n = LINE.min(self.dram.len() - at);
            self.write_back(&mut shadow, at, n);
            // SAFETY: as in `write_back`.
            let dram = unsafe { Self::read(&self.dram, at, n) };
            // SAFETY: as in `write_back`.
            unsafe { Self::write(&self.view, at, &dram[..n]) };
            shadow[at..at + n].copy_from_slice(&dram[..n]);
        }
    }

    /// Invalidate before the CPU reads what the device wrote, as ARM's
    /// `dma_sync_*_for_cpu(DMA_FROM_DEVICE)` does: lines partly in the range are
    /// cleaned and invalidated, lines wholly in it are invalidated, a dirty one
    /// losing what the CPU wrote (unless discarding is off: then every line is
    /// cleaned first).
    pub(crate) fn invalidate_for_cpu(&self, offset: usize, len: usize) {
        if !self.discard.load(std::sync::atomic::Ordering::Relaxed) {
            return self.clean_invalidate(offset, len);
        }
        self.mark_unread(offset, len, false);
        let mut shadow = self.shadow.lock().unwrap_or_else(PoisonError::into_inner);
        for at in self.lines(offset, len).step_by(LINE) {
            let n = LINE.min(self.dram.len() - at);
            if at < offset || at + n > offset + len {
                self.write_back(&mut shadow, at, n);
            }
            // SAFETY: as in `write_back`.
            let dram = unsafe { Self::read(&self.dram, at, n) };
            // SAFETY: as in `write_back`.
            unsafe { Self::write(&self.view, at, &dram[..n]) };
            shadow[at..at + n].copy_from_slice(&dram[..n]);
        }
    }

    /// Whether an invalidate for the CPU discards interior dirty lines.
    pub(crate) fn set_discard(&self, on: bool) {
        self.discard.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Turns seeded random eviction on (`Some(seed)`) or off.
    pub(crate) fn set_random_eviction(&self, seed: Option<u64>) {
        *self.random.lock().unwrap_or_else(PoisonError::into_inner) = seed.map(|s| s | 1);
    }

    /// With random eviction on: a quarter of the lines of the range just
    /// written by the device, and eight lines anywhere, chosen by the seeded
    /// generator, are evicted (written back if dirty), as a real cache may at
    /// any moment.
    fn evict_randomly(&self, offset: usize, len: usize) {
        let mut random = self.random.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(state) = random.as_mut() else {
            return;
        };
        let mut next = || {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            *state
        };
        let lines = self.dram.len() / LINE;
        let mut chosen: Vec<usize> = self
            .lines(offset, len)
            .step_by(LINE)
            .filter(|_| next() % 4 == 0)
            .collect();
        chosen.extend((0..8).map(|_| (next() as usize % lines.max(1)) * LINE));
        drop(random);
        let mut shadow = self.shadow.lock().unwrap_or_else(PoisonError::into_inner);
        for at in chosen {
            self.write_back(&mut shadow, at, LINE.min(self.dram.len() - at));
        }
    }

    /// Turns the eviction fault on or off.
    pub(crate) fn set_eviction(&self, on: bool) {
        self.evict.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// After the device wrote the range: with the eviction fault on, the CPU's
    /// dirty lines over it are written back now, over what the device wrote.
    pub(crate) fn device_wrote(&self, offset: usize, len: usize) {
        self.mark_unread(offset, len, true);
        if self.evict.load(std::sync::atomic::Ordering::Relaxed) {
            self.clean(offset, len);
        }
        self.evict_randomly(offset, len);
    }

    /// The first line of the range the device wrote and the CPU has not
    /// invalidated since (for the protocol checker).
    pub(crate) fn first_unread(&self, offset: usize, len: usize) -> Option<usize> {
        let unread = self.unread.lock().unwrap_or_else(PoisonError::into_inner);
        self.lines(offset, len)
            .step_by(LINE)
            .find(|&at| unread[at / LINE])
    }

    /// Lines of the range the CPU wrote and did not clean (for the protocol
    /// checker): the first such byte offset, if any.
    pub(crate) fn first_dirty(&self, offset: usize, len: usize) -> Option<usize> {
        let shadow = self.shadow.lock().unwrap_or_else(PoisonError::into_inner);
        self.lines(offset, len).step_by(LINE).find(|&at| {
            let n = LINE.min(self.dram.len() - at);
            // SAFETY: as in `write_back`.
            let view = unsafe { Self::read(&self.view, at, n) };
            view[..n] != shadow[at..at + n]
        })
    }
}
