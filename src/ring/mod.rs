//! Zero-copy circular queues backed by virtual-memory mirroring (paper 001).
//!
//! The queue's memory is mapped twice, back to back, so every run of up to
//! `capacity` slots is one contiguous slice, wherever it starts. A writer
//! [`reserve`](Writer::reserve)s `n` slots, fills them in place and
//! [`commit`](Writer::commit)s; a reader [`peek`](Reader::peek)s with a *firing
//! threshold* (it may look at more items than it then [`consume`](Reader::consume)s),
//! which is what lets a sliding-window algorithm run over its input without ever
//! copying the overlap.
//!
//! ```
//! let (mut w, mut r) = dmaflow::ring::channel::<f32>(1024)?;
//! let s = w.reserve(4)?;
//! s.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
//! w.commit(4)?;
//! let window = r.peek(4)?; // look at 4 items ...
//! assert_eq!(window, &[1.0, 2.0, 3.0, 4.0]);
//! r.consume(2)?; // ... but consume only 2: the other 2 stay for the next window
//! assert_eq!(r.peek(2)?, &[3.0, 4.0]);
//! # Ok::<(), dmaflow::ring::Error>(())
//! ```
//!
//! A reader waiting for `t` items and the writer waiting for `n` free slots wait on
//! each other for ever when `t + n` exceeds the capacity by more than one: size the
//! queue for both, or let a process network ([`crate::graph`]) grow it.

mod barrier;
pub(crate) mod cursor;
mod mirror;
mod ready;
pub mod shm;
mod spin;

pub use ready::{Readable, Writable};
pub use spin::{Backoff, Calibration, SleepBudget};

use std::io;
use std::marker::PhantomData;

pub use bytemuck::Pod;

use cursor::{ReadSide, WriteSide};
use mirror::Mirror;

use crate::sync::Arc;

