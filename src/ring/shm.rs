//! A queue shared between processes: the writer in one process, readers in
//! others, over one memory object (a memfd passed over a Unix socket, or a
//! file under `/dev/shm` opened by path). The slots are mirrored as in every
//! queue, so readers get the same [`peek`](ShmReader::peek) /
//! [`consume`](ShmReader::consume) windows with a firing threshold, and the
//! writer the same [`reserve`](ShmWriter::reserve) /
//! [`commit`](ShmWriter::commit).
//!
//! The memory object starts with a control page: a header that names the
//! layout (checked by every reader before it maps the slots), the writer's
//! position, and one cache-line-padded slot per reader holding its position,
//! its state and its process id. Every field is an atomic, so that the
//! protocol is the same one whether the other side is a thread or a process:
//! the writer publishes with a release store of its position, each reader
//! with a release store of its own.
//!
//! A reader process that dies does not wedge the writer: when the writer
//! waits for space held by a reader whose process is gone, or which has
//! held it back for [`ShmConfig::evict_after`], it evicts that reader (its
//! slot no longer holds the writer back) and reports it as a
//! [`ReaderEvent`]. The clock runs from the latest of: the start of the
//! writer's wait, the reader's last progress (a position past the furthest
//! it had shown), and the first look at its present position (the `peek`
//! that made its window). So a window is the reader's, unchanged, for at
//! least `evict_after` from the `peek` that made it. An evicted reader's
//! next call is [`Error::Evicted`]; what its last window showed may have
//! been overwritten since, so a reader uses what it read from a window only
//! once the `consume` that releases it has succeeded. A reader whose writer
//! process exits without closing the queue gets [`Error::WriterGone`]
//! instead of waiting for ever.
//!
//! ```
//! use dmaflow::ring::shm::{ShmConfig, ShmReader, ShmWriter};
//! let mut w = ShmWriter::<u32>::create(4096, &ShmConfig::default())?;
//! // Another process would receive the descriptor over a Unix socket
//! // (`send` / `receive`) or open the object by path.
//! let fd = w.fd().try_clone_to_owned().map_err(|e| dmaflow::ring::Error::System {
//!     step: "dup",
//!     source: e,
//! })?;
//! // SAFETY: only this queue's writer writes the object.
//! let mut r = unsafe { ShmReader::<u32>::from_fd(fd)? };
//! w.write(&[1, 2, 3])?;
//! assert_eq!(r.peek(3)?, &[1, 2, 3]);
//! r.consume(3)?;
//! # Ok::<(), dmaflow::ring::Error>(())
//! ```

use std::io::{IoSlice, IoSliceMut};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytemuck::Pod;
use crossbeam_utils::CachePadded;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};
use rustix::process::{Pid, getpid, test_kill_process};

use super::Error;
use super::mirror::{self, Mirror, Page};

/// "DMAFLOWQ": the first word of every shared queue's control page.
const MAGIC: u64 = u64::from_le_bytes(*b"DMAFLOWQ");
/// The layout's version. 3: slot 0 lies where [`Mirror::skew_for`] puts it,
/// not at the slots' first byte.
const VERSION: u64 = 3;
/// The most reader slots a queue may have.
pub const MAX_READERS: usize = 1024;

/// A reader slot's states.
const FREE: u32 = 0;
const CLAIMED: u32 = 1;
const ATTACHED: u32 = 2;
const EVICTED: u32 = 3;

/// The control page's header. Every field is an atomic: another process may
/// write any of them at any time, and any bytes are a valid value.
#[repr(C)]
struct Control {
    magic: AtomicU64,
    version: AtomicU64,
    item_size: AtomicU64,
    /// Slots, in items.
    capacity: AtomicU64,
    /// Where the slots start in the object (the control page's length).
    data_offset: AtomicU64,
    max_readers: AtomicU64,
    /// Bytes from one reader slot to the next.
    slot_stride: AtomicU64,
    writer_pid: AtomicU64,
    /// Items published by the writer.
    write: CachePadded<AtomicU64>,
    /// 1 once the writer has closed the queue.
    closed: CachePadded<AtomicU64>,
}

/// One reader's slot.
#[repr(C)]
struct ReaderSlot {
    state: AtomicU32,
    pid: AtomicU32,
    /// Items consumed by the reader.
    read: AtomicU64,
    /// One past the position at which the reader last took a window (0: none).
    window_at: AtomicU64,
    /// When it took it: `CLOCK_MONOTONIC` nanoseconds (one clock for every
    /// process of the machine).
    window_since: AtomicU64,
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

type PaddedSlot = CachePadded<ReaderSlot>;

/// Where the reader slots start in the control page.
fn slots_offset() -> usize {
    std::mem::size_of::<Control>().next_multiple_of(std::mem::align_of::<PaddedSlot>())
}

/// The control page's length for `max_readers` readers: whole pages.
fn control_len(max_readers: usize) -> usize {
    (slots_offset() + max_readers * std::mem::size_of::<PaddedSlot>())
        .next_multiple_of(rustix::param::page_size())
}

/// How a queue shared between processes is made.
#[derive(Debug, Clone)]
pub struct ShmConfig {
    /// Reader slots (1 to [`MAX_READERS`]).
    pub max_readers: usize,
    /// Where to create the memory object (a new file, typically under
    /// `/dev/shm`, removed when the writer is dropped); `None` for an
    /// anonymous one, passed to readers with [`ShmWriter::send`]. An
    /// anonymous object is sealed against truncation; a file is not (any
    /// process of the user may truncate it, and both ends' mappings then
    /// fault with SIGBUS): prefer the anonymous object where the reader can
    /// receive a descriptor.
    pub path: Option<PathBuf>,
    /// How long a reader may hold the writer back before the writer evicts
    /// it, counted from the latest of the writer's wait, the reader's last
    /// progress and the first `peek` at its present position (see the
    /// module's documentation). A reader whose process is gone is evicted at
    /// once.
    pub evict_after: Duration,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            max_readers: 8,
            path: None,
            evict_after: Duration::from_secs(1),
        }
    }
}

/// Why a reader was evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictReason {
    /// Its process no longer exists.
    ProcessGone,
    /// It held the writer back without moving for this long.
    NoProgress(Duration),
}

