//! The mirrored mapping behind every queue: one shared-memory object mapped twice,
//! back to back, so that a run of slots that passes the end of the first copy
//! continues, contiguous in virtual memory, into the second copy (paper 001, §III).
//!
//! All `mmap` code of the queues lives in this file.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::ptr::{self, NonNull};

use rustix::fs::{
    MemfdFlags, Mode, OFlags, SealFlags, fcntl_add_seals, fstat, ftruncate, memfd_create,
};
use rustix::mm::{Advice, MapFlags, ProtFlags, madvise, mmap, mmap_anonymous, munmap};

use super::{DmaSpan, Error, Region, RegionSource};

/// A memory object of `len` bytes mapped at `base` and again at `base + len`,
/// and after that its first pages a third time as far as slot 0 lies from
/// the first byte: a slice of up to `len` bytes from any slot lies in mapped
/// memory.
pub(crate) struct Mirror {
    base: NonNull<u8>,
    len: usize,
    /// Where slot 0 lies, in bytes from `base` ([`Mirror::skew_for`]); slot
    /// `k` of `size`-byte items is at `(skew + k * size) % len` of the object.
    skew: usize,
    /// Bytes mapped from `base`: both copies and the third mapping's pages.
    mapped: usize,
    /// Given up to a device that could not be halted ([`Mirror::surrender`]).
    lost: std::sync::atomic::AtomicBool,
    /// For a queue in DMA memory: where its range lies for the device, and what
    /// keeps it reserved. Dropped after the mapping is gone.
    dma: Option<Dma>,
}

/// The device's side of a mirror over a range of DMA memory.
struct Dma {
    bus: u64,
    source: std::sync::Arc<dyn RegionSource>,
    owner: Box<dyn std::any::Any + Send + Sync>,
}

// SAFETY: `Mirror` owns its mapping exclusively (like a `Box<[u8]>`); the mapping
// is process memory valid from any thread. Who may touch which bytes is decided by
// the queue's cursors, not by the `Mirror` itself.
unsafe impl Send for Mirror {}
// SAFETY: as above; `&Mirror` only hands out raw pointers.
unsafe impl Sync for Mirror {}

fn map_error(bytes: usize, step: &'static str) -> impl FnOnce(rustix::io::Errno) -> Error {
    move |e| Error::Map {
        bytes,
        step,
        source: io::Error::from(e),
    }
}

/// Least common multiple of two non-zero numbers, `None` on overflow.
fn lcm(a: usize, b: usize) -> Option<usize> {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a / x).checked_mul(b)
}

impl Mirror {
    /// Maps at least `min_bytes` (at least one page), rounded up to a whole number of
    /// pages and of `granule`-byte items.
    pub(crate) fn new(min_bytes: usize, granule: usize) -> Result<Self, Error> {
        let len = Self::round(min_bytes, granule)?;
        let fd = memfd_create("dmaflow-ring", MemfdFlags::CLOEXEC)
            .map_err(map_error(len, "memfd_create"))?;
        ftruncate(&fd, len as u64).map_err(map_error(len, "ftruncate"))?;
        // The mappings keep the memory object alive; `fd` closes on return.
        Self::map_twice(fd.as_fd(), 0, len, Self::skew_for(len, granule))
    }

    /// Where slot 0 of a queue in ordinary memory of `len` bytes and
    /// `granule`-byte items lies: 1 KiB into the first copy, rounded up to
    /// whole cache lines and items (none when that is the whole range).
    ///
    /// Batches and windows are commonly a power of two of 4 KiB or more. From
    /// slot 0 at the range's first byte, each would begin on a page boundary,
    /// and a reader would finish each batch at a page's end just as the writer
    /// starts filling the next page. On this project's x86 host that costs
    /// the reader: with slot 0 at 1 KiB a 4 KiB stream through a 256 KiB queue
    /// runs about a tenth faster (BENCHMARKS.md, "Where slot 0 lies"). A queue in
    /// DMA memory keeps slot 0 at its range's first byte, so a device's
    /// windows of a power of two never straddle the range's end.
    pub(crate) fn skew_for(len: usize, granule: usize) -> usize {
        const SKEW: usize = 1024;
        let unit = lcm(64, granule.max(1)).unwrap_or(len);
        SKEW.div_ceil(unit).saturating_mul(unit) % len.max(1)
    }