/// What went wrong with a queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `reserve(n)` asked for more slots than the queue has: it could never succeed.
    #[error("cannot reserve {requested} items: the queue holds only {capacity}")]
    ReserveTooLarge {
        /// Items asked for.
        requested: usize,
        /// Capacity of the queue in items.
        capacity: usize,
    },
    /// `peek(threshold)` with a firing threshold larger than the queue.
    #[error("firing threshold {threshold} exceeds the queue capacity of {capacity} items")]
    ThresholdTooLarge {
        /// Threshold asked for.
        threshold: usize,
        /// Capacity of the queue in items.
        capacity: usize,
    },
    /// `commit(k)` of more items than are reserved.
    #[error("cannot commit {requested} items: only {reserved} are reserved")]
    CommitTooLarge {
        /// Items the caller tried to commit.
        requested: usize,
        /// Items reserved and not yet committed.
        reserved: usize,
    },
    /// `consume(m)` of more items than are readable.
    #[error("cannot consume {requested} items: only {available} are readable")]
    ConsumeTooLarge {
        /// Items the caller tried to consume.
        requested: usize,
        /// Items readable now.
        available: usize,
    },
    /// Every reader has been dropped: what the writer would write could never be read.
    #[error("queue closed: every reader has been dropped")]
    Closed,
    /// Items of size zero cannot be queued.
    #[error("items of size zero cannot be queued")]
    ZeroSizedItem,
    /// The item type is aligned beyond a page: a queue's slots are only
    /// page-aligned, so its items would be handed out misaligned.
    #[error(
        "items aligned to {align} bytes cannot be queued: a queue's slots are aligned to its page size ({page} bytes)"
    )]
    ItemAlignment {
        /// The item type's alignment.
        align: usize,
        /// The page size.
        page: usize,
    },
    /// The requested size does not fit the address space.
    #[error("a queue of {bytes} bytes does not fit in the address space")]
    CapacityOverflow {
        /// Bytes asked for.
        bytes: usize,
    },
    /// A queue would grow beyond the limit its owner set (a process network's
    /// [`crate::graph::Graph::set_queue_limit`]): a firing threshold that large,
    /// or a network that is not boundedly schedulable.
    #[error(
        "the queue would grow to {bytes} bytes, beyond its limit of {limit} bytes (Graph::set_queue_limit)"
    )]
    QueueLimit {
        /// Bytes the queue would need.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A range of DMA memory that cannot hold a mirrored queue.
    #[error("DMA memory for a queue: {reason}")]
    BadRegion {
        /// What is wrong with it.
        reason: String,
    },
    /// The DMA memory a queue lives in could not give a range or keep its
    /// caches in step (its own error, named).
    #[error("DMA memory for a queue: {0}")]
    Region(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The queue's DMA memory was given up to a device that could not be
    /// halted after a failure: the queue can no longer be used.
    #[error("the queue's DMA memory was lost to a device that could not be halted")]
    LostToDevice,
    /// A device address or cache maintenance asked of a queue in ordinary memory.
    #[error("the queue is in ordinary memory: a device cannot reach it")]
    NotDmaMemory,
    /// A span of items past the queue's capacity.
    #[error("{requested} items from {from} on do not fit a queue of {capacity}")]
    SpanTooLarge {
        /// First item (from the read or write position).
        from: usize,
        /// Items asked for.
        requested: usize,
        /// Capacity of the queue in items.
        capacity: usize,
    },
    /// The operating system refused to create the mirrored mapping.
    #[error("mirrored mapping of {bytes} bytes failed at {step}: {source}")]
    Map {
        /// Bytes asked for in the failing step.
        bytes: usize,
        /// System call that failed.
        step: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// A shared queue's memory object could not be created or opened.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The object's path.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A system call of a queue shared between processes failed.
    #[error("{step} failed: {source}")]
    System {
        /// System call that failed.
        step: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// A memory object that is not a shared queue this build can read.
    #[error("not a dmaflow shared queue: {reason}")]
    NotAQueue {
        /// What is wrong with it.
        reason: String,
    },
    /// A shared queue of items of another size than the reader's.
    #[error("the shared queue holds {found}-byte items; this reader reads {expected}-byte items")]
    ItemSize {
        /// The reader's item size.
        expected: usize,
        /// The queue's.
        found: u64,
    },
    /// Every reader slot of a shared queue is taken.
    #[error("all {max_readers} reader slots of the shared queue are taken")]
    NoReaderSlot {
        /// Slots the queue has.
        max_readers: usize,
    },
    /// A shared queue asked for with no reader slots or too many.
    #[error("a shared queue needs 1 to {most} reader slots, not {max_readers}")]
    BadReaders {
        /// Slots asked for.
        max_readers: usize,
        /// The most allowed.
        most: usize,
    },
    /// Fewer readers attached to a shared queue than waited for.
    #[error("{attached} of {wanted} readers attached within {waited:?}")]
    NoReaders {
        /// Readers waited for.
        wanted: usize,
        /// Readers attached when the wait ended.
        attached: usize,
        /// How long the writer waited.
        waited: std::time::Duration,
    },
    /// This reader of a shared queue was evicted by the writer: it held the
    /// writer back without moving for too long (or its process was taken for
    /// gone). What its last window held may have been overwritten.
    #[error(
        "this reader was evicted from the shared queue (it held the writer back without \
         moving); its last window may have been overwritten"
    )]
    Evicted,
    /// The writer's process of a shared queue exited without closing it.
    #[error("the writer process {pid} exited without closing the shared queue")]
    WriterGone {
        /// The writer's process id.
        pid: u32,
    },
    /// A shared queue's control page says the writer is where no writer
    /// following the protocol can be: behind this reader, or more than a
    /// capacity ahead of it (another process wrote the page, or this reader
    /// was overrun). Nothing from the queue is handed out after it.
    #[error(
        "the shared queue's writer position {write} is impossible for a reader at {read}          in a queue of {capacity} items (the control page was overwritten or the reader          was overrun)"
    )]
    BadWriterPosition {
        /// The writer's position as read from the control page.
        write: u64,
        /// This reader's position.
        read: u64,
        /// The queue's capacity in items.
        capacity: u64,
    },
}

