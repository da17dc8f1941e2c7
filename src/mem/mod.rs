//! Buffers in DMA memory: a [`DmaPool`] carves typed [`DmaBuf`]s (CPU slice plus
//! bus address) out of a [`DmaMemory`] region, with a cache policy per pool.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytemuck::Pod;

use crate::platform::{self, DmaMemory};

mod view;
pub use view::CpuView;

/// Alignment of every buffer: a cache line (and the 0x40 SG descriptor alignment).
pub const ALIGN: usize = 64;

/// What went wrong with DMA memory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A buffer of zero items.
    #[error("a DMA buffer of zero bytes was asked for")]
    ZeroLength,
    /// Not enough contiguous free memory.
    #[error(
        "no {requested} contiguous bytes free in the DMA pool (largest free block {largest_free})"
    )]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Largest free block.
        largest_free: usize,
    },
    /// A buffer lost to a device that could not be halted was handed to a device
    /// again.
    #[error(
        "this buffer was lost to a DMA engine that could not be halted; it is no longer DMA memory"
    )]
    Lost,
    /// A buffer was handed to a pool it does not come from.
    #[error("buffer belongs to DMA pool {buffer_pool}, not to pool {pool}")]
    ForeignBuffer {
        /// Pool of the buffer.
        buffer_pool: u64,
        /// Pool it was handed to.
        pool: u64,
    },
    /// An alignment that is not a power of two (or too large for the region).
    #[error("alignment {0} is not a power of two of at most the region's size")]
    BadAlignment(usize),
    /// A region whose bus address is not on the [`ALIGN`]-byte grid: its
    /// buffers could not keep their alignment for the device.
    #[error("{region}: bus address {bus_base:#x} is not {ALIGN}-byte aligned")]
    MisalignedRegion {
        /// The region.
        region: String,
        /// Its bus address.
        bus_base: u64,
    },
    /// A second pool over memory a live pool already carves: the same bytes
    /// would have two owners.
    #[error("{region} is already carved by DMA pool {pool}: one pool per region")]
    RegionInUse {
        /// The region asked for.
        region: String,
        /// The pool that owns it.
        pool: u64,
    },
    /// Queues in DMA memory and separate CPU views need the region's file,
    /// which this one lacks.
    #[error(
        "this DMA memory has no file to map again: queues cannot live in it and its buffers have no separate CPU view"
    )]
    NoFile,
    /// A separate CPU view of a buffer that is not whole pages.
    #[error(
        "a separate CPU view needs a buffer of whole pages (DmaPool::alloc_aligned to the page size)"
    )]
    NotWholePages,
    /// The platform's cache maintenance failed.
    #[error(transparent)]
    Platform(#[from] platform::Error),
}

/// Cache maintenance of a pool's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CachePolicy {
    /// No maintenance: caches are coherent with the device.
    #[default]
    Coherent,
    /// Clean before the device reads, invalidate before the CPU reads.
    Explicit,
}

static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

/// What is carved out of DMA memory, process-wide: the bus range of every live
/// pool, and the ranges lost for good to engines that could not be halted
/// (never handed out again, by any later pool).
#[derive(Default)]
struct Carved {
    /// `(domain, start, end, pool)` of every live pool.
    pools: Vec<(u64, u64, u64, u64)>,
    /// `(domain, start, end)` lost to a device.
    lost: Vec<(u64, u64, u64)>,
}

static CARVED: Mutex<Carved> = Mutex::new(Carved {
    pools: Vec::new(),
    lost: Vec::new(),
});

fn carved() -> std::sync::MutexGuard<'static, Carved> {
    CARVED.lock().unwrap_or_else(PoisonError::into_inner)
}