    /// Byte offset in the memory object of slot `slot` of `size`-byte items
    /// (`slot` within the queue's slots).
    fn at(&self, slot: usize, size: usize) -> usize {
        (self.skew + slot * size) % self.len
    }

    /// Maps `len` bytes of the memory object `fd` from `offset` (a page
    /// boundary) twice, back to back: the slots of a queue shared between
    /// processes ([`super::shm`]).
    ///
    /// Slot 0 lies as in a queue of this process's own
    /// ([`Mirror::skew_for`] of `len` and `granule`), so every process that
    /// maps the object finds the same slot at the same place.
    pub(crate) fn of_object(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        granule: usize,
    ) -> Result<Self, Error> {
        Self::map_twice(fd, offset, len, Self::skew_for(len, granule))
    }

    /// `min_bytes` (at least one) rounded up to whole pages and `granule`-byte
    /// items, with room for the double mapping.
    pub(crate) fn round(min_bytes: usize, granule: usize) -> Result<usize, Error> {
        let page = rustix::param::page_size();
        let unit = lcm(page, granule.max(1)).ok_or(Error::CapacityOverflow { bytes: min_bytes })?;
        min_bytes
            .max(1)
            .div_ceil(unit)
            .checked_mul(unit)
            .filter(|l| l.checked_mul(2).is_some_and(|d| d <= isize::MAX as usize))
            .ok_or(Error::CapacityOverflow { bytes: min_bytes })
    }

    /// Maps a range of DMA memory from `source` of at least `min_bytes`, whole
    /// `granule`-byte items.
    pub(crate) fn in_region(
        source: std::sync::Arc<dyn RegionSource>,
        min_bytes: usize,
        granule: usize,
    ) -> Result<Self, Error> {
        let want = Self::round(min_bytes, granule)?;
        let Region {
            file,
            offset,
            len,
            bus_addr,
            owner,
        } = source.region(want)?;
        let page = rustix::param::page_size();
        let bad = |reason: String| Error::BadRegion { reason };
        if len < want || !len.is_multiple_of(page) || !len.is_multiple_of(granule.max(1)) {
            return Err(bad(format!(
                "{len} bytes given for a queue of {want} bytes (whole pages of {page} and \
                 items of {granule} bytes)"
            )));
        }
        if !offset.is_multiple_of(page as u64) {
            return Err(bad(format!(
                "file offset {offset:#x} is not on a page boundary"
            )));
        }
        let mut m = Self::map_twice(file.as_fd(), offset, len, 0)?;
        m.dma = Some(Dma {
            bus: bus_addr,
            source,
            owner,
        });
        Ok(m)
    }

    /// A mirror like this one (anonymous, or from the same DMA memory) of at
    /// least `min_bytes`: what a queue grows into.
    pub(crate) fn alike(&self, min_bytes: usize, granule: usize) -> Result<Self, Error> {
        match &self.dma {
            Some(d) => Self::in_region(d.source.clone(), min_bytes, granule),
            None => Self::new(min_bytes, granule),
        }
    }