/// How a blocked writer or reader waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wait {
    /// Busy-spin on the other side's cursor: lowest latency, burns a core.
    Spin,
    /// Spin for as long as a `sched_yield` costs on this machine
    /// ([`Calibration`]), then `sched_yield` between checks.
    Yield,
    /// Spin for as long as a `sched_yield` costs, then `sched_yield` between
    /// checks until as long as a sleep and wake-up cost on this machine has
    /// passed ([`Calibration`]), or longer where this side's earlier waits
    /// came back soon (up to 50 us, [`SleepBudget`]), then sleep until
    /// woken; costs no CPU while asleep.
    /// A sleeper is woken by the commit (or consume) that reaches what it
    /// waits for, not by every one: the others cost the waking side a fence
    /// and one load.
    #[default]
    Block,
}

/// A range of a file of DMA memory (a u-dma-buf device, the emulated board's
/// memory object) that a queue maps twice, mirrored, so a device can read and
/// write its slots while the CPU sees every run of slots contiguous. Only
/// dmaflow makes one (from a [`crate::mem::DmaPool`]): its bus address is
/// trusted, so no other code may name one.
pub struct Region {
    /// The file.
    pub(crate) file: std::os::fd::OwnedFd,
    /// File offset of the range's first byte (on a page boundary).
    pub(crate) offset: u64,
    /// Bytes in the range (whole pages).
    pub(crate) len: usize,
    /// The bus address of the range's first byte, as the device sees it.
    pub(crate) bus_addr: u64,
    /// What keeps the range reserved for the queue (dropped after the mapping).
    pub(crate) owner: Box<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("bus_addr", &self.bus_addr)
            .finish_non_exhaustive()
    }
}

pub(crate) mod sealed {
    /// Keeps [`super::RegionSource`] dmaflow's own: a device is pointed at
    /// the bus addresses its ranges carry.
    pub trait Sealed {}
}

/// Where a queue in DMA memory gets its memory: the first range, and a new one
/// each time a process network grows the queue. Sealed: the only sources are
/// dmaflow's own ([`crate::mem::DmaPool::queue_memory`]), because a device is
/// pointed at the bus addresses they hand out.
///
/// A source of a program's own, which could hand the device any address, does
/// not compile:
///
/// ```compile_fail
/// use dmaflow::ring::{Error, Region, RegionSource};
/// #[derive(Debug)]
/// struct Anywhere;
/// impl RegionSource for Anywhere {
///     fn region(&self, _: usize) -> Result<Region, Error> { Err(Error::NotDmaMemory) }
///     fn sync(&self, _: &(dyn std::any::Any + Send + Sync), _: usize, _: usize, _: bool)
///         -> Result<(), Error> { Ok(()) }
///     fn memory_id(&self) -> u64 { 1 }
/// }
/// ```
///
/// and neither does a [`Region`] with a bus address of its own:
///
/// ```compile_fail
/// let file: std::os::fd::OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
/// let r = dmaflow::ring::Region { file, offset: 0, len: 4096, bus_addr: 0x1000_0000,
///                                 owner: Box::new(()) };
/// ```
pub trait RegionSource: sealed::Sealed + Send + Sync + std::fmt::Debug {
    /// A range of at least `bytes` bytes (a whole number of pages).
    fn region(&self, bytes: usize) -> Result<Region, Error>;
    /// Cache maintenance of `len` bytes at `offset` of the range `owner`
    /// keeps: before the device reads them (`for_device`), or after it wrote
    /// them and before the CPU reads them.
    fn sync(
        &self,
        owner: &(dyn std::any::Any + Send + Sync),
        offset: usize,
        len: usize,
        for_device: bool,
    ) -> Result<(), Error>;
    /// Which DMA memory the ranges come from (the lending pool's id), so a
    /// driver can refuse a queue in another board's or pool's memory.
    fn memory_id(&self) -> u64;
    /// Whether the device's writes are visible to the CPU without cache
    /// maintenance (and the CPU's to the device).
    fn coherent(&self) -> bool;
    /// Gives the range `owner` keeps up to a device that could not be halted:
    /// it is never handed out again.
    fn abandon(&self, owner: &(dyn std::any::Any + Send + Sync));
}