struct PoolInner {
    memory: Arc<dyn DmaMemory>,
    policy: CachePolicy,
    id: u64,
    /// Free blocks `(offset, len)`, sorted by offset, never adjacent.
    free: Mutex<Vec<(usize, usize)>>,
    /// Bytes of buffers lost to engines that could not be halted: never handed
    /// out again.
    lost: AtomicUsize,
    /// The ranges `(offset, len)` of those buffers.
    lost_ranges: Mutex<Vec<(usize, usize)>>,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        let domain = self.memory.domain();
        let base = self.memory.bus_base();
        let lost = std::mem::take(
            &mut *self
                .lost_ranges
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut c = carved();
        c.pools.retain(|p| p.3 != self.id);
        c.lost.extend(
            lost.into_iter()
                .map(|(o, l)| (domain, base + o as u64, base + (o + l) as u64)),
        );
    }
}

impl PoolInner {
    fn release(&self, offset: usize, len: usize) {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let i = free.partition_point(|&(o, _)| o < offset);
        free.insert(i, (offset, len));
        // Merge with the next block, then with the previous one.
        if i + 1 < free.len() && free[i].0 + free[i].1 == free[i + 1].0 {
            free[i].1 += free[i + 1].1;
            free.remove(i + 1);
        }
        if i > 0 && free[i - 1].0 + free[i - 1].1 == free[i].0 {
            free[i - 1].1 += free[i].1;
            free.remove(i);
        }
    }
}

/// A pool of DMA buffers over one memory region.
#[derive(Clone)]
pub struct DmaPool {
    inner: Arc<PoolInner>,
}

impl DmaPool {
    /// A pool over the whole of `memory`: the one owner of its bytes. A second
    /// pool over the same memory (the same region opened twice, or one that
    /// overlaps it) while this one or any of its buffers lives is refused
    /// ([`Error::RegionInUse`]); share this pool (it is `Clone`) instead. Ranges
    /// a device kept after an earlier pool's engine could not be halted are
    /// never handed out by a later one.
    pub fn new(memory: Arc<dyn DmaMemory>, policy: CachePolicy) -> Result<Self, Error> {
        let size = memory.size() / ALIGN * ALIGN;
        let (domain, start) = (memory.domain(), memory.bus_base());
        if !start.is_multiple_of(ALIGN as u64) {
            return Err(Error::MisalignedRegion {
                region: memory.name(),
                bus_base: start,
            });
        }
        let end = start + size as u64;
        let id = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
        let mut c = carved();
        if let Some(p) = c
            .pools
            .iter()
            .find(|p| p.0 == domain && p.1 < end && start < p.2)
        {
            return Err(Error::RegionInUse {
                region: memory.name(),
                pool: p.3,
            });
        }
        // The free list: the region less what earlier pools lost to a device.
        let mut lost: Vec<(usize, usize)> = c
            .lost
            .iter()
            .filter(|l| l.0 == domain && l.1 < end && start < l.2)
            .map(|l| {
                let from = l.1.max(start) - start;
                let to = l.2.min(end) - start;
                (from as usize, (to - from) as usize)
            })
            .collect();
        lost.sort_unstable();
        let mut free = Vec::new();
        let mut at = 0;
        for (o, l) in lost {
            if o > at {
                free.push((at, o - at));
            }
            at = at.max(o + l);
        }
        if size > at {
            free.push((at, size - at));
        }
        c.pools.push((domain, start, end, id));
        drop(c);
        Ok(DmaPool {
            inner: Arc::new(PoolInner {
                memory,
                policy,
                id,
                free: Mutex::new(free),
                lost: AtomicUsize::new(0),
                lost_ranges: Mutex::new(Vec::new()),
            }),
        })
    }

    /// This pool's identity, carried by its buffers.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Bus address and size of the memory the pool carves.
    pub fn bus_range(&self) -> (u64, usize) {
        (self.inner.memory.bus_base(), self.inner.memory.size())
    }

    /// The pool's cache policy.
    pub fn policy(&self) -> CachePolicy {
        self.inner.policy
    }

    /// Bytes free in total.
    pub fn free_bytes(&self) -> usize {
        let free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        free.iter().map(|b| b.1).sum()
    }

