//! Host memory the GPU's copy engines and kernels reach: the papers' standard I/O
//! (pageable memory the driver stages through a pinned buffer of its own) against
//! zero-copy (page-locked memory the engines read and write directly, or mapped
//! memory kernels read in place).

use super::{Error, Gpu, check, wrap};
use cudarc::driver::{result, sys};
use std::alloc::Layout;
use std::ptr::NonNull;

/// Kinds of host memory, in the order the experiments list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostKind {
    /// Ordinary (pageable) memory: the driver copies it through a pinned staging
    /// buffer of its own (standard I/O).
    Pageable,
    /// Page-locked memory the copy engines reach directly (`cuMemHostAlloc`).
    Pinned,
    /// Page-locked, write-combined (`CU_MEMHOSTALLOC_WRITECOMBINED`): not cached
    /// by the CPU, so the device reads it without snooping; CPU reads of it are slow.
    WriteCombined,
    /// Page-locked and mapped into the device's address space
    /// (`CU_MEMHOSTALLOC_DEVICEMAP`): kernels read and write it in place.
    Mapped,
    /// Memory the program already owns, page-locked afterwards
    /// (`cuMemHostRegister`).
    Registered,
}

impl HostKind {
    /// Every kind.
    pub const ALL: [HostKind; 5] = [
        HostKind::Pageable,
        HostKind::Pinned,
        HostKind::WriteCombined,
        HostKind::Mapped,
        HostKind::Registered,
    ];

    /// The kind's short name.
    pub fn name(self) -> &'static str {
        match self {
            HostKind::Pageable => "pageable",
            HostKind::Pinned => "pinned",
            HostKind::WriteCombined => "pinned-wc",
            HostKind::Mapped => "mapped",
            HostKind::Registered => "registered",
        }
    }

    /// Whether the copy engines reach it without a staging copy (zero-copy).
    pub fn page_locked(self) -> bool {
        self != HostKind::Pageable
    }
}

impl std::str::FromStr for HostKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HostKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = HostKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown host memory kind {s:?} (one of {})",
                    names.join(", ")
                )
            })
    }
}

/// How a buffer's memory is given back.
enum Owner {
    /// From the global allocator with this layout.
    Heap(Layout),
    /// From `cuMemHostAlloc`.
    Driver,
    /// From the global allocator with this layout, registered with the driver.
    Registered(Layout),
}

/// A host buffer of one [`HostKind`], page-aligned, zeroed when made.
///
/// A transfer borrows it mutably while the device uses it. If a wait on the
/// device times out, the buffer is *surrendered*: its memory is never given back
/// (the device may still write it) and the CPU's view moves to private zeroed
/// memory, so nothing the program can reach is written by the device.
pub struct HostBuf {
    gpu: Gpu,
    kind: HostKind,
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
    /// The view after a surrender.
    private: Option<Box<[u8]>>,
}

// SAFETY: the buffer owns its memory; the raw pointer is not shared.
unsafe impl Send for HostBuf {}

const PAGE: usize = 4096;

/// Whole pages for `len > 0` bytes, page-aligned: never of size zero (the
/// rounding is checked: near the top of the address space it would wrap).
fn page_layout(len: usize) -> Result<Layout, Error> {
    let too_long = || Error::TooLong {
        len,
        capacity: isize::MAX as usize,
    };
    let bytes = len.div_ceil(PAGE).checked_mul(PAGE).ok_or_else(too_long)?;
    if bytes == 0 {
        return Err(Error::Empty);
    }
    Layout::from_size_align(bytes, PAGE).map_err(|_| too_long())
}

impl HostBuf {
    /// `len` bytes of `kind` memory for `gpu`'s engines.
    pub fn new(gpu: &Gpu, kind: HostKind, len: usize) -> Result<HostBuf, Error> {
        if len == 0 {
            return Err(Error::Empty);
        }
        gpu.bind()?;
        let heap = || {
            let layout = page_layout(len)?;
            // SAFETY: the layout has a non-zero size (`page_layout`).
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            NonNull::new(p)
                .map(|p| (p, layout))
                .ok_or(Error::Shape(format!("out of host memory for {len} bytes")))
        };
        let (ptr, owner) = match kind {
            HostKind::Pageable => {
                let (p, l) = heap()?;
                (p, Owner::Heap(l))
            }
            HostKind::Pinned | HostKind::WriteCombined | HostKind::Mapped => {
                let flags = match kind {
                    HostKind::WriteCombined => sys::CU_MEMHOSTALLOC_WRITECOMBINED,
                    HostKind::Mapped => sys::CU_MEMHOSTALLOC_DEVICEMAP,
                    _ => 0,
                } | sys::CU_MEMHOSTALLOC_PORTABLE;
                // SAFETY: a plain page-locked allocation in the current context.
                let p = wrap("cuMemHostAlloc", unsafe { result::malloc_host(len, flags) })?;
                let p = NonNull::new(p.cast::<u8>()).ok_or(Error::Driver {
                    call: "cuMemHostAlloc",
                    name: "a null pointer".into(),
                })?;
                // SAFETY: `len` bytes at `p` were just allocated for us.
                unsafe { p.as_ptr().write_bytes(0, len) };
                (p, Owner::Driver)
            }
            HostKind::Registered => {
                let (p, l) = heap()?;
                // SAFETY: `l.size()` bytes at `p` are ours until the buffer drops,
                // which unregisters them before freeing.
                let r = unsafe {
                    sys::cuMemHostRegister_v2(
                        p.as_ptr().cast(),
                        l.size(),
                        sys::CU_MEMHOSTREGISTER_PORTABLE,
                    )
                };
                if let Err(e) = check("cuMemHostRegister", r) {
                    // SAFETY: allocated just above with this layout, not registered.
                    unsafe { std::alloc::dealloc(p.as_ptr(), l) };
                    return Err(e);
                }
                (p, Owner::Registered(l))
            }
        };
        Ok(HostBuf {
            gpu: gpu.clone(),
            kind,
            ptr,
            len,
            owner,
            private: None,
        })
    }