/// Where a run of a queue's slots lies for a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaSpan {
    /// Bus address of the first byte.
    pub bus: u64,
    /// Byte offset in the queue's range (for cache maintenance).
    pub offset: usize,
    /// Bytes.
    pub bytes: usize,
}

/// Configures and creates a queue.
///
/// ```
/// use dmaflow::ring::{Builder, Wait};
/// let (w, r) = Builder::<u32>::new(4096).wait(Wait::Spin).build()?;
/// assert!(w.capacity() >= 4096);
/// # Ok::<(), dmaflow::ring::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder<T> {
    min_items: usize,
    wait: Wait,
    memory: Option<std::sync::Arc<dyn RegionSource>>,
    _items: PhantomData<T>,
}

impl<T: Pod> Builder<T> {
    /// A queue of at least `min_items` items (rounded up to whole pages).
    pub fn new(min_items: usize) -> Self {
        Builder {
            min_items,
            wait: Wait::default(),
            memory: None,
            _items: PhantomData,
        }
    }

    /// Puts the queue in DMA memory from `source` (and grows it there), so a
    /// device can reach its slots ([`Reader::dma_spans`], [`Writer::dma_spans`]).
    pub fn in_memory(mut self, source: std::sync::Arc<dyn RegionSource>) -> Self {
        self.memory = Some(source);
        self
    }

    /// How blocked calls wait (default [`Wait::Block`]).
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Creates the queue with one reader.
    ///
    /// Errors: [`Error::ZeroSizedItem`], [`Error::ItemAlignment`] for an item
    /// type aligned beyond a page, [`Error::CapacityOverflow`] or
    /// [`Error::Map`] if the memory cannot be had.
    pub fn build(self) -> Result<(Writer<T>, Reader<T>), Error> {
        let size = std::mem::size_of::<T>();
        item_fits::<T>()?;
        let bytes = self
            .min_items
            .checked_mul(size)
            .ok_or(Error::CapacityOverflow { bytes: usize::MAX })?;
        let mirror = Arc::new(match self.memory {
            Some(source) => Mirror::in_region(source, bytes, size)?,
            None => Mirror::new(bytes, size)?,
        });
        let capacity = mirror.len() / size;
        let (ws, rs) = cursor::pair(mirror, capacity, self.wait);
        let reader = Reader {
            side: rs,
            _items: PhantomData,
        };
        let writer = Writer {
            side: ws,
            reserved: 0,
            _items: PhantomData,
        };
        Ok((writer, reader))
    }
}

/// Whether items of type `T` can be queued: not of size zero, and aligned
/// no further than a page (a queue's slots lie in page-aligned mappings).
pub(crate) fn item_fits<T>() -> Result<(), Error> {
    if std::mem::size_of::<T>() == 0 {
        return Err(Error::ZeroSizedItem);
    }
    let (align, page) = (std::mem::align_of::<T>(), rustix::param::page_size());
    if align > page {
        return Err(Error::ItemAlignment { align, page });
    }
    Ok(())
}

/// A queue of at least `min_items` items with the default [`Wait::Block`] waiting.
pub fn channel<T: Pod>(min_items: usize) -> Result<(Writer<T>, Reader<T>), Error> {
    Builder::new(min_items).build()
}

/// The writing end of a queue. Dropping it ends the stream for every reader.
pub struct Writer<T> {
    side: WriteSide<Arc<Mirror>>,
    reserved: usize,
    _items: PhantomData<T>,
}

impl<T: Pod> Writer<T> {
    /// Capacity in items: the most that can be reserved, or be unread, at once.
    pub fn capacity(&self) -> usize {
        self.side.capacity()
    }