    /// Bytes lost to engines that could not be halted after a timeout or an
    /// error (their buffers are never handed out again).
    pub fn lost_bytes(&self) -> usize {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// A buffer of `items` items of `T`, 64-byte aligned, zeroed (as the
    /// kernel's DMA allocators hand memory out: no buffer shows a previous
    /// owner's bytes, and a descriptor's status word starts clear). The
    /// zeroing costs one CPU write pass over the buffer (plus a cache clean
    /// where the policy is explicit).
    pub fn alloc<T: Pod>(&self, items: usize) -> Result<DmaBuf<T>, Error> {
        let bytes = items
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::OutOfMemory {
                requested: usize::MAX,
                largest_free: 0,
            })?;
        if bytes == 0 {
            return Err(Error::ZeroLength);
        }
        if std::mem::align_of::<T>() > ALIGN {
            return Err(Error::BadAlignment(std::mem::align_of::<T>()));
        }
        let span = bytes.div_ceil(ALIGN) * ALIGN;
        let mut free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(i) = free.iter().position(|&(_, l)| l >= span) else {
            return Err(Error::OutOfMemory {
                requested: bytes,
                largest_free: free.iter().map(|b| b.1).max().unwrap_or(0),
            });
        };
        let offset = free[i].0;
        if free[i].1 == span {
            free.remove(i);
        } else {
            free[i].0 += span;
            free[i].1 -= span;
        }
        drop(free);
        DmaBuf {
            pool: self.inner.clone(),
            offset,
            items,
            span,
            lost: AtomicBool::new(false),
            private: None,
            _items: PhantomData,
        }
        .zeroed()
    }

    /// `bytes` bytes starting on an `align`-byte boundary of the region, as a
    /// byte buffer, zeroed as [`alloc`](Self::alloc)'s are. `align` is a power of two; below [`ALIGN`] it is raised
    /// to it (every buffer keeps [`ALIGN`]); anything else is
    /// [`Error::BadAlignment`].
    pub fn alloc_aligned(&self, bytes: usize, align: usize) -> Result<DmaBuf<u8>, Error> {
        if bytes == 0 {
            return Err(Error::ZeroLength);
        }
        if !align.is_power_of_two() || align > self.inner.memory.size().max(ALIGN) {
            return Err(Error::BadAlignment(align));
        }
        let align = align.max(ALIGN);
        let span = bytes.div_ceil(ALIGN) * ALIGN;
        let mut free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let fits = |&(o, l): &(usize, usize)| {
            let start = o.next_multiple_of(align);
            (start - o).checked_add(span).is_some_and(|need| need <= l)
        };
        let Some(i) = free.iter().position(fits) else {
            return Err(Error::OutOfMemory {
                requested: bytes,
                largest_free: free.iter().map(|b| b.1).max().unwrap_or(0),
            });
        };
        let (o, l) = free[i];
        let offset = o.next_multiple_of(align);
        // What stays free: the gap before (if any), the rest after (if any).
        let mut rest = Vec::with_capacity(2);
        if offset > o {
            rest.push((o, offset - o));
        }
        if o + l > offset + span {
            rest.push((offset + span, o + l - offset - span));
        }
        free.splice(i..=i, rest);
        drop(free);
        DmaBuf {
            pool: self.inner.clone(),
            offset,
            items: bytes,
            span,
            lost: AtomicBool::new(false),
            private: None,
            _items: PhantomData,
        }
        .zeroed()
    }

    /// Memory for queues a device reads and writes in place (a queue's
    /// [`crate::ring::Builder::in_memory`]): each range is a page-aligned
    /// buffer of this pool, mapped again mirrored from the region's file, and
    /// kept with its cache policy. An error if the region has no file to map.
    pub fn queue_memory(&self) -> Result<Arc<dyn crate::ring::RegionSource>, Error> {
        if self.inner.memory.file().is_none() {
            return Err(Error::NoFile);
        }
        Ok(Arc::new(QueueMemory { pool: self.clone() }))
    }

