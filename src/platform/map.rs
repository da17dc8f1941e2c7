//! Shared mappings of device files and memory objects: the one place the platform
//! layer maps memory. Register access is volatile and 32-bit wide.

use std::os::fd::AsFd;
use std::ptr::{self, NonNull};

use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

use super::Error;

/// A shared read-write mapping of `len` bytes of a file or memory object.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process memory owned by this value alone; concurrent
// access goes through volatile 32-bit operations or through buffers whose owners
// arbitrate access (the DMA pool), never through shared Rust references.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// Replaces the pages `addr..addr + len` of a mapping with private zeroed
/// memory at the same addresses, so that whatever still points there (a view
/// handed to another language, say) no longer reaches the memory behind the
/// mapping. Returns whether it was done (`addr` and `len` must be whole pages).
///
/// # Safety
///
/// The range must lie inside a mapping the caller owns, and no Rust reference
/// into it may be live (the bytes change under it).
pub(crate) unsafe fn replace_with_private(addr: *mut u8, len: usize) -> bool {
    let page = rustix::param::page_size();
    if len == 0 || !(addr as usize).is_multiple_of(page) || !len.is_multiple_of(page) {
        return false;
    }
    // SAFETY: MAP_FIXED replaces exactly the caller's pages (its promise),
    // with anonymous memory; nothing else is touched.
    unsafe {
        rustix::mm::mmap_anonymous(
            addr.cast(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::FIXED,
        )
    }
    .is_ok()
}

/// Replaces the pages `addr..addr + len` of a mapping with private memory
/// holding a copy of what they hold now, at the same addresses and in one
/// step (`mremap` of a filled private mapping over them): whoever still points
/// there keeps reading the same bytes, and reaches the memory behind the
/// mapping no more. Returns whether it was done (`addr` and `len` must be
/// whole pages).
///
/// # Safety
///
/// As [`replace_with_private`].
pub(crate) unsafe fn replace_with_private_copy(addr: *mut u8, len: usize) -> bool {
    let page = rustix::param::page_size();
    if len == 0 || !(addr as usize).is_multiple_of(page) || !len.is_multiple_of(page) {
        return false;
    }
    // SAFETY: a new private mapping at an address the kernel picks overlaps
    // nothing.
    let Ok(copy) = (unsafe {
        rustix::mm::mmap_anonymous(
            ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        )
    }) else {
        return false;
    };
    // SAFETY: `copy` is `len` fresh bytes that only this function knows of;
    // `addr..addr + len` is mapped (the caller's promise) and may be written
    // by another thread meanwhile (the shared copy reads it as hardware does).
    unsafe {
        super::shared_copy::copy_from_shared(
            addr,
            std::slice::from_raw_parts_mut(copy.cast::<u8>(), len),
        );
    }
    // SAFETY: `copy` is our own mapping of `len` bytes; the target pages are
    // the caller's (its promise), and no Rust reference points into either.
    let moved = unsafe {
        rustix::mm::mremap_fixed(
            copy,
            len,
            len,
            rustix::mm::MremapFlags::MAYMOVE,
            addr.cast(),
        )
    };
    if moved.is_err() {
        // SAFETY: the mapping made above, still in place.
        let _ = unsafe { rustix::mm::munmap(copy, len) };
        return false;
    }
    true
}

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset`, shared, read-write. `what` names the
    /// file in errors.
    pub(crate) fn new(fd: impl AsFd, len: usize, offset: u64, what: &str) -> Result<Self, Error> {
        if len == 0 {
            return Err(Error::Malformed {
                path: what.to_string(),
                reason: "mapping of zero bytes".into(),
            });
        }
        // SAFETY: a new shared mapping at an address the kernel picks overlaps no
        // existing Rust object.
        let p = unsafe {
            mmap(
                ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                offset,
            )
        }
        .map_err(|e| Error::Io {
            path: what.to_string(),
            source: e.into(),
        })?;
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Malformed {
            path: what.to_string(),
            reason: "mapped at address zero".into(),
        })?;
        Ok(Mapping { base, len })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// First byte.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Checks that a 32-bit register access at `offset` is in bounds and aligned.
    pub(crate) fn check_offset(&self, offset: usize) -> Result<(), Error> {
        self.check(offset).map(|_| ())
    }

    fn check(&self, offset: usize) -> Result<*mut u32, Error> {
        if !offset.is_multiple_of(4) || offset.checked_add(4).is_none_or(|end| end > self.len) {
            return Err(Error::BadOffset {
                offset,
                len: self.len,
            });
        }
        // SAFETY: `offset + 4 <= len`, so the pointer stays inside the mapping.
        Ok(unsafe { self.base.as_ptr().add(offset) }.cast::<u32>())
    }

    /// Volatile 32-bit read at `offset` (a multiple of 4 inside the mapping).
    pub(crate) fn read_u32(&self, offset: usize) -> Result<u32, Error> {
        let p = self.check(offset)?;
        // SAFETY: `p` is 4-byte aligned (page-aligned base, offset % 4 == 0) and
        // inside the mapping; volatile because another agent (device) changes it.
        Ok(unsafe { p.read_volatile() })
    }

    /// Volatile 32-bit write at `offset`.
    pub(crate) fn write_u32(&self, offset: usize, value: u32) -> Result<(), Error> {
        let p = self.check(offset)?;
        // SAFETY: as in `read_u32`.
        unsafe { p.write_volatile(value) };
        Ok(())
    }
}

impl Mapping {
    /// Atomic 32-bit load at `offset`, for memory two agents of the emulated board
    /// share (its register page): ordered by the caller's fences.
    pub(crate) fn load_u32(&self, offset: usize) -> Result<u32, Error> {
        let p = self.check(offset)?;
        // SAFETY: `p` is 4-byte aligned and inside the mapping, which lives as long
        // as `self`; every access to the emulated board's registers is atomic.
        Ok(unsafe { std::sync::atomic::AtomicU32::from_ptr(p) }
            .load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Atomic 32-bit store at `offset` with release ordering: what the storer
    /// wrote before is visible to whoever sees the value and fences with acquire.
    pub(crate) fn store_u32(&self, offset: usize, value: u32) -> Result<(), Error> {
        let p = self.check(offset)?;
        // SAFETY: as in `load_u32`.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(p) }
            .store(value, std::sync::atomic::Ordering::Release);
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range this value mapped; nothing borrows it
        // beyond the owner's lifetime.
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}
