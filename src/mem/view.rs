//! A buffer's pages mapped a second time, for a caller outside Rust that is
//! handed a raw address (Python's arrays): the buffer can go back to its pool
//! at once while such a caller still holds the address, because the view is
//! first cut off from the DMA memory (its pages become a private copy), so
//! that it never shows the next owner's bytes.

use std::sync::atomic::{AtomicBool, Ordering};

use bytemuck::Pod;

use super::{DmaBuf, Error};
use crate::platform::{self, Mapping};

/// A second CPU mapping of a [`DmaBuf`]'s pages: the same bytes at another
/// address, until [`cut_off`](Self::cut_off). It lives as long as its owner
/// keeps it, independently of the buffer.
#[derive(Debug)]
pub struct CpuView {
    map: Mapping,
    cut: AtomicBool,
}

impl<T: Pod> DmaBuf<T> {
    /// A separate CPU view of this buffer's pages. The buffer must be whole
    /// pages ([`DmaPool::alloc_aligned`](super::DmaPool::alloc_aligned) to the
    /// page size) of a region with a file to map ([`Error::NoFile`]), and not
    /// lost to a device.
    pub fn cpu_view(&self) -> Result<CpuView, Error> {
        if self.is_lost() {
            return Err(Error::Lost);
        }
        let page = rustix::param::page_size();
        if !self.offset.is_multiple_of(page) || !self.span.is_multiple_of(page) {
            return Err(Error::NotWholePages);
        }
        let (fd, base) = self.pool.memory.file().ok_or(Error::NoFile)?;
        let map = Mapping::new(fd, self.span, base + self.offset as u64, "DMA buffer view")?;
        Ok(CpuView {
            map,
            cut: AtomicBool::new(false),
        })
    }
}

impl CpuView {
    /// The first byte: the buffer's first byte until the view is cut off, its
    /// private copy after.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.base()
    }

    /// Bytes mapped (whole pages).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Never true: a view maps at least one page.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Whether the view was cut off from the DMA memory.
    pub fn is_cut_off(&self) -> bool {
        self.cut.load(Ordering::Acquire)
    }

    /// Cuts the view off from the DMA memory: its pages become private memory
    /// holding what they hold now, at the same addresses, so the buffer's
    /// memory can be reused while whoever holds the address keeps reading the
    /// same bytes. Returns whether the view is cut off (false only if the
    /// system refused the remapping; the buffer's memory must then not be
    /// reused).
    pub fn cut_off(&self) -> bool {
        self.cut(true)
    }

    /// [`cut_off`](Self::cut_off) to zeroed pages: for a buffer given up to a
    /// device that could not be halted ([`DmaBuf::surrender`]), whose bytes
    /// may be half written.
    pub fn cut_off_zeroed(&self) -> bool {
        self.cut(false)
    }

    fn cut(&self, keep_bytes: bool) -> bool {
        if self.cut.load(Ordering::Acquire) {
            return true;
        }
        let (base, len) = (self.map.base(), self.map.len());
        // SAFETY: the pages are this view's own mapping, whole pages, and no
        // Rust reference points into them (the view hands out raw addresses
        // only).
        let done = unsafe {
            if keep_bytes {
                platform::replace_with_private_copy(base, len)
            } else {
                platform::replace_with_private(base, len)
            }
        };
        if done {
            self.cut.store(true, Ordering::Release);
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::mem::{CachePolicy, DmaPool};
    use crate::platform::sim::SimBoard;

    /// Reads `len` bytes at `p`.
    fn bytes(p: *const u8, len: usize) -> Vec<u8> {
        // SAFETY: the tests read views they hold, which stay mapped.
        unsafe { std::slice::from_raw_parts(p, len) }.to_vec()
    }

    #[test]
    fn a_cut_off_view_keeps_its_bytes_and_never_shows_the_next_owners() {
        for model in [
            crate::platform::MemoryModel::Coherent,
            crate::platform::MemoryModel::NonCoherent,
        ] {
            let board = SimBoard::with_model(1, 1 << 16, 0x1000_0000, 0, model).unwrap();
            let dev = board.device().unwrap();
            let policy = match model {
                crate::platform::MemoryModel::Coherent => CachePolicy::Coherent,
                _ => CachePolicy::Explicit,
            };
            let pool = DmaPool::new(Arc::new(board.memory().unwrap()), policy).unwrap();
            let page = rustix::param::page_size();
            let mut b = pool.alloc_aligned(2 * page, page).unwrap();
            let view = b.cpu_view().unwrap();
            assert_eq!(view.len(), 2 * page);
            // The same bytes both ways before the cut.
            b.as_mut_slice().fill(7);
            assert!(bytes(view.as_ptr(), 2 * page).iter().all(|&x| x == 7));
            // SAFETY: the view's pages are mapped; nothing else writes them now.
            unsafe { view.as_ptr().add(5).write(42) };
            assert_eq!(
                b.as_slice()[5],
                42,
                "writes through the view reach the buffer"
            );
            let bus = b.bus_addr();
            assert!(view.cut_off());
            assert!(view.is_cut_off());
            assert!(view.cut_off_zeroed(), "cut once, for good");
            drop(b);
            // The memory goes to a new owner (and the device writes it) ...
            let mut next = pool.alloc_aligned(2 * page, page).unwrap();
            assert_eq!(next.bus_addr(), bus, "the same memory is reused");
            next.as_mut_slice().fill(0xEE);
            next.sync_for_device(2 * page).unwrap();
            dev.write_ddr(bus, &vec![0xDD; page]).unwrap();
            // ... and the old view still reads what it held at the cut.
            let seen = bytes(view.as_ptr(), 2 * page);
            assert_eq!(seen[5], 42);
            assert!(
                seen.iter()
                    .enumerate()
                    .all(|(i, &x)| x == if i == 5 { 42 } else { 7 }),
                "{model:?}: the cut-off view shows another owner's bytes"
            );
        }
    }

    #[test]
    fn a_view_cut_off_zeroed_reads_zeros_not_the_devices_writes() {
        let board = SimBoard::new(1, 1 << 16, 0x1000_0000, 0).unwrap();
        let dev = board.device().unwrap();
        let pool = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
        let page = rustix::param::page_size();
        let mut b = pool.alloc_aligned(page, page).unwrap();
        b.as_mut_slice().fill(1);
        let view = b.cpu_view().unwrap();
        assert!(view.cut_off_zeroed());
        b.surrender();
        dev.write_ddr(b.bus_addr(), &vec![9u8; page]).unwrap();
        assert!(bytes(view.as_ptr(), page).iter().all(|&x| x == 0));
    }

    #[test]
    fn a_view_needs_whole_pages() {
        let board = SimBoard::new(1, 1 << 16, 0x1000_0000, 0).unwrap();
        let pool = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
        let b = pool.alloc::<u8>(100).unwrap();
        assert!(matches!(
            b.cpu_view(),
            Err(crate::mem::Error::NotWholePages)
        ));
    }
}