    /// Checks that `buf` comes from this pool and may still be given to a device.
    pub fn check<T>(&self, buf: &DmaBuf<T>) -> Result<(), Error> {
        if buf.lost.load(Ordering::Relaxed) {
            return Err(Error::Lost);
        }
        if buf.pool.id != self.inner.id {
            return Err(Error::ForeignBuffer {
                buffer_pool: buf.pool.id,
                pool: self.inner.id,
            });
        }
        Ok(())
    }
}

/// A pool lending ranges to queues in DMA memory.
struct QueueMemory {
    pool: DmaPool,
}

impl std::fmt::Debug for QueueMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueMemory")
            .field("pool", &self.pool.id())
            .field("free_bytes", &self.pool.free_bytes())
            .finish()
    }
}

impl crate::ring::sealed::Sealed for QueueMemory {}

impl crate::ring::RegionSource for QueueMemory {
    fn region(&self, bytes: usize) -> Result<crate::ring::Region, crate::ring::Error> {
        let boxed = |e: Error| crate::ring::Error::Region(Box::new(e));
        let page = rustix::param::page_size();
        let buf = self
            .pool
            .alloc_aligned(bytes.next_multiple_of(page), page)
            .map_err(boxed)?;
        let memory = &self.pool.inner.memory;
        let (fd, base) = memory.file().ok_or_else(|| boxed(Error::NoFile))?;
        let file = fd.try_clone_to_owned().map_err(|e| {
            boxed(Error::Platform(platform::Error::Io {
                path: "DMA memory file".into(),
                source: e,
            }))
        })?;
        Ok(crate::ring::Region {
            file,
            offset: base + buf.offset as u64,
            len: buf.span,
            bus_addr: buf.bus_addr(),
            owner: Box::new(buf),
        })
    }

    fn sync(
        &self,
        owner: &(dyn std::any::Any + Send + Sync),
        offset: usize,
        len: usize,
        for_device: bool,
    ) -> Result<(), crate::ring::Error> {
        let buf = owner
            .downcast_ref::<DmaBuf<u8>>()
            .ok_or(crate::ring::Error::NotDmaMemory)?;
        let done = if for_device {
            buf.sync_range_for_device(offset, len)
        } else {
            buf.sync_range_for_cpu(offset, len)
        };
        done.map_err(|e| crate::ring::Error::Region(Box::new(e)))
    }

    fn memory_id(&self) -> u64 {
        self.pool.id()
    }

    fn coherent(&self) -> bool {
        self.pool.policy() == CachePolicy::Coherent
    }

    fn abandon(&self, owner: &(dyn std::any::Any + Send + Sync)) {
        if let Some(buf) = owner.downcast_ref::<DmaBuf<u8>>() {
            buf.abandon();
        }
    }
}

/// A buffer in DMA memory: a CPU view and the bus address the device uses. It is
/// returned to its pool when dropped. Whoever holds it owns its bytes; a transfer
/// borrows or owns it while the device uses it, and gives it back only once the
/// transfer is complete or the engine is confirmed halted.
///
/// If an engine cannot be halted after a timeout or an error, the buffers it was
/// given are *lost* to it: their DMA memory is never returned to the pool, and a
/// buffer the device may still write moves its CPU view to private memory, so
/// nothing the program can reach is written by the device. A lost buffer cannot be
/// given to a device again ([`Error::Lost`]).
pub struct DmaBuf<T> {
    pool: Arc<PoolInner>,
    offset: usize,
    items: usize,
    span: usize,
    /// Lost to a device that could not be halted: not returned to the pool.
    lost: AtomicBool,
    /// The CPU's view once the buffer was surrendered to such a device.
    private: Option<Box<[T]>>,
    _items: PhantomData<T>,
}