    /// Maps `len` bytes of `fd` from `offset` twice, back to back, and its
    /// first `skew` bytes (below `len`), rounded up to whole pages, a third
    /// time after them; slot 0 at `skew`.
    fn map_twice(fd: BorrowedFd<'_>, offset: u64, len: usize, skew: usize) -> Result<Self, Error> {
        let third = skew.next_multiple_of(rustix::param::page_size()).min(len);
        let mapped = 2 * len + third;
        // SAFETY: an anonymous PROT_NONE reservation at an address the kernel picks
        // touches no existing memory.
        let reserved = unsafe {
            mmap_anonymous(
                ptr::null_mut(),
                mapped,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .map_err(map_error(mapped, "mmap (reserve)"))?;
        // From here on, `mirror` unmaps the whole reservation if a later step fails.
        let mirror = Mirror {
            base: NonNull::new(reserved.cast::<u8>()).ok_or(Error::Map {
                bytes: mapped,
                step: "mmap (reserve)",
                source: io::Error::other("null mapping"),
            })?,
            len,
            skew,
            mapped,
            lost: std::sync::atomic::AtomicBool::new(false),
            dma: None,
        };
        let parts = [
            (0, len, "mmap (first copy)"),
            (len, len, "mmap (second copy)"),
            (2 * len, third, "mmap (first pages again)"),
        ];
        for (at, bytes, step) in parts.into_iter().filter(|p| p.1 > 0) {
            // SAFETY: `at + bytes <= mapped`: the part lies within the reservation.
            let want = unsafe { reserved.cast::<u8>().add(at) }.cast::<c_void>();
            // SAFETY: MAP_FIXED replaces pages of our own reservation only (`want` to
            // `want + bytes` lies inside it), so no other mapping is clobbered.
            let got = unsafe {
                mmap(
                    want,
                    bytes,
                    ProtFlags::READ | ProtFlags::WRITE,
                    // POPULATE: the pages are present from the start, so the
                    // first lap of a stream through the queue takes no page faults.
                    MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE,
                    fd,
                    offset,
                )
            }
            .map_err(map_error(bytes, step))?;
            if got != want {
                return Err(Error::Map {
                    bytes,
                    step,
                    source: io::Error::other(format!("mapped at {got:p}, wanted {want:p}")),
                });
            }
        }
        // SAFETY: the range is exactly our reservation; DONTFORK only changes what a
        // forked child inherits (nothing), never this process's view.
        unsafe { madvise(reserved, mapped, Advice::LinuxDontFork) }
            .map_err(map_error(mapped, "madvise(MADV_DONTFORK)"))?;
        Ok(mirror)
    }

    /// Gives the range up to a device that could not be halted: the range is
    /// never returned to its pool, and both copies of the CPU's view are
    /// replaced by private zero pages at the same addresses, so nothing the
    /// program can reach is written by the device any more. The queue then
    /// refuses to be used ([`Error::LostToDevice`]). Nothing happens for a
    /// queue in ordinary memory, or a second time.
    pub(crate) fn surrender(&self) {
        let Some(d) = &self.dma else {
            return;
        };
        if self.lost.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        d.source.abandon(&*d.owner);
        // SAFETY: MAP_FIXED replaces exactly our own mapping (`base` to
        // `base + mapped`, the copies) with anonymous memory at the same
        // addresses, so every pointer into it stays valid (it reads zeros);
        // no other mapping is touched.
        let remapped = unsafe {
            mmap_anonymous(
                self.base.as_ptr().cast(),
                self.mapped,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::FIXED,
            )
        };
        if remapped.is_err() {
            // Without the replacement the CPU view would still be the device's
            // memory: make it unreachable instead (any access faults).
            // SAFETY: as above, over our own range.
            let _ = unsafe {
                rustix::mm::mprotect(
                    self.base.as_ptr().cast(),
                    self.mapped,
                    rustix::mm::MprotectFlags::empty(),
                )
            };
        }
    }

    /// Whether the range was given up to a device ([`Mirror::surrender`]).
    #[inline]
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether the range needs no cache maintenance ([`RegionSource::coherent`]).
    pub(crate) fn coherent(&self) -> Option<bool> {
        self.dma.as_ref().map(|d| d.source.coherent())
    }

    /// Which DMA memory the range is in ([`RegionSource::memory_id`]).
    pub(crate) fn memory_id(&self) -> Option<u64> {
        self.dma.as_ref().map(|d| d.source.memory_id())
    }

    /// Where `n` items of `size` bytes from slot `slot` lie for the device: one
    /// span, or two when they pass the end of the range (the device does not see
    /// the second copy). `None` for anonymous memory.
    pub(crate) fn spans(&self, slot: usize, n: usize, size: usize) -> Option<Vec<DmaSpan>> {
        let d = self.dma.as_ref()?;
        let start = self.at(slot, size);
        let bytes = n * size;
        let first = bytes.min(self.len - start);
        let mut out = vec![DmaSpan {
            bus: d.bus + start as u64,
            offset: start,
            bytes: first,
        }];
        if bytes > first {
            out.push(DmaSpan {
                bus: d.bus,
                offset: 0,
                bytes: bytes - first,
            });
        }
        out.retain(|s| s.bytes > 0);
        Some(out)
    }

    /// Cache maintenance of a span before the device reads it (`for_device`)
    /// or after it wrote it.
    pub(crate) fn sync(&self, span: DmaSpan, for_device: bool) -> Result<(), Error> {
        match &self.dma {
            Some(d) => d
                .source
                .sync(&*d.owner, span.offset, span.bytes, for_device),
            None => Err(Error::NotDmaMemory),
        }
    }

    /// Length in bytes of one copy.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Start of the first copy.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// `n` items of `T` starting at item `start` of the first copy, as a shared slice.
    ///
    /// # Safety
    /// `start < len / size_of::<T>()` and `n <= len / size_of::<T>()`, so that the
    /// range lies inside the mapping; no `&mut` to any of those slots (in
    /// either copy) may be live while the slice is, and the items must not be
    /// written by anyone while it is live.
    pub(crate) unsafe fn items<T: bytemuck::Pod>(&self, start: usize, n: usize) -> &[T] {
        // SAFETY: the slice starts below `skew + len` and spans at most `len`
        // bytes, so it lies within the copies (`skew` bytes of the third
        // mapping at most); the base is
        // page-aligned, and `len` and the skew are multiples of `size_of::<T>()`
        // (the queue's granule), so items stay aligned;
        // the memory is initialised (zero-filled or written) and any bit pattern is a
        // valid `T`; aliasing is the caller's promise.
        unsafe {
            let first = self
                .base()
                .add(self.skew + start * std::mem::size_of::<T>());
            std::slice::from_raw_parts(first.cast::<T>(), n)
        }
    }

    /// `n` items of `T` starting at item `start`, as an exclusive slice.
    ///
    /// # Safety
    /// As [`Mirror::items`], and no other reference of any kind to those slots (in
    /// either copy) may be live while the slice is.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn items_mut<T: bytemuck::Pod>(&self, start: usize, n: usize) -> &mut [T] {
        // SAFETY: as in `items`; exclusivity is the caller's promise.
        unsafe {
            let first = self
                .base()
                .add(self.skew + start * std::mem::size_of::<T>());
            std::slice::from_raw_parts_mut(first.cast::<T>(), n)
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        // SAFETY: we unmap exactly the reservation we own; no slice into it
        // outlives the `Mirror` (slices borrow the queue that owns it).
        // An error here could only mean the range was not ours, which cannot happen.
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.mapped) };
    }
}