    /// Waits until `n` contiguous slots are free and returns exactly `n` of them.
    /// Their contents are unspecified (old items); overwrite what you commit.
    ///
    /// Errors: [`Error::ReserveTooLarge`] if `n` exceeds the capacity,
    /// [`Error::Closed`] if every reader is gone.
    pub fn reserve(&mut self, n: usize) -> Result<&mut [T], Error> {
        self.side.wait_free(n, true)?;
        self.usable()?;
        Ok(self.slots(n))
    }

    /// Like [`reserve`](Writer::reserve) but never blocks: `Ok(None)` when the space
    /// is not free yet.
    pub fn try_reserve(&mut self, n: usize) -> Result<Option<&mut [T]>, Error> {
        if !self.side.wait_free(n, false)? {
            return Ok(None);
        }
        self.usable()?;
        Ok(Some(self.slots(n)))
    }

    /// Whether `n` slots from the write position are free, without looking at
    /// them: for a driver that must not form a slice over slots a device may
    /// still be writing.
    pub(crate) fn has_room(&mut self, n: usize) -> Result<bool, Error> {
        let free = self.side.wait_free(n, false)?;
        self.usable()?;
        if free {
            self.reserved = n;
        }
        Ok(free)
    }

    /// Fails once the queue's memory is lost to a device.
    fn usable(&self) -> Result<(), Error> {
        if self.side.memory().is_lost() {
            return Err(Error::LostToDevice);
        }
        Ok(())
    }

    fn slots(&mut self, n: usize) -> &mut [T] {
        self.reserved = n;
        // SAFETY: `wait_free` established that the `n <= capacity` slots from the
        // write position are free: every reader has consumed them, so no reader
        // slice covers them (readers only see published slots), and our `&mut self`
        // borrow rules out any other writer slice. The range lies within the double
        // mapping because slot < capacity and n <= capacity.
        unsafe { self.side.memory().items_mut(self.side.slot(), n) }
    }

    /// Publishes the first `k` reserved items to every reader. What remains of the
    /// reservation stays reserved.
    pub fn commit(&mut self, k: usize) -> Result<(), Error> {
        if k > self.reserved {
            return Err(Error::CommitTooLarge {
                requested: k,
                reserved: self.reserved,
            });
        }
        self.reserved -= k;
        self.side.publish(k);
        Ok(())
    }

    /// A new reader that sees every item committed from now on. The writer waits for
    /// the slowest reader.
    pub fn add_reader(&mut self) -> Reader<T> {
        Reader {
            side: self.side.add_reader(),
            _items: PhantomData,
        }
    }

    /// Items committed so far.
    pub fn position(&self) -> u64 {
        self.side.position()
    }

    /// Slots free now (every reader has consumed them), looking at the
    /// readers' positions.
    pub fn free(&mut self) -> usize {
        let unread = self.side.position() - self.side.oldest_unread();
        self.capacity().saturating_sub(unread as usize)
    }

    /// Slots free now, at most `max`: the readers' positions are looked at
    /// only when fewer than `max` were free as last seen (a writer that takes
    /// less than what it knows to be free leaves their cache lines alone).
    pub(crate) fn free_up_to(&mut self, max: usize) -> usize {
        match usize::try_from(self.side.known_free()) {
            Ok(known) if known >= max => max,
            _ => self.free().min(max),
        }
    }