/// Something that happened to a reader, as the writer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderEvent {
    /// The reader in `slot` (of process `pid`) was evicted at `position`
    /// (its last consumed item).
    Evicted {
        /// Its slot.
        slot: usize,
        /// Its process.
        pid: u32,
        /// Items it had consumed.
        position: u64,
        /// Why.
        reason: EvictReason,
    },
}

/// Whether process `pid` exists (a process in another PID namespace is taken
/// for gone).
fn process_exists(pid: u32) -> bool {
    match i32::try_from(pid).ok().and_then(Pid::from_raw) {
        Some(p) => !matches!(test_kill_process(p), Err(rustix::io::Errno::SRCH)),
        None => false,
    }
}

/// The shared queue's waits: the queue's own spin ([`super::Backoff`]: as
/// long as a `sched_yield` costs on this machine, looking in steps of 1, 2,
/// 4 ... pause instructions so that a look does not keep stealing the cache
/// line the other side is writing), then yields for up to [`YIELD_FOR`] (a
/// wait that short is part of streaming, and a sleep in it costs more than
/// the wait), then a sleep of 50 us between looks.
struct Backoff {
    spin: super::Backoff,
    yielding_since: Option<Instant>,
}

/// How long a shared-queue waiter yields before it sleeps between looks.
const YIELD_FOR: Duration = Duration::from_millis(1);

impl Backoff {
    fn new() -> Self {
        Backoff {
            spin: super::Backoff::new(),
            yielding_since: None,
        }
    }