/// A memory object for a queue shared between processes, `len` bytes, zero
/// filled: anonymous (a memfd, passed to other processes as a descriptor) or
/// a new file at `path` (created exclusively, readable and writable by its
/// owner only; typically under `/dev/shm`).
pub(crate) fn create_object(path: Option<&Path>, len: usize) -> Result<OwnedFd, Error> {
    let fd = match path {
        None => memfd_create(
            "dmaflow-shm",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(map_error(len, "memfd_create"))?,
        Some(p) => rustix::fs::open(
            p,
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(|e| Error::Open {
            path: p.to_path_buf(),
            source: e.into(),
        })?,
    };
    ftruncate(&fd, len as u64).map_err(map_error(len, "ftruncate"))?;
    if path.is_none() {
        // Sealed against any change of size, by anyone it is passed to: a
        // peer cannot truncate the object under a mapping (SIGBUS at either
        // end). A file opened by path cannot be sealed: any process of the
        // user may truncate it, and its mappings then fault.
        fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(map_error(len, "F_ADD_SEALS"))?;
    }
    Ok(fd)
}

/// Opens the memory object at `path` for reading and writing.
pub(crate) fn open_object(path: &Path) -> Result<OwnedFd, Error> {
    rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|e| Error::Open {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// The size in bytes of the memory object `fd`.
pub(crate) fn object_len(fd: BorrowedFd<'_>) -> Result<u64, Error> {
    let st = fstat(fd).map_err(|e| Error::System {
        step: "fstat",
        source: e.into(),
    })?;
    Ok(st.st_size.max(0) as u64)
}

/// The first `len` bytes of a memory object mapped once, shared: the
/// control page of a queue shared between processes.
pub(crate) struct Page {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: `Page` owns its mapping exclusively (like a `Box<[u8]>`) and only
// hands out its address; the shared-memory protocol that uses it is made of
// atomics.
unsafe impl Send for Page {}
// SAFETY: as above.
unsafe impl Sync for Page {}

impl Page {
    /// Maps the first `len` bytes (a whole number of pages) of `fd`.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> Result<Self, Error> {
        // SAFETY: a new shared mapping at an address the kernel picks touches no
        // existing memory of this process.
        let p = unsafe {
            mmap(
                ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .map_err(map_error(len, "mmap (control page)"))?;
        let base = NonNull::new(p.cast::<u8>()).ok_or(Error::Map {
            bytes: len,
            step: "mmap (control page)",
            source: io::Error::other("null mapping"),
        })?;
        let page = Page { base, len };
        // SAFETY: the range is exactly our mapping; DONTFORK only changes what a
        // forked child inherits.
        unsafe { madvise(p, len, Advice::LinuxDontFork) }
            .map_err(map_error(len, "madvise(MADV_DONTFORK)"))?;
        Ok(page)
    }

    /// Start of the mapping (page-aligned).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: we unmap exactly the mapping we own; nothing borrowed from it
        // outlives the `Page` (its users hold it beside their references).
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_is_whole_pages_and_items() {
        let page = rustix::param::page_size();
        let m = Mirror::new(1, 4).unwrap();
        assert_eq!(m.len(), page);
        let m = Mirror::new(page + 1, 4).unwrap();
        assert_eq!(m.len(), 2 * page);
        // 12-byte items: the length must hold a whole number of them.
        let m = Mirror::new(100, 12).unwrap();
        assert_eq!(m.len() % 12, 0);
        assert_eq!(m.len() % page, 0);
    }

    #[test]
    fn write_through_the_end_appears_at_the_start() {
        let m = Mirror::new(4096, 4).unwrap();
        let n = m.len() / 4;
        // SAFETY: 8 items starting 4 before the end of the first copy lie inside the
        // double mapping; no other slice is live.
        let s = unsafe { m.items_mut::<u32>(n - 4, 8) };
        for (i, x) in s.iter_mut().enumerate() {
            *x = 100 + i as u32;
        }
        // SAFETY: the first 4 items; the mutable slice above is no longer used.
        let head = unsafe { m.items::<u32>(0, 4) };
        assert_eq!(head, &[104, 105, 106, 107]);
        // And the reverse: a write at the start shows past the end.
        // SAFETY: item 0, no other live slice.
        let first = unsafe { m.items_mut::<u32>(0, 1) };
        first[0] = 7;
        // SAFETY: item n is the first item of the second copy, inside the mapping.
        assert_eq!(unsafe { m.items::<u32>(n, 1) }[0], 7);
    }

    #[test]
    fn slot_zero_lies_off_a_page_boundary_and_a_full_queue_reads_from_any_slot() {
        let page = rustix::param::page_size();
        let m = Mirror::new(16 << 10, 4).unwrap();
        let n = m.len() / 4;
        // SAFETY: slot 0, one item; no other slice is live.
        let slot0 = unsafe { m.items::<u32>(0, 1) }.as_ptr() as usize;
        assert_eq!(slot0 % page, 1024, "slot 0 at {slot0:#x}");
        // A whole queue's worth from every slot, the last ones reaching into
        // the third mapping: written through one slice, read back through
        // another starting one lap on in the object.
        for start in [0, 1, n / 2, n - 256, n - 1] {
            // SAFETY: `start < n` and `n` items; no other slice is live.
            let s = unsafe { m.items_mut::<u32>(start, n) };
            for (i, x) in s.iter_mut().enumerate() {
                *x = (start * 7 + i) as u32;
            }
            // SAFETY: as above; the mutable slice is no longer used.
            let back = unsafe { m.items::<u32>(start, n) };
            assert!(
                back.iter()
                    .enumerate()
                    .all(|(i, &x)| x == (start * 7 + i) as u32)
            );
            // The item past the end of the first copy is slot 0's.
            if start > 0 {
                let wrapped = back[n - start];
                // SAFETY: slot 0, one item.
                assert_eq!(unsafe { m.items::<u32>(0, 1) }[0], wrapped);
            }
        }
        // Items of 12 bytes: slot 0 on a whole item and cache line.
        let m = Mirror::new(100, 12).unwrap();
        // SAFETY: slot 0, one item.
        let at = unsafe { m.items::<[u32; 3]>(0, 1) }.as_ptr() as usize % page;
        assert!(
            at > 0 && at.is_multiple_of(12) && at.is_multiple_of(64),
            "slot 0 at {at} into its page"
        );
    }

    #[test]
    fn too_large_is_an_error_with_the_size() {
        match Mirror::new(usize::MAX / 2, 4) {
            Err(Error::CapacityOverflow { bytes }) => assert_eq!(bytes, usize::MAX / 2),
            other => panic!("expected CapacityOverflow, got {:?}", other.err()),
        }
        // Larger than the address space allows but not overflowing: the OS refuses.
        match Mirror::new(1 << 46, 4) {
            Err(Error::Map { bytes, .. }) => assert!(bytes >= 1 << 46),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => {} // a machine with a huge address space and overcommit may allow it
        }
    }

    #[test]
    fn forked_child_does_not_inherit_the_mapping() {
        let m = Mirror::new(4096, 4).unwrap();
        let addr = m.base().cast::<libc::c_void>();
        let len = 2 * m.len();
        // SAFETY: the child only calls async-signal-safe functions (msync, _exit).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // msync fails with ENOMEM when the range is not mapped in this process.
            // SAFETY: msync only inspects the range; it does not dereference it.
            let r = unsafe { libc::msync(addr, len, libc::MS_ASYNC) };
            let code = if r == -1 { 0 } else { 1 };
            // SAFETY: _exit ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 0, "child still had the mapping");
        // The parent still has it.
        // SAFETY: as above, in the parent where the range is mapped.
        assert_eq!(unsafe { libc::msync(addr, len, libc::MS_ASYNC) }, 0);
    }

    #[test]
    fn both_copies_are_resident_from_the_start() {
        let m = Mirror::new(64 << 10, 4).unwrap();
        let page = rustix::param::page_size();
        let pages = 2 * m.len() / page;
        let mut resident = vec![0u8; pages];
        // SAFETY: the range is the mirror's own mapping, page-aligned; mincore
        // writes one byte per page into a vector of exactly that many bytes.
        let rc =
            unsafe { libc::mincore(m.base().cast(), 2 * m.len(), resident.as_mut_ptr().cast()) };
        assert_eq!(rc, 0);
        // Nothing has been written yet, and every page is already in memory.
        assert!(resident.iter().all(|r| r & 1 == 1), "{resident:?}");
    }
}