    /// Grows the queue to at least `min_items` items, keeping every unread and every
    /// reserved item (readers follow to the new memory on their next look). Does
    /// nothing if the queue is already that large. This is how a process network
    /// resolves an artificial deadlock (Parks' bounded scheduling).
    ///
    /// Errors: [`Error::CapacityOverflow`] or [`Error::Map`] if the memory cannot be
    /// had; the queue is then unchanged.
    pub fn grow(&mut self, min_items: usize) -> Result<(), Error> {
        let old_capacity = self.capacity();
        if min_items <= old_capacity {
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        let bytes = min_items
            .checked_mul(size)
            .ok_or(Error::CapacityOverflow { bytes: usize::MAX })?;
        let new = Arc::new(self.side.memory().alike(bytes, size)?);
        let capacity = new.len() / size;
        let start = self.side.oldest_unread();
        let len = (self.side.position() - start) as usize + self.reserved;
        let old = self.side.memory();
        // SAFETY: `len <= old_capacity` items from the oldest unread position are
        // published or reserved by us, and no writer slice is live (`&mut self`), so
        // they are not being written; readers may read them too, which is fine.
        let src: &[T] = unsafe { old.items((start % old_capacity as u64) as usize, len) };
        // SAFETY: `new` is ours alone until `relayout` publishes it, and
        // `len <= old_capacity < capacity` items fit from any slot.
        let dst: &mut [T] = unsafe { new.items_mut((start % capacity as u64) as usize, len) };
        crate::copies::copy(dst, src);
        self.side.relayout(new, capacity);
        Ok(())
    }

    /// Whether every reader has been dropped.
    pub fn is_closed(&self) -> bool {
        self.side.is_closed()
    }

    /// Where `n` slots from `from` slots past the write position lie for a
    /// device (one span, or two where they wrap): for handing reserved slots
    /// to S2MM. An error for a queue in ordinary memory.
    pub fn dma_spans(&self, from: usize, n: usize) -> Result<Vec<DmaSpan>, Error> {
        spans::<T>(
            self.side.memory(),
            self.side.slot(),
            self.capacity(),
            from,
            n,
        )
    }

    /// Keeps the queue's current memory for a device (see [`MemoryHold`]).
    pub fn hold(&self) -> MemoryHold {
        MemoryHold(self.side.memory().clone())
    }

    /// For a queue in DMA memory, which memory (see
    /// [`RegionSource::memory_id`]).
    pub fn dma_memory_id(&self) -> Option<u64> {
        self.side.memory().memory_id()
    }

    /// For a queue in DMA memory, whether its memory needs no cache
    /// maintenance (see [`RegionSource::coherent`]).
    pub fn dma_coherent(&self) -> Option<bool> {
        self.side.memory().coherent()
    }

    /// Cache maintenance (clean and invalidate) of `span` (from
    /// [`dma_spans`](Self::dma_spans)): before S2MM writes it, so that no dirty
    /// line of the CPU's is written back over what the device writes, and
    /// after, before the items are committed.
    pub fn sync_for_cpu(&self, span: DmaSpan) -> Result<(), Error> {
        self.side.memory().sync(span, false)
    }
}

/// Keeps a queue's memory as it is now mapped and, for DMA memory, its range
/// reserved, even if the queue grows into new memory meanwhile: hold one for
/// as long as a device may read or write the slots it was given.
pub struct MemoryHold(Arc<Mirror>);

impl MemoryHold {
    /// Gives the held memory up to a device that could not be halted: it is
    /// never unmapped or returned to its pool, the CPU's view of it is
    /// replaced by private memory, and the queue (if it still lives in this
    /// memory) fails every later use with [`Error::LostToDevice`].
    pub(crate) fn surrender(self) {
        self.0.surrender();
        // The mapping stays reserved for good: the device may still write the
        // range behind it.
        std::mem::forget(self);
    }
}

impl std::fmt::Debug for MemoryHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryHold")
            .field("bytes", &self.0.len())
            .finish()
    }
}

/// The device's view of `n` items of `T` from `from` past `slot`.
fn spans<T>(
    memory: &Mirror,
    slot: usize,
    capacity: usize,
    from: usize,
    n: usize,
) -> Result<Vec<DmaSpan>, Error> {
    if from.checked_add(n).is_none_or(|end| end > capacity) {
        return Err(Error::SpanTooLarge {
            from,
            requested: n,
            capacity,
        });
    }
    if memory.is_lost() {
        return Err(Error::LostToDevice);
    }
    memory
        .spans((slot + from) % capacity, n, std::mem::size_of::<T>())
        .ok_or(Error::NotDmaMemory)
}