impl<T: Pod> DmaBuf<T> {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items
    }

    /// Whether the buffer holds no items (never true: pools refuse empty buffers).
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Length in bytes.
    pub fn byte_len(&self) -> usize {
        self.items * std::mem::size_of::<T>()
    }

    /// Bus address of the first byte, for the device.
    pub fn bus_addr(&self) -> u64 {
        self.pool.memory.bus_base() + self.offset as u64
    }

    /// Identity of the pool the buffer comes from.
    pub fn pool_id(&self) -> u64 {
        self.pool.id
    }

    /// Whether the buffer was lost to an engine that could not be halted.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// Gives up the buffer's DMA memory to a device that may still read it: the
    /// range is never returned to the pool. The CPU view stays (the device only
    /// reads). For drivers written elsewhere whose engine could not be halted.
    pub fn abandon(&self) {
        if !self.lost.swap(true, Ordering::Relaxed) {
            self.pool.lost.fetch_add(self.span, Ordering::Relaxed);
            self.pool
                .lost_ranges
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((self.offset, self.span));
        }
    }

    /// Gives up the buffer's DMA memory to a device that may still write it: the
    /// range is never returned to the pool, and the CPU's view moves to private
    /// zeroed memory of the same length. Where the buffer is whole pages
    /// ([`DmaPool::alloc_aligned`] to the page size, a multiple of it long),
    /// the pages themselves are replaced by private memory too, so a view
    /// handed out as a raw pointer (to Python, say) stops reaching the device's
    /// memory as well. For drivers written elsewhere whose engine could not be
    /// halted.
    pub fn surrender(&mut self) {
        self.abandon();
        if self.private.is_none() {
            self.private = Some(vec![T::zeroed(); self.items].into_boxed_slice());
            // SAFETY: the range is this buffer's own (the pool hands it out
            // once) inside the region's mapping, and `&mut self` rules out a
            // Rust reference into it.
            unsafe {
                crate::platform::replace_with_private(
                    self.pool.memory.cpu_base().add(self.offset),
                    self.span,
                );
            }
        }
    }

    /// This new buffer with every byte zero, the device's view included.
    fn zeroed(mut self) -> Result<Self, Error> {
        bytemuck::cast_slice_mut::<T, u8>(self.as_mut_slice()).fill(0);
        self.sync_for_device(self.byte_len())?;
        Ok(self)
    }

    /// The items, for the CPU.
    pub fn as_slice(&self) -> &[T] {
        if let Some(p) = &self.private {
            return p;
        }
        // SAFETY: the range `offset..offset + byte_len` lies inside the region and
        // belongs to this buffer alone (the pool hands it out once); it is 64-byte
        // aligned, initialised memory, and any bit pattern is a valid `T`. The
        // device only touches it while a transfer owns the buffer by value.
        unsafe {
            std::slice::from_raw_parts(
                self.pool.memory.cpu_base().add(self.offset).cast::<T>(),
                self.items,
            )
        }
    }

    /// The items, for the CPU to fill.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        if let Some(p) = &mut self.private {
            return p;
        }
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only view.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.pool.memory.cpu_base().add(self.offset).cast::<T>(),
                self.items,
            )
        }
    }

    /// Address of item `i`, if it is in the buffer.
    fn item_ptr(&self, i: usize) -> Option<*mut T> {
        if let Some(p) = &self.private {
            return p.get(i).map(|x| std::ptr::from_ref(x).cast_mut());
        }
        (i < self.items).then(|| {
            // SAFETY: `i` is in bounds (checked), so the offset stays inside this
            // buffer's range of the region.
            unsafe {
                self.pool
                    .memory
                    .cpu_base()
                    .add(self.offset)
                    .cast::<T>()
                    .add(i)
            }
        })
    }

    /// Reads item `i` with a volatile load: for fields the device writes while the
    /// CPU watches (descriptor status words). `None` past the end.
    pub fn read_volatile(&self, i: usize) -> Option<T> {
        // SAFETY: the address is in bounds (`item_ptr`), aligned for `T` (64-byte
        // aligned base, item-sized steps) and any bit pattern is a `T`.
        self.item_ptr(i).map(|p| unsafe { p.read_volatile() })
    }

    /// Writes item `i` with a volatile store: for fields the device reads while the
    /// CPU works (descriptor control and status words). `false` past the end.
    pub fn write_volatile(&mut self, i: usize, value: T) -> bool {
        // SAFETY: as in `read_volatile`; `&mut self` makes this the only CPU view.
        self.item_ptr(i)
            .map(|p| unsafe { p.write_volatile(value) })
            .is_some()
    }

    /// Makes the first `bytes` bytes visible to the device, if the pool's policy asks.
    pub fn sync_for_device(&self, bytes: usize) -> Result<(), Error> {
        self.sync_range_for_device(0, bytes)
    }

    /// Makes the device's writes to the first `bytes` bytes visible to the CPU, if
    /// the pool's policy asks.
    pub fn sync_for_cpu(&self, bytes: usize) -> Result<(), Error> {
        self.sync_range_for_cpu(0, bytes)
    }

    /// [`sync_for_device`](Self::sync_for_device) for `bytes` bytes from byte
    /// `from` (clipped to the buffer).
    pub fn sync_range_for_device(&self, from: usize, bytes: usize) -> Result<(), Error> {
        self.sync_range(from, bytes, |m, o, n| m.sync_for_device(o, n))
    }

    /// [`sync_for_cpu`](Self::sync_for_cpu) for `bytes` bytes from byte `from`
    /// (clipped to the buffer).
    pub fn sync_range_for_cpu(&self, from: usize, bytes: usize) -> Result<(), Error> {
        self.sync_range(from, bytes, |m, o, n| m.sync_for_cpu(o, n))
    }

    /// Applies one direction of cache maintenance to part of the buffer, if the
    /// pool's policy asks.
    fn sync_range(
        &self,
        from: usize,
        bytes: usize,
        sync: impl FnOnce(&dyn DmaMemory, usize, usize) -> Result<(), crate::platform::Error>,
    ) -> Result<(), Error> {
        if self.pool.policy == CachePolicy::Explicit
            && self.private.is_none()
            && from < self.byte_len()
        {
            let n = bytes.min(self.byte_len() - from);
            sync(self.pool.memory.as_ref(), self.offset + from, n)?;
        }
        Ok(())
    }
}