    /// The kind of memory.
    pub fn kind(&self) -> HostKind {
        self.kind
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes (never: buffers are at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a timeout surrendered it.
    pub fn is_lost(&self) -> bool {
        self.private.is_some()
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.private {
            Some(p) => p,
            // SAFETY: `len` bytes at `ptr` are this buffer's; a transfer that lets
            // the device write them borrows the buffer mutably.
            None => unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) },
        }
    }

    /// The bytes, to fill or read in place.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.private {
            Some(p) => p,
            // SAFETY: as in `as_slice`, and `&mut self` excludes every other view.
            None => unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) },
        }
    }

    /// The memory's host address for the driver's copies; `None` once lost.
    pub(crate) fn host_ptr(&self) -> Option<*mut u8> {
        self.private.is_none().then_some(self.ptr.as_ptr())
    }

    /// The address kernels use for mapped memory; `None` for other kinds or once
    /// lost.
    pub(crate) fn device_ptr(&self) -> Result<Option<sys::CUdeviceptr>, Error> {
        if self.kind != HostKind::Mapped || self.private.is_some() {
            return Ok(None);
        }
        self.gpu.bind()?;
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: `ptr` was allocated with DEVICEMAP in a context of this device.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut d, self.ptr.as_ptr().cast(), 0)
        })?;
        Ok(Some(d))
    }

    /// Gives the memory up to a device that may still write it: it is never
    /// freed, and the CPU's view moves to private zeroed memory.
    pub(crate) fn surrender(&mut self) {
        if self.private.is_none() {
            self.private = Some(vec![0u8; self.len].into_boxed_slice());
        }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if self.private.is_some() {
            // Lost to the device: leaked on purpose.
            return;
        }
        // A copy still queued may use the memory.
        if self.gpu.synchronize().is_err() {
            return;
        }
        match self.owner {
            // SAFETY: allocated by `new` with this layout, freed once.
            Owner::Heap(l) => unsafe { std::alloc::dealloc(self.ptr.as_ptr(), l) },
            Owner::Driver => {
                // SAFETY: allocated by `cuMemHostAlloc`, freed once, idle.
                let _ = unsafe { result::free_host(self.ptr.as_ptr().cast()) };
            }
            Owner::Registered(l) => {
                // SAFETY: registered by `new`; unregistered once, then freed once.
                let r = unsafe { sys::cuMemHostUnregister(self.ptr.as_ptr().cast()) };
                if r == sys::CUresult::CUDA_SUCCESS {
                    // SAFETY: allocated by `new` with this layout.
                    unsafe { std::alloc::dealloc(self.ptr.as_ptr(), l) };
                }
            }
        }
    }
}

/// Memory the program owns (a queue's buffer, say), page-locked for the copy
/// engines while this lives. The device cannot see a mirrored queue's second
/// mapping, so a window that wraps is sent as two pieces.
pub struct Registration<'a> {
    gpu: Gpu,
    region: &'a [u8],
}

impl<'a> Registration<'a> {
    /// Registers `region` (whole pages: page-aligned, a multiple of the page size).
    pub fn new(gpu: &Gpu, region: &'a [u8]) -> Result<Registration<'a>, Error> {
        if region.is_empty() {
            return Err(Error::Empty);
        }
        if !(region.as_ptr() as usize).is_multiple_of(PAGE) || !region.len().is_multiple_of(PAGE) {
            return Err(Error::Shape(format!(
                "a registered region must be whole {PAGE}-byte pages ({} bytes at {:p})",
                region.len(),
                region.as_ptr()
            )));
        }
        gpu.bind()?;
        // SAFETY: the region is borrowed for `'a`, longer than the registration,
        // which is undone when this drops. The driver only page-locks it.
        check("cuMemHostRegister", unsafe {
            sys::cuMemHostRegister_v2(
                region.as_ptr().cast_mut().cast(),
                region.len(),
                sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        })?;
        Ok(Registration {
            gpu: gpu.clone(),
            region,
        })
    }

    /// The registered bytes.
    pub fn region(&self) -> &'a [u8] {
        self.region
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if self.gpu.synchronize().is_ok() {
            // SAFETY: registered by `new`, unregistered once, nothing queued uses it.
            let _ = unsafe { sys::cuMemHostUnregister(self.region.as_ptr().cast_mut().cast()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_rounding_is_checked_never_a_zero_size_layout() {
        assert_eq!(page_layout(1).unwrap().size(), PAGE);
        assert_eq!(page_layout(PAGE + 1).unwrap().size(), 2 * PAGE);
        for len in [usize::MAX, usize::MAX - PAGE + 2, isize::MAX as usize + 1] {
            assert!(
                matches!(page_layout(len), Err(Error::TooLong { .. })),
                "{len}"
            );
        }
        assert!(matches!(page_layout(0), Err(Error::Empty)));
    }
}