/// A reading end of a queue. Each reader sees every item committed after it was
/// created.
pub struct Reader<T> {
    side: ReadSide<Arc<Mirror>>,
    _items: PhantomData<T>,
}

impl<T: Pod> Reader<T> {
    /// Capacity in items: the largest possible firing threshold.
    pub fn capacity(&self) -> usize {
        self.side.capacity()
    }

    /// Waits until at least `threshold` items are readable (the firing threshold)
    /// and returns the readable items as one contiguous slice: at least `threshold`
    /// of them, and every item committed so far whenever the reader had to look at
    /// the writer's cursor (items already known to be readable are returned without
    /// touching the writer's cache line). Once the writer is gone, returns what is
    /// left without waiting: possibly fewer than `threshold` items, and an empty
    /// slice only at the end of the stream.
    ///
    /// Errors: [`Error::ThresholdTooLarge`] if `threshold` exceeds the capacity.
    pub fn peek(&mut self, threshold: usize) -> Result<&[T], Error> {
        let n = self.side.wait_available(threshold, true)?.unwrap_or(0);
        self.usable()?;
        Ok(self.items(n))
    }

    /// Like [`peek`](Reader::peek) but never blocks: `Ok(None)` while fewer than
    /// `threshold` items are readable and the writer is still there.
    pub fn try_peek(&mut self, threshold: usize) -> Result<Option<&[T]>, Error> {
        Ok(match self.side.wait_available(threshold, false)? {
            Some(n) => {
                self.usable()?;
                Some(self.items(n))
            }
            None => None,
        })
    }

    /// Fails once the queue's memory is lost to a device: what it holds is
    /// not the stream any more.
    fn usable(&self) -> Result<(), Error> {
        if self.side.memory().is_lost() {
            return Err(Error::LostToDevice);
        }
        Ok(())
    }

    fn items(&self, n: usize) -> &[T] {
        // SAFETY: the `n <= capacity` items from the read position are published
        // (the write cursor was read with acquire ordering) and not yet consumed by
        // this reader, so the writer will not reserve them until we release them,
        // which needs `&mut self` and so ends this borrow first.
        unsafe { self.side.memory().items(self.side.slot(), n) }
    }

    /// Releases the first `m` readable items: they will not be seen again.
    ///
    /// Errors: [`Error::ConsumeTooLarge`] if fewer than `m` items are readable.
    pub fn consume(&mut self, m: usize) -> Result<(), Error> {
        self.side.release(m)
    }

    /// Items consumed so far.
    pub fn position(&self) -> u64 {
        self.side.position()
    }

    /// Whether the writer has been dropped (items may still be readable).
    pub fn is_writer_closed(&self) -> bool {
        self.side.writer_closed()
    }

    /// Where `n` items from `from` items past the read position lie for a
    /// device (one span, or two where they wrap): for handing a window to MM2S.
    /// An error for a queue in ordinary memory.
    pub fn dma_spans(&self, from: usize, n: usize) -> Result<Vec<DmaSpan>, Error> {
        spans::<T>(
            self.side.memory(),
            self.side.slot(),
            self.capacity(),
            from,
            n,
        )
    }

    /// Keeps the queue's current memory for a device (see [`MemoryHold`]).
    pub fn hold(&self) -> MemoryHold {
        MemoryHold(self.side.memory().clone())
    }

    /// For a queue in DMA memory, which memory (see
    /// [`RegionSource::memory_id`]).
    pub fn dma_memory_id(&self) -> Option<u64> {
        self.side.memory().memory_id()
    }

    /// Cache maintenance of `span` (from [`dma_spans`](Self::dma_spans)) before
    /// the device reads it: what the CPU wrote reaches memory.
    pub fn sync_for_device(&self, span: DmaSpan) -> Result<(), Error> {
        self.side.memory().sync(span, true)
    }
}

impl<T> std::fmt::Debug for Writer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("capacity", &self.side.capacity())
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl<T> std::fmt::Debug for Reader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("capacity", &self.side.capacity())
            .field("available", &self.side.available())
            .finish()
    }
}