    fn snooze(&mut self) {
        if self.spin.spin() {
            return;
        }
        let since = *self.yielding_since.get_or_insert_with(Instant::now);
        if since.elapsed() < YIELD_FOR {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Whether the wait is past its spin (it yields or sleeps now).
    fn past_spinning(&self) -> bool {
        self.spin.is_spun_out()
    }

    /// Whether the wait sleeps between looks now.
    fn sleeping(&self) -> bool {
        self.yielding_since
            .is_some_and(|t| t.elapsed() >= YIELD_FOR)
    }
}

/// Measures this process's wait costs ([`super::Calibration`], once per
/// process: a millisecond or more, several on a loaded machine) when a queue
/// end is made, before a reader claims its slot, so that they are never
/// measured inside the stream's first wait. A reader process's first wait
/// comes while the writer is already writing: measured there, the
/// calibration held the writer back for its whole length, once for every
/// reader process.
fn calibrate_now() {
    let _ = super::Calibration::get();
}

/// `(slot + k) % capacity` for `slot < capacity` and `k <= capacity`.
fn advance(slot: u64, k: u64, capacity: u64) -> u64 {
    let s = slot + k;
    if s >= capacity { s - capacity } else { s }
}

/// The mapped object: control page and mirrored slots.
struct Mapped {
    /// Dropped after every borrow of it (fields drop in order, and nothing
    /// borrowed from the mappings outlives the queue end that owns this).
    page: Page,
    slots: Mirror,
    capacity: u64,
    max_readers: usize,
}

impl Mapped {
    fn control(&self) -> &Control {
        // SAFETY: the page is page-aligned and at least `control_len` long
        // (checked when mapped), so it holds a `Control`; every field is an
        // atomic, valid for any bytes, and shared access to atomics is what
        // the protocol is made of.
        unsafe { &*self.page.base().cast::<Control>() }
    }

    fn slot(&self, i: usize) -> &ReaderSlot {
        debug_assert!(i < self.max_readers);
        // SAFETY: slot `i < max_readers` lies inside the control page
        // (`control_len(max_readers)` bytes, checked when mapped), aligned
        // for `PaddedSlot`; its fields are atomics, valid for any bytes.
        unsafe {
            &*self
                .page
                .base()
                .add(slots_offset() + i * std::mem::size_of::<PaddedSlot>())
                .cast::<PaddedSlot>()
        }
    }
}

/// The writing end of a queue shared between processes.
pub struct ShmWriter<T: Pod> {
    map: Mapped,
    fd: OwnedFd,
    /// Removed when the writer is dropped.
    path: Option<PathBuf>,
    position: u64,
    /// `position % capacity`, kept incrementally (no division per call).
    slot: u64,
    reserved: usize,
    /// Writes may run up to here without looking at the readers again.
    limit: u64,
    evict_after: Duration,
    /// Per slot: the position last seen and since when.
    watch: Vec<(u64, Instant)>,
    /// Per slot: the window (its `window_at`) whose start was honoured, and
    /// that start. Once per position: a reader cannot put its clock back
    /// without moving on.
    windows: Vec<(u64, Instant)>,
    last_police: Instant,
    /// Since when the writer has been finding no room, if it is.
    blocked_since: Option<Instant>,
    events: Vec<ReaderEvent>,
    _items: PhantomData<T>,
}

impl<T: Pod> ShmWriter<T> {
    /// Creates a queue of at least `min_items` slots (rounded up to whole
    /// pages) in a new memory object, with no reader yet. The first queue
    /// end a process makes measures its wait costs ([`super::Calibration`]).
    pub fn create(min_items: usize, cfg: &ShmConfig) -> Result<Self, Error> {
        super::item_fits::<T>()?;
        calibrate_now();
        let size = std::mem::size_of::<T>();
        if !(1..=MAX_READERS).contains(&cfg.max_readers) {
            return Err(Error::BadReaders {
                max_readers: cfg.max_readers,
                most: MAX_READERS,
            });
        }
        let bytes = min_items
            .max(1)
            .checked_mul(size)
            .ok_or(Error::CapacityOverflow { bytes: usize::MAX })?;
        let data_len = Mirror::round(bytes, size)?;
        let header = control_len(cfg.max_readers);
        let total = header
            .checked_add(data_len)
            .ok_or(Error::CapacityOverflow { bytes })?;
        let fd = mirror::create_object(cfg.path.as_deref(), total)?;
        // From here on a failure removes the file it created.
        let made = (|| {
            let page = Page::map(fd.as_fd(), header)?;
            let slots = Mirror::of_object(fd.as_fd(), header as u64, data_len, size)?;
            Ok::<_, Error>(Mapped {
                page,
                slots,
                capacity: (data_len / size) as u64,
                max_readers: cfg.max_readers,
            })
        })();
        let map = match made {
            Ok(m) => m,
            Err(e) => {
                if let Some(p) = &cfg.path {
                    let _ = std::fs::remove_file(p);
                }
                return Err(e);
            }
        };
        let c = map.control();
        for (field, value) in [
            (&c.version, VERSION),
            (&c.item_size, size as u64),
            (&c.capacity, map.capacity),
            (&c.data_offset, header as u64),
            (&c.max_readers, cfg.max_readers as u64),
            (&c.slot_stride, std::mem::size_of::<PaddedSlot>() as u64),
            (&c.writer_pid, getpid().as_raw_nonzero().get() as u64),
        ] {
            field.store(value, Ordering::Relaxed);
        }
        // Readers check the magic (acquire) before anything else.
        c.magic.store(MAGIC, Ordering::Release);
        let now = Instant::now();
        Ok(ShmWriter {
            limit: 0,
            position: 0,
            slot: 0,
            reserved: 0,
            evict_after: cfg.evict_after,
            watch: vec![(0, now); cfg.max_readers],
            windows: vec![(0, now); cfg.max_readers],
            last_police: now,
            blocked_since: None,
            events: Vec::new(),
            path: cfg.path.clone(),
            map,
            fd,
            _items: PhantomData,
        })
    }

    /// The memory object, to pass to another process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Sends the memory object's descriptor over a Unix socket (one byte
    /// with an `SCM_RIGHTS` message); the other side calls
    /// [`ShmReader::receive`].
    pub fn send(&self, socket: &UnixStream) -> Result<(), Error> {
        let fds = [self.fd.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        control.push(SendAncillaryMessage::ScmRights(&fds));
        sendmsg(
            socket,
            &[IoSlice::new(b"q")],
            &mut control,
            SendFlags::empty(),
        )
        .map_err(|e| Error::System {
            step: "sendmsg (SCM_RIGHTS)",
            source: e.into(),
        })?;
        Ok(())
    }

    /// Slots in the queue.
    pub fn capacity(&self) -> usize {
        self.map.capacity as usize
    }

    /// Items published so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Readers attached now.
    pub fn readers(&self) -> usize {
        (0..self.map.max_readers)
            .filter(|&i| self.map.slot(i).state.load(Ordering::Acquire) == ATTACHED)
            .count()
    }

    /// Waits until at least `n` readers are attached, for at most `timeout`.
    pub fn wait_for_readers(&self, n: usize, timeout: Duration) -> Result<(), Error> {
        let t0 = Instant::now();
        let mut backoff = Backoff::new();
        loop {
            let attached = self.readers();
            if attached >= n {
                return Ok(());
            }
            if t0.elapsed() >= timeout {
                return Err(Error::NoReaders {
                    wanted: n,
                    attached,
                    waited: timeout,
                });
            }
            backoff.snooze();
        }
    }

    /// What happened to readers since the last call (evictions).
    pub fn take_events(&mut self) -> Vec<ReaderEvent> {
        std::mem::take(&mut self.events)
    }

    /// The position of the slowest attached reader (the writer's own with
    /// none).
    fn slowest(&self) -> u64 {
        (0..self.map.max_readers)
            .map(|i| self.map.slot(i))
            .filter(|s| s.state.load(Ordering::Acquire) == ATTACHED)
            .map(|s| s.read.load(Ordering::Acquire))
            .fold(self.position, u64::min)
    }

    /// Whether `n` more items fit now (looking at the readers again if the
    /// cached limit says no).
    fn fits(&mut self, n: usize) -> bool {
        let end = self.position + n as u64;
        if end > self.limit {
            // Pairs with the fence in `ShmReader::attach`: a reader attaching
            // now is seen here, or sees every position published so far.
            std::sync::atomic::fence(Ordering::SeqCst);
            self.limit = self.slowest() + self.map.capacity;
        }
        end <= self.limit
    }

    /// Evicts the readers that hold back a write ending at `end` and whose
    /// process is gone or which have not moved for `evict_after` of a wait
    /// that began at `waiting_since`; frees the slots of evicted readers whose
    /// process is gone.
    fn police(&mut self, end: u64, waiting_since: Instant) {
        let now = Instant::now();
        for i in 0..self.map.max_readers {
            let slot = self.map.slot(i);
            let state = slot.state.load(Ordering::Acquire);
            let pid = slot.pid.load(Ordering::Relaxed);
            if state == EVICTED && !process_exists(pid) {
                let _ =
                    slot.state
                        .compare_exchange(EVICTED, FREE, Ordering::AcqRel, Ordering::Relaxed);
                continue;
            }
            if state != ATTACHED {
                continue;
            }
            let read = slot.read.load(Ordering::Acquire);
            // Progress is a position past the furthest this slot has shown:
            // a reader that moves back and forth frees nothing the writer
            // needs, and its clock runs on.
            if read > self.watch[i].0 {
                self.watch[i] = (read, now);
            }
            if read + self.map.capacity >= end {
                continue;
            }
            // A window the reader took at its present position runs its own
            // clock from when it was taken (never later than now, honoured
            // once per position).
            let at = slot.window_at.load(Ordering::Acquire);
            if at == read.wrapping_add(1) && at != self.windows[i].0 {
                let since = slot.window_since.load(Ordering::Relaxed);
                let ago = Duration::from_nanos(monotonic_ns().saturating_sub(since));
                self.windows[i] = (at, now.checked_sub(ago).unwrap_or(now).max(self.watch[i].1));
            }
            let mut clock = self.watch[i].1.max(waiting_since);
            if self.windows[i].0 == read.wrapping_add(1) {
                clock = clock.max(self.windows[i].1);
            }
            let still = now.duration_since(clock);
            let reason = if !process_exists(pid) {
                EvictReason::ProcessGone
            } else if still >= self.evict_after {
                EvictReason::NoProgress(still)
            } else {
                continue;
            };
            if slot
                .state
                .compare_exchange(ATTACHED, EVICTED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                if reason == EvictReason::ProcessGone {
                    slot.state.store(FREE, Ordering::Release);
                }
                self.events.push(ReaderEvent::Evicted {
                    slot: i,
                    pid,
                    position: read,
                    reason,
                });
            }
        }
    }

    #[inline]
    fn slots_mut(&mut self, n: usize) -> &mut [T] {
        self.reserved = n;
        let start = self.slot as usize;
        // SAFETY: `start < capacity` and `n <= capacity` keep the slice inside
        // the double mapping. Items from `position` on are not published, so no
        // reader reads them, and every attached reader has consumed up to
        // `position + n - capacity` (`fits`), so none is reading these slots'
        // earlier contents either; `&mut self` makes this the only slice. (A
        // reader process that breaks the protocol, or one evicted while it
        // still looks, is outside what this side can prevent: see
        // [`ShmReader::from_fd`].)
        unsafe { self.map.slots.items_mut(start, n) }
    }

    /// `n` free slots to fill in place, once every attached reader has made
    /// room (evicting readers that are gone or stuck; see [`ShmConfig`]).
    #[inline]
    pub fn reserve(&mut self, n: usize) -> Result<&mut [T], Error> {
        // The common case, room already known (which also means `n` is
        // within the capacity), without a call.
        if self.position + n as u64 <= self.limit {
            return Ok(self.slots_mut(n));
        }
        self.reserve_slow(n)
    }

    #[cold]
    #[inline(never)]
    fn reserve_slow(&mut self, n: usize) -> Result<&mut [T], Error> {
        if n as u64 > self.map.capacity {
            return Err(Error::ReserveTooLarge {
                requested: n,
                capacity: self.capacity(),
            });
        }
        let mut backoff = Backoff::new();
        while !self.fits(n) {
            // Readers are looked at closely (and the clock read) only once the
            // wait is past spinning: the wait counts from there.
            if backoff.past_spinning() {
                self.blocked(n);
            }
            backoff.snooze();
        }
        self.blocked_since = None;
        Ok(self.slots_mut(n))
    }

    /// The writer is waiting for room for `n` items: from when it began, and
    /// at most once a millisecond, evict the readers that hold it back and
    /// are gone or stuck.
    fn blocked(&mut self, n: usize) {
        let since = *self.blocked_since.get_or_insert_with(Instant::now);
        if self.last_police.elapsed() >= Duration::from_millis(1) {
            self.police(self.position + n as u64, since);
            self.last_police = Instant::now();
        }
    }

    /// Like [`reserve`](Self::reserve), but `None` at once when there is no
    /// room. Calls that keep finding no room count as one wait: readers that
    /// are gone, or stuck for [`ShmConfig::evict_after`] of it, are evicted.
    pub fn try_reserve(&mut self, n: usize) -> Result<Option<&mut [T]>, Error> {
        if n as u64 > self.map.capacity {
            return Err(Error::ReserveTooLarge {
                requested: n,
                capacity: self.capacity(),
            });
        }
        if !self.fits(n) {
            self.blocked(n);
            return Ok(None);
        }
        self.blocked_since = None;
        Ok(Some(self.slots_mut(n)))
    }

    /// Publishes the first `k` reserved slots.
    #[inline]
    pub fn commit(&mut self, k: usize) -> Result<(), Error> {
        if k > self.reserved {
            return Err(Error::CommitTooLarge {
                requested: k,
                reserved: self.reserved,
            });
        }
        self.position += k as u64;
        self.slot = advance(self.slot, k as u64, self.map.capacity);
        self.reserved = 0;
        self.map
            .control()
            .write
            .store(self.position, Ordering::Release);
        Ok(())
    }

    /// Copies `items` into the queue (in pieces no larger than the queue).
    pub fn write(&mut self, items: &[T]) -> Result<(), Error> {
        let capacity = self.capacity();
        crate::copies::write_in_pieces(self, items, capacity, Self::reserve, Self::commit)
    }
}

impl<T: Pod> Drop for ShmWriter<T> {
    /// Closes the queue (readers see the end of the stream after what was
    /// published) and removes its file, if it has one.
    fn drop(&mut self) {
        self.map.control().closed.store(1, Ordering::Release);
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A reading end of a queue shared between processes.
pub struct ShmReader<T: Pod> {
    map: Mapped,
    /// Its reader slot in the control page.
    slot: usize,
    read: u64,
    /// `read % capacity`, kept incrementally.
    at: u64,
    /// The writer's position last seen.
    seen: u64,
    writer_pid: u32,
    _items: PhantomData<T>,
}

impl<T: Pod> ShmReader<T> {
    /// Attaches to the queue at `path`.
    ///
    /// # Safety
    /// As [`from_fd`](Self::from_fd).
    pub unsafe fn open(path: &Path) -> Result<Self, Error> {
        let fd = mirror::open_object(path)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { Self::from_fd(fd) }
    }

    /// Receives a queue's descriptor over a Unix socket (sent with
    /// [`ShmWriter::send`]) and attaches to it.
    ///
    /// # Safety
    /// As [`from_fd`](Self::from_fd).
    pub unsafe fn receive(socket: &UnixStream) -> Result<Self, Error> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )
        .map_err(|e| Error::System {
            step: "recvmsg (SCM_RIGHTS)",
            source: e.into(),
        })?;
        let fd = control
            .drain()
            .find_map(|m| match m {
                RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
                _ => None,
            })
            .ok_or_else(|| Error::NotAQueue {
                reason: "no descriptor came with the message".into(),
            })?;
        // SAFETY: the caller's promise, passed on.
        unsafe { Self::from_fd(fd) }
    }

    /// Attaches to the queue in memory object `fd`, starting at the writer's
    /// present position. The layout is checked (a file that is not a queue
    /// of `T`-sized items is an error); a free reader slot is claimed. The
    /// process's wait costs ([`super::Calibration`]) are measured first if
    /// they were not yet, so that a writer never waits on that measurement.
    ///
    /// Every position read from the object is checked before use: the
    /// layout here, the writer's position at every look (a position behind
    /// this reader or more than a capacity ahead of it is
    /// [`Error::BadWriterPosition`]), so no peer can make this reader hand
    /// out memory outside the queue's slots or consume past what it saw.
    ///
    /// # Safety
    /// What is left to the caller is the items' memory itself: a window is a
    /// `&[T]` over memory another process can write, and nothing may write
    /// the items of a window while it is held. This queue's [`ShmWriter`]
    /// does not, as long as it has not evicted this reader: do not hold a
    /// window longer than the writer's [`ShmConfig::evict_after`] while the
    /// writer waits for room (an evicted reader's window may be overwritten;
    /// its next call says [`Error::Evicted`]). Only processes that follow the
    /// protocol may write the object's slots (`T` is plain old data, so what
    /// such a write can change is the items' values, never an address).
    pub unsafe fn from_fd(fd: OwnedFd) -> Result<Self, Error> {
        super::item_fits::<T>()?;
        calibrate_now();
        let size = std::mem::size_of::<T>();
        let page = rustix::param::page_size();
        let bad = |reason: String| Error::NotAQueue { reason };
        let len = mirror::object_len(fd.as_fd())?;
        if len < page as u64 {
            return Err(bad(format!("{len} bytes, less than a control page")));
        }
        // The header first, then the whole control page once its size is known.
        let first = Page::map(fd.as_fd(), page)?;
        let (magic, version, item_size, capacity, data_offset, max_readers, stride, writer_pid) = {
            // SAFETY: the mapping is a whole page, page-aligned, so it holds a
            // `Control`; every field is an atomic, valid for any bytes; `first`
            // outlives `c` (this block).
            let c = unsafe { &*first.base().cast::<Control>() };
            (
                c.magic.load(Ordering::Acquire),
                c.version.load(Ordering::Relaxed),
                c.item_size.load(Ordering::Relaxed),
                c.capacity.load(Ordering::Relaxed),
                c.data_offset.load(Ordering::Relaxed),
                c.max_readers.load(Ordering::Relaxed),
                c.slot_stride.load(Ordering::Relaxed),
                c.writer_pid.load(Ordering::Relaxed),
            )
        };
        if magic != MAGIC {
            return Err(bad("no dmaflow queue header".into()));
        }
        if version != VERSION || stride != std::mem::size_of::<PaddedSlot>() as u64 {
            return Err(bad(format!(
                "layout version {version} with {stride}-byte reader slots; this build reads \
                 version {VERSION} with {}-byte slots",
                std::mem::size_of::<PaddedSlot>()
            )));
        }
        if item_size != size as u64 {
            return Err(Error::ItemSize {
                expected: size,
                found: item_size,
            });
        }
        let readers = usize::try_from(max_readers)
            .ok()
            .filter(|r| (1..=MAX_READERS).contains(r))
            .ok_or_else(|| bad(format!("{max_readers} reader slots")))?;
        let header = control_len(readers);
        let data_len = capacity.checked_mul(item_size);
        if data_offset != header as u64
            || data_len.is_none_or(|d| d == 0 || data_offset + d != len || d % page as u64 != 0)
        {
            return Err(bad(format!(
                "{capacity} items of {item_size} bytes from offset {data_offset} do not make \
                 the object's {len} bytes"
            )));
        }
        let data_len = (capacity * item_size) as usize;
        drop(first);
        let map = Mapped {
            page: Page::map(fd.as_fd(), header)?,
            slots: Mirror::of_object(fd.as_fd(), data_offset, data_len, item_size as usize)?,
            capacity,
            max_readers: readers,
        };
        Self::attach(map, writer_pid as u32, || {})
    }

    /// Claims a reader slot of `map` and attaches at the writer's position.
    /// `between` runs after the first look at the writer's position and
    /// before the slot is marked attached (a test holds the steps apart
    /// there: a writer that runs on meanwhile must not overrun the reader).
    fn attach(map: Mapped, writer_pid: u32, between: impl FnOnce()) -> Result<Self, Error> {
        let readers = map.max_readers;
        let capacity = map.capacity;
        let me = getpid().as_raw_nonzero().get() as u32;
        let slot = (0..readers)
            .find(|&i| {
                map.slot(i)
                    .state
                    .compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(Error::NoReaderSlot {
                max_readers: readers,
            })?;
        let s = map.slot(slot);
        s.pid.store(me, Ordering::Relaxed);
        // A provisional position first, so that a writer that sees the slot
        // attached is held back from the start.
        let first = map.control().write.load(Ordering::Acquire);
        s.read.store(first, Ordering::Release);
        between();
        s.state.store(ATTACHED, Ordering::SeqCst);
        // Pairs with the fence in the writer's `fits`: either the writer's
        // next look at the readers sees this slot attached, or this look sees
        // every position the writer published before its last look, so the
        // writer (which runs at most a capacity past that look's slowest
        // position) does not overwrite anything from `start` on unseen.
        std::sync::atomic::fence(Ordering::SeqCst);
        let start = map.control().write.load(Ordering::SeqCst);
        let mut reader = ShmReader {
            map,
            slot,
            read: start,
            at: start % capacity,
            seen: start,
            writer_pid,
            _items: PhantomData,
        };
        if start < first {
            // A writer does not move back: the control page is not a queue's.
            return Err(reader.bad_position(start));
        }
        reader.map.slot(slot).read.store(start, Ordering::Release);
        // (`reader` is dropped on error above, freeing the slot.)
        reader.seen = start;
        Ok(reader)
    }

    /// The error for a writer position this reader cannot accept.
    fn bad_position(&self, write: u64) -> Error {
        Error::BadWriterPosition {
            write,
            read: self.read,
            capacity: self.map.capacity,
        }
    }

    /// Slots in the queue.
    pub fn capacity(&self) -> usize {
        self.map.capacity as usize
    }

    /// Items consumed so far (counted from the writer's start).
    pub fn position(&self) -> u64 {
        self.read
    }

    #[inline]
    fn attached(&self) -> Result<(), Error> {
        if self.map.slot(self.slot).state.load(Ordering::Acquire) == ATTACHED {
            Ok(())
        } else {
            Err(Error::Evicted)
        }
    }

    /// Readable items if at least `threshold` are (or the stream has ended):
    /// how many; `None` otherwise.
    fn ready(&mut self, threshold: usize) -> Result<Option<usize>, Error> {
        if threshold as u64 > self.map.capacity {
            return Err(Error::ThresholdTooLarge {
                threshold,
                capacity: self.capacity(),
            });
        }
        self.attached()?;
        let want = threshold.max(1) as u64;
        if self.seen - self.read < want {
            let write = self.map.control().write.load(Ordering::Acquire);
            self.look(write)?;
            if self.seen - self.read < want {
                if self.map.control().closed.load(Ordering::Acquire) != 1 {
                    return Ok(None);
                }
                // Closed: the writer published its last position before, so
                // this look is final.
                let write = self.map.control().write.load(Ordering::Acquire);
                self.look(write)?;
            }
        }
        // The writer runs at most a capacity ahead of this reader, unless it
        // evicted it meanwhile: then nothing read may be handed out.
        self.attached()?;
        Ok(Some((self.seen - self.read) as usize))
    }

    /// Takes `write`, a writer position read from the control page (memory
    /// another process may write anything to), as the one last seen, if a
    /// writer following the protocol can be there: not behind this reader,
    /// not more than a capacity ahead of it.
    fn look(&mut self, write: u64) -> Result<(), Error> {
        match write.checked_sub(self.read) {
            Some(ahead) if ahead <= self.map.capacity && write >= self.seen => {
                self.seen = write;
                Ok(())
            }
            _ => Err(self.bad_position(write)),
        }
    }

    #[inline]
    fn window(&self, n: usize) -> &[T] {
        let slot = self.map.slot(self.slot);
        // The eviction clock of a window runs from the first look at this
        // position (a later look does not put it back).
        if slot.window_at.load(Ordering::Relaxed) != self.read + 1 {
            slot.window_since.store(monotonic_ns(), Ordering::Relaxed);
            slot.window_at.store(self.read + 1, Ordering::Release);
        }
        let start = self.at as usize;
        // SAFETY: `start < capacity`, `n <= capacity` (never more than the
        // writer may run ahead) keep the slice in the double mapping; the
        // items are published (release store of the writer's position, read
        // with acquire) and the writer does not overwrite them before this
        // reader consumes them (its slot holds the writer back) unless the
        // reader is evicted, which `from_fd`'s contract covers.
        unsafe { self.map.slots.items(start, n) }
    }

    /// Waits until at least `threshold` items are readable and returns all
    /// that are; at the end of the stream returns what is left, and finally
    /// an empty slice. [`Error::WriterGone`] if the writer's process exits
    /// without closing the queue.
    #[inline]
    pub fn peek(&mut self, threshold: usize) -> Result<&[T], Error> {
        // The common case, enough already known to be readable, without a
        // call.
        let known = self.seen - self.read;
        if known >= threshold.max(1) as u64 && known <= self.map.capacity {
            self.attached()?;
            return Ok(self.window(known as usize));
        }
        let n = self.wait_readable(threshold)?;
        Ok(self.window(n))
    }

    /// Waits for `threshold` readable items (or the end); how many there are.
    #[cold]
    #[inline(never)]
    fn wait_readable(&mut self, threshold: usize) -> Result<usize, Error> {
        if let Some(n) = self.ready(threshold)? {
            return Ok(n);
        }
        let mut backoff = Backoff::new();
        let mut checked: Option<Instant> = None;
        let n = loop {
            if let Some(n) = self.ready(threshold)? {
                break n;
            }
            // The clock only once the wait is past spinning and yielding.
            if backoff.sleeping()
                && checked.get_or_insert_with(Instant::now).elapsed() >= Duration::from_millis(10)
            {
                checked = Some(Instant::now());
                if !process_exists(self.writer_pid) {
                    // A last look: it may have closed the queue as it exited.
                    if let Some(n) = self.ready(threshold)? {
                        break n;
                    }
                    return Err(Error::WriterGone {
                        pid: self.writer_pid,
                    });
                }
            }
            backoff.snooze();
        };
        Ok(n)
    }

    /// The readable items if at least `threshold` are (or the stream has
    /// ended); `None` otherwise. Never waits.
    pub fn try_peek(&mut self, threshold: usize) -> Result<Option<&[T]>, Error> {
        Ok(self.ready(threshold)?.map(|n| self.window(n)))
    }

    /// [`Error::Evicted`] if this reader was evicted since its last look:
    /// what its last window showed may have been overwritten. A reader that
    /// reads a window in place asks this after reading and before it acts
    /// on what it read (the check of a sequence lock).
    pub fn intact(&self) -> Result<(), Error> {
        self.attached()
    }

    /// [`Error::WriterGone`] if the writer's process has exited without
    /// closing the queue (for a caller that waits with
    /// [`try_peek`](Self::try_peek) on its own terms); [`Error::Evicted`] if
    /// this reader was evicted.
    pub fn check(&self) -> Result<(), Error> {
        self.attached()?;
        let closed = self.map.control().closed.load(Ordering::Acquire) == 1;
        if !closed && !process_exists(self.writer_pid) {
            return Err(Error::WriterGone {
                pid: self.writer_pid,
            });
        }
        Ok(())
    }

    /// Releases the first `m` readable items to the writer.
    #[inline]
    pub fn consume(&mut self, m: usize) -> Result<(), Error> {
        let available = (self.seen - self.read) as usize;
        if m > available {
            return Err(Error::ConsumeTooLarge {
                requested: m,
                available,
            });
        }
        self.read += m as u64;
        self.at = advance(self.at, m as u64, self.map.capacity);
        self.map
            .slot(self.slot)
            .read
            .store(self.read, Ordering::Release);
        self.attached()
    }
}

impl<T: Pod> Drop for ShmReader<T> {
    /// Frees the reader's slot: it no longer holds the writer back.
    fn drop(&mut self) {
        self.map
            .slot(self.slot)
            .state
            .store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader_of<T: Pod>(w: &ShmWriter<T>) -> Result<ShmReader<T>, Error> {
        let fd = w.fd().try_clone_to_owned().unwrap();
        // SAFETY: only `w` writes the object.
        unsafe { ShmReader::from_fd(fd) }
    }

    #[test]
    fn windows_wrap_through_the_mirror_between_two_ends() {
        let mut w = ShmWriter::<u32>::create(1024, &ShmConfig::default()).unwrap();
        let cap = w.capacity();
        let mut r = reader_of(&w).unwrap();
        assert_eq!(w.readers(), 1);
        let mut next = 0u32;
        let mut expect = 0u32;
        for _ in 0..10 {
            let n = cap * 3 / 4;
            let s = w.reserve(n).unwrap();
            for x in s.iter_mut() {
                *x = next;
                next += 1;
            }
            w.commit(n).unwrap();
            let got = r.peek(n).unwrap();
            assert_eq!(got.len(), n);
            assert!(got.iter().all(|&x| {
                let ok = x == expect;
                expect += 1;
                ok
            }));
            r.consume(n).unwrap();
        }
        drop(w);
        assert!(r.peek(1).unwrap().is_empty(), "the end of the stream");
    }

    #[test]
    fn a_stuck_reader_is_evicted_and_told_so() {
        let cfg = ShmConfig {
            evict_after: Duration::from_millis(30),
            ..ShmConfig::default()
        };
        let mut w = ShmWriter::<u8>::create(4096, &cfg).unwrap();
        let cap = w.capacity();
        let mut r = reader_of(&w).unwrap();
        // Fill the queue, then ask for more: the reader never moves.
        w.write(&vec![7u8; cap]).unwrap();
        let t0 = Instant::now();
        w.write(&[1u8; 100]).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(30));
        match w.take_events().as_slice() {
            [
                ReaderEvent::Evicted {
                    slot: 0,
                    position: 0,
                    reason: EvictReason::NoProgress(_),
                    ..
                },
            ] => {}
            e => panic!("{e:?}"),
        }
        assert_eq!(w.readers(), 0);
        assert!(matches!(r.peek(1), Err(Error::Evicted)));
        drop(r);
        // The slot is free again.
        let _r2 = reader_of(&w).unwrap();
        assert_eq!(w.readers(), 1);
    }

    #[test]
    fn the_layout_is_checked_before_anything_is_used() {
        let w = ShmWriter::<u32>::create(100, &ShmConfig::default()).unwrap();
        assert!(matches!(
            {
                let fd = w.fd().try_clone_to_owned().unwrap();
                // SAFETY: only `w` writes the object.
                unsafe { ShmReader::<u64>::from_fd(fd) }
            },
            Err(Error::ItemSize {
                expected: 8,
                found: 4
            })
        ));
        let f = mirror::create_object(None, 3 * rustix::param::page_size()).unwrap();
        // SAFETY: nothing writes this object.
        let e = unsafe { ShmReader::<u32>::from_fd(f) }.err().unwrap();
        assert!(e.to_string().contains("no dmaflow queue header"), "{e}");
    }

    #[test]
    fn a_path_taken_or_missing_is_named() {
        let path = std::env::temp_dir().join(format!("dmaflow-shm-{}-taken", std::process::id()));
        let cfg = ShmConfig {
            path: Some(path.clone()),
            ..ShmConfig::default()
        };
        let w = ShmWriter::<u8>::create(10, &cfg).unwrap();
        let e = ShmWriter::<u8>::create(10, &cfg).err().unwrap();
        assert!(matches!(e, Error::Open { .. }), "{e}");
        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
        drop(w);
        // SAFETY: nothing writes the (missing) object.
        let e = unsafe { ShmReader::<u8>::open(&path) }.err().unwrap();
        assert!(e.to_string().contains("cannot open"), "{e}");
    }

    #[test]
    fn readers_beyond_the_slots_are_refused() {
        let cfg = ShmConfig {
            max_readers: 2,
            ..ShmConfig::default()
        };
        let w = ShmWriter::<u16>::create(100, &cfg).unwrap();
        let (_a, _b) = (reader_of(&w).unwrap(), reader_of(&w).unwrap());
        assert!(matches!(
            reader_of(&w),
            Err(Error::NoReaderSlot { max_readers: 2 })
        ));
        assert!(matches!(
            ShmWriter::<u16>::create(
                100,
                &ShmConfig {
                    max_readers: 0,
                    ..ShmConfig::default()
                }
            ),
            Err(Error::BadReaders { .. })
        ));
    }

    #[test]
    fn a_reader_joining_late_starts_at_the_writer() {
        let mut w = ShmWriter::<u64>::create(512, &ShmConfig::default()).unwrap();
        // No reader: the writer runs on, nothing is kept.
        for k in 0..5u64 {
            w.write(&vec![k; w.capacity()]).unwrap();
        }
        let mut r = reader_of(&w).unwrap();
        assert_eq!(r.position(), w.position());
        w.write(&[42, 43]).unwrap();
        assert_eq!(r.peek(2).unwrap(), &[42, 43]);
    }

    /// A second look at the object, as another process of the same user has.
    fn peer_map(w: &ShmWriter<u32>) -> Mapped {
        let fd = w.fd();
        let header = control_len(w.map.max_readers);
        Mapped {
            page: Page::map(fd, header).unwrap(),
            slots: Mirror::of_object(fd, header as u64, w.capacity() * 4, 4).unwrap(),
            capacity: w.capacity() as u64,
            max_readers: w.map.max_readers,
        }
    }

    #[test]
    fn a_writer_running_on_while_a_reader_attaches_never_overruns_it() {
        let mut w = ShmWriter::<u32>::create(512, &ShmConfig::default()).unwrap();
        let cap = w.capacity();
        let map = peer_map(&w);
        let mut next = 0u32;
        let writer = &mut w;
        // Between the reader's first look at the writer and its slot being
        // marked attached, the writer (seeing no reader) runs six queues on.
        let mut r = ShmReader::<u32>::attach(map, std::process::id(), || {
            for _ in 0..6 {
                let items: Vec<u32> = (next..next + cap as u32).collect();
                writer.write(&items).unwrap();
                next += cap as u32;
            }
        })
        .unwrap();
        assert_eq!(r.position(), w.position(), "attached where the writer is");
        assert!(r.try_peek(1).unwrap().is_none(), "nothing published since");
        // From here the writer is held back by the reader, and every window
        // is within the queue and in order.
        let mut expect = next;
        for round in 0..8 {
            let items: Vec<u32> = (next..next + cap as u32 / 2).collect();
            w.write(&items).unwrap();
            next += items.len() as u32;
            let got = r.peek(1).unwrap();
            assert!(
                got.len() <= cap,
                "round {round}: {} items of {cap}",
                got.len()
            );
            for &x in got {
                assert_eq!(x, expect);
                expect += 1;
            }
            let n = got.len();
            r.consume(n).unwrap();
        }
    }

    #[test]
    fn a_control_page_written_by_a_peer_is_an_error_never_a_window() {
        let mut w = ShmWriter::<u32>::create(512, &ShmConfig::default()).unwrap();
        let cap = w.capacity() as u64;
        let mut r = reader_of(&w).unwrap();
        w.write(&[1, 2, 3]).unwrap();
        r.consume(0).unwrap();
        assert_eq!(r.peek(1).unwrap(), &[1, 2, 3]);
        r.consume(1).unwrap();
        let peer = peer_map(&w);
        let write = &peer.control().write;
        // Ahead of the reader by more than a capacity, behind it, and at the
        // end of the counter: each refused, the reader's view unchanged.
        for bogus in [1 + cap + 1, 3 * cap, 0, u64::MAX, 1 + cap * 1000] {
            write.store(bogus, Ordering::Release);
            match r.peek(3) {
                Err(Error::BadWriterPosition { write, read: 1, .. }) => assert_eq!(write, bogus),
                other => panic!("write position {bogus}: {other:?}"),
            }
            assert!(matches!(
                r.try_peek(3),
                Err(Error::BadWriterPosition { .. })
            ));
            // What was seen before stays the limit of what may be consumed.
            assert!(matches!(
                r.consume(cap as usize),
                Err(Error::ConsumeTooLarge { available: 2, .. })
            ));
        }
        // A writer position exactly a capacity ahead is possible: accepted.
        write.store(1 + cap, Ordering::Release);
        assert_eq!(r.peek(3).unwrap().len() as u64, cap);
    }

    #[test]
    fn a_passed_queue_object_cannot_be_truncated_by_a_peer() {
        let w = ShmWriter::<u32>::create(512, &ShmConfig::default()).unwrap();
        let fd = w.fd().try_clone_to_owned().unwrap();
        // What a peer that received the descriptor would try: refused (the
        // object is sealed), so no mapping of it can fault.
        let e = rustix::fs::ftruncate(&fd, 0).unwrap_err();
        assert_eq!(e, rustix::io::Errno::PERM);
        assert!(rustix::fs::ftruncate(&fd, 1 << 30).is_err());
        let mut r = reader_of(&w).unwrap();
        assert!(r.try_peek(1).unwrap().is_none());
    }

    #[test]
    fn a_reader_that_moves_back_and_forth_is_evicted() {
        let cfg = ShmConfig {
            evict_after: Duration::from_millis(50),
            ..ShmConfig::default()
        };
        let mut w = ShmWriter::<u32>::create(1024, &cfg).unwrap();
        let cap = w.capacity();
        let r = reader_of(&w).unwrap();
        let peer = peer_map(&w);
        w.write(&vec![1u32; cap]).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        // The reader's process moves its position 0 -> 1 -> 0 -> ... : never
        // far enough for the writer, always "moving".
        let toggler = std::thread::spawn(move || {
            let mut k = 0u64;
            while !s.load(Ordering::Relaxed) {
                peer.slot(0).read.store(k % 2, Ordering::Release);
                k += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let r = w.write(&[2u32; 100]);
            let events = w.take_events();
            let _ = tx.send((r.is_ok(), events));
        });
        let got = rx.recv_timeout(Duration::from_secs(10));
        stop.store(true, Ordering::Relaxed);
        toggler.join().unwrap();
        let (ok, events) =
            got.expect("the writer waited for ever on a reader that only moved back and forth");
        writer.join().unwrap();
        assert!(ok);
        assert!(
            matches!(
                events.as_slice(),
                [ReaderEvent::Evicted {
                    slot: 0,
                    reason: EvictReason::NoProgress(_),
                    ..
                }]
            ),
            "{events:?}"
        );
        drop(r);
    }

    #[test]
    fn a_window_is_the_readers_for_evict_after_from_the_peek_that_made_it() {
        let evict_after = Duration::from_millis(120);
        let cfg = ShmConfig {
            evict_after,
            ..ShmConfig::default()
        };
        let mut w = ShmWriter::<u32>::create(1024, &cfg).unwrap();
        let cap = w.capacity();
        let mut r = reader_of(&w).unwrap();
        w.write(&vec![5u32; cap]).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // The writer waits for room from now on.
        let writer = std::thread::spawn(move || {
            w.write(&[6u32; 10]).unwrap();
            let _ = tx.send((Instant::now(), w.take_events()));
        });
        // The reader holds still most of `evict_after`, then takes a window.
        std::thread::sleep(evict_after * 3 / 4);
        let peeked = Instant::now();
        assert_eq!(r.peek(cap).unwrap().len(), cap);
        let (evicted_at, events) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        writer.join().unwrap();
        assert!(
            matches!(events.as_slice(), [ReaderEvent::Evicted { .. }]),
            "{events:?}"
        );
        // A lower bound only: the window was the reader's for `evict_after`.
        assert!(
            evicted_at.duration_since(peeked) >= evict_after,
            "evicted {:?} after the peek",
            evicted_at.duration_since(peeked)
        );
        assert!(matches!(r.consume(cap), Err(Error::Evicted)));
    }

    /// The path another process of the user reaches the object by.
    fn proc_path(w: &ShmWriter<u32>) -> String {
        use std::os::fd::AsRawFd;
        format!("/proc/{}/fd/{}", std::process::id(), w.fd().as_raw_fd())
    }

    #[test]
    fn another_process_can_neither_truncate_the_object_nor_feed_the_reader_a_bad_position() {
        let mut w = ShmWriter::<u32>::create(512, &ShmConfig::default()).unwrap();
        let mut r = reader_of(&w).unwrap();
        w.write(&[1, 2, 3]).unwrap();
        assert_eq!(r.peek(1).unwrap(), &[1, 2, 3]);
        let path = proc_path(&w);
        // A child process truncates the object: refused (sealed), so no
        // mapping of it can fault.
        let out = std::process::Command::new("truncate")
            .args(["-s", "0", &path])
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "truncate succeeded on a sealed object"
        );
        assert_eq!(r.peek(1).unwrap(), &[1, 2, 3]);
        // A child process writes a writer position far ahead into the
        // control page: the reader refuses it, never hands out a window.
        let at = std::mem::offset_of!(Control, write);
        let bogus = (1u64 << 40).to_le_bytes();
        // Octal escapes: every `sh`'s printf reads them.
        let hex: String = bogus.iter().map(|b| format!("\\{b:03o}")).collect();
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("printf '{hex}' | dd of={path} bs=1 seek={at} conv=notrunc status=none"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        r.consume(3).unwrap();
        assert!(
            matches!(r.peek(1), Err(Error::BadWriterPosition { write, .. }) if write == 1 << 40)
        );
    }
}