impl DmaBuf<u32> {
    /// Reads word `i` with an atomic load: for the words a device writes while the
    /// CPU watches (descriptor status). Pair it with
    /// [`dma_rmb`](crate::platform::dma_rmb) before reading what the word
    /// announces. `None` past the end.
    pub fn load_word(&self, i: usize) -> Option<u32> {
        let p = self.item_ptr(i)?;
        // SAFETY: the address is in bounds and 4-byte aligned (`item_ptr`); the
        // word lives as long as `self`, and every access to it from the device
        // side is atomic too.
        Some(unsafe { AtomicU32::from_ptr(p) }.load(Ordering::Relaxed))
    }
}

impl<T> Drop for DmaBuf<T> {
    fn drop(&mut self) {
        // A lost buffer's range may still be the device's: it never goes back.
        if !self.lost.load(Ordering::Relaxed) {
            self.pool.release(self.offset, self.span);
        }
    }
}

impl<T> std::fmt::Debug for DmaBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmaBuf")
            .field("pool", &self.pool.id)
            .field("offset", &self.offset)
            .field("items", &self.items)
            .field("lost", &self.lost.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::sim::SimBoard;

    fn pool(bytes: usize, policy: CachePolicy) -> DmaPool {
        let board = SimBoard::new(1, bytes, 0x1000_0000, 0).unwrap();
        DmaPool::new(Arc::new(board.memory().unwrap()), policy).unwrap()
    }

    #[test]
    fn a_buffer_never_shows_its_previous_owners_bytes() {
        for policy in [CachePolicy::Coherent, CachePolicy::Explicit] {
            let p = pool(1 << 14, policy);
            let mut a = p.alloc::<u32>(1000).unwrap();
            a.as_mut_slice().fill(0xDEAD_BEEF);
            a.sync_for_device(a.byte_len()).unwrap();
            drop(a);
            let b = p.alloc::<u32>(1000).unwrap();
            assert!(b.as_slice().iter().all(|&x| x == 0), "{policy:?}");
            drop(b);
            let c = p.alloc_aligned(4000, 4096).unwrap();
            assert!(c.as_slice().iter().all(|&x| x == 0), "{policy:?}");
        }
    }

    #[test]
    fn buffers_are_aligned_disjoint_and_returned() {
        let p = pool(1 << 16, CachePolicy::Coherent);
        let total = p.free_bytes();
        let mut a = p.alloc::<u32>(10).unwrap();
        let mut b = p.alloc::<u8>(100).unwrap();
        assert_eq!(a.bus_addr() % ALIGN as u64, 0);
        assert_eq!(b.bus_addr() % ALIGN as u64, 0);
        assert!(b.bus_addr() >= a.bus_addr() + a.byte_len() as u64);
        a.as_mut_slice().fill(7);
        b.as_mut_slice().fill(9);
        assert!(a.as_slice().iter().all(|&x| x == 7));
        assert!(b.as_slice().iter().all(|&x| x == 9));
        drop(a);
        drop(b);
        assert_eq!(p.free_bytes(), total);
        // Everything merged back: one allocation of the whole region works.
        let all = p.alloc::<u8>(total).unwrap();
        assert_eq!(all.byte_len(), total);
    }

    #[test]
    fn lost_buffers_never_return_and_leave_device_memory() {
        let p = pool(4096, CachePolicy::Coherent);
        let total = p.free_bytes();
        let mut rx = p.alloc::<u8>(100).unwrap();
        let tx = p.alloc::<u8>(64).unwrap();
        let base = rx.as_slice().as_ptr();
        rx.as_mut_slice().fill(7);
        rx.surrender();
        tx.abandon();
        // The CPU view of the surrendered buffer is private memory now.
        assert_ne!(rx.as_slice().as_ptr(), base);
        assert!(rx.as_slice().iter().all(|&b| b == 0));
        assert!(matches!(p.check(&rx), Err(Error::Lost)));
        assert!(matches!(p.check(&tx), Err(Error::Lost)));
        drop(rx);
        drop(tx);
        assert_eq!(p.lost_bytes(), 128 + 64);
        assert_eq!(p.free_bytes(), total - 192);
        // What is handed out next lies elsewhere.
        let next = p.alloc::<u8>(100).unwrap();
        assert_ne!(next.as_slice().as_ptr(), base);
    }

    #[test]
    fn bad_requests_are_errors() {
        let p = pool(4096, CachePolicy::Explicit);
        assert!(matches!(p.alloc::<u8>(0), Err(Error::ZeroLength)));
        match p.alloc::<u8>(8192) {
            Err(Error::OutOfMemory {
                requested,
                largest_free,
            }) => assert_eq!((requested, largest_free), (8192, 4096)),
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        let q = pool(4096, CachePolicy::Coherent);
        let b = q.alloc::<u8>(16).unwrap();
        assert!(matches!(p.check(&b), Err(Error::ForeignBuffer { .. })));
        q.check(&b).unwrap();
        let c = p.alloc::<u8>(64).unwrap();
        c.sync_for_device(64).unwrap();
        c.sync_for_cpu(64).unwrap();
    }

    #[test]
    fn a_region_has_one_pool_at_a_time() {
        let board = SimBoard::new(1, 1 << 16, 0x1000_0000, 0).unwrap();
        let first = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
        // The same region mapped again is the same bytes: refused by name.
        let again = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent);
        match again {
            Err(Error::RegionInUse { region, pool }) => {
                assert_eq!(pool, first.id());
                assert!(region.contains("0x10000000"), "{region}");
            }
            other => panic!("expected RegionInUse, got {:?}", other.map(|p| p.id())),
        }
        // Another board's memory at the same bus address is other memory.
        let other = SimBoard::new(1, 1 << 16, 0x1000_0000, 0).unwrap();
        DmaPool::new(Arc::new(other.memory().unwrap()), CachePolicy::Coherent).unwrap();
        // A buffer keeps the pool (and its claim) alive after the pool is gone.
        let buf = first.alloc::<u8>(64).unwrap();
        drop(first);
        assert!(DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).is_err());
        drop(buf);
        DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
    }

    #[test]
    fn memory_lost_to_a_device_stays_out_of_every_later_pool() {
        let board = SimBoard::new(1, 1 << 16, 0x1000_0000, 0).unwrap();
        let memory = || Arc::new(board.memory().unwrap());
        let p = DmaPool::new(memory(), CachePolicy::Coherent).unwrap();
        let keep = p.alloc::<u8>(4096).unwrap();
        let mut gone = p.alloc::<u8>(4096).unwrap();
        let lost_at = gone.bus_addr();
        gone.surrender();
        drop((keep, gone, p));
        let q = DmaPool::new(memory(), CachePolicy::Coherent).unwrap();
        assert_eq!(q.free_bytes(), (1 << 16) - 4096);
        let mut seen = Vec::new();
        while let Ok(b) = q.alloc::<u8>(4096) {
            assert_ne!(b.bus_addr(), lost_at);
            seen.push(b);
        }
        assert_eq!(seen.len(), 15);
    }

    #[test]
    fn alignments_are_powers_of_two_and_buffers_keep_the_grid() {
        let p = pool(1 << 16, CachePolicy::Coherent);
        for bad in [0, 3, 96, 100, 1 << 20] {
            match p.alloc_aligned(64, bad) {
                Err(Error::BadAlignment(a)) => assert_eq!(a, bad),
                other => panic!("alignment {bad}: expected BadAlignment, got {other:?}"),
            }
        }
        let a = p.alloc_aligned(100, 16).unwrap();
        let b = p.alloc_aligned(64, 4096).unwrap();
        let c = p.alloc::<u32>(16).unwrap();
        for addr in [a.bus_addr(), c.bus_addr()] {
            assert_eq!(addr % ALIGN as u64, 0, "{addr:#x}");
        }
        assert_eq!(b.bus_addr() % 4096, 0);
        // A region off the 64-byte grid is refused: its buffers could not be.
        let off = SimBoard::new(1, 1 << 16, 0x1000_0020, 0).unwrap();
        assert!(matches!(
            DmaPool::new(Arc::new(off.memory().unwrap()), CachePolicy::Coherent),
            Err(Error::MisalignedRegion { .. })
        ));
    }

    #[test]
    fn a_surrendered_whole_page_buffer_is_unreachable_through_raw_pointers() {
        let board = SimBoard::new(1, 1 << 16, 0x1000_0000, 0).unwrap();
        let dev = board.device().unwrap();
        let p = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
        let page = rustix::param::page_size();
        let mut b = p.alloc_aligned(page, page).unwrap();
        b.as_mut_slice().fill(3);
        let raw = b.as_slice().as_ptr();
        b.surrender();
        // The device still writes its memory ...
        dev.write_ddr(b.bus_addr(), &vec![9u8; page]).unwrap();
        // ... which a pointer taken before no longer reaches.
        // SAFETY: the page stays mapped (private memory now) as long as `b`'s
        // region does; nothing else writes it.
        let seen = unsafe { std::slice::from_raw_parts(raw, page) };
        assert!(
            seen.iter().all(|&x| x == 0),
            "the old view reads private memory"
        );
    }
}
