//! The cursor protocol of a single-writer, multi-reader queue, independent of where
//! the slots live (a mirrored mapping in [`super`], `loom` cells in the model test).
//!
//! Positions are monotonic `u64` item counts, so all `capacity` slots are usable:
//! the writer may run up to `capacity` items ahead of the slowest reader. The writer
//! publishes with a release store of `write`; each reader publishes what it has
//! consumed with a release store of its own `read`. A dropped reader parks its cursor
//! at `u64::MAX` so that it never holds the writer back.

use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;

use super::barrier::Barrier;
use super::spin::{Backoff, SleepBudget};
use super::{Error, Wait};
use crate::sync::{
    Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, lock, wait, yield_now,
};

/// Where threads of one side sleep in [`Wait::Block`] mode, and where tasks
/// waiting on a readiness future leave their wakers.
///
/// Each waiter says which position of the other side's cursor it waits for
/// (the writer's for a reader, the slowest reader's for the writer), and
/// [`wanted`](Self::wanted) keeps the lowest of them. The other side, after
/// publishing position `p`, wakes anyone only when `p` reaches it
/// ([`notify_at`](Self::notify_at)): a publish that no waiter needs costs a
/// barrier ([`Barrier::light`]: a compiler barrier where the kernel offers
/// `membarrier`) and one load of a line the waiters rarely write, never a lock or a
/// system call, and a sleeper is woken once, by the publish that crosses its
/// threshold, not by every publish while it falls asleep.
struct Event {
    /// The lowest cursor position a sleeping thread or a registered task
    /// waits for; `u64::MAX` when none waits. Written under `lock` only;
    /// never above what a waiter registered under `lock` still waits for.
    wanted: AtomicU64,
    lock: Mutex<Waiters>,
    cv: Condvar,
    /// The barriers between a publish and a waiter's threshold.
    barrier: Barrier,
}

/// Who waits on an [`Event`] (guarded by its lock).
#[derive(Default)]
struct Waiters {
    /// Threads inside [`Event::sleep`].
    sleeping: usize,
    /// Tasks to wake at the next wake-up.
    wakers: Vec<Waker>,
    /// Wake-ups so far: a sleeper that looked at the cursor with the lock
    /// released sleeps only if none came meanwhile.
    wakes: u64,
}

impl Event {
    /// No waiter yet.
    fn new(barrier: Barrier) -> Self {
        Event {
            wanted: AtomicU64::new(u64::MAX),
            lock: Mutex::new(Waiters::default()),
            cv: Condvar::new(),
            barrier,
        }
    }

    /// Wakes every waiter if one waits for `position` or less. Call after
    /// publishing that the cursor reached `position`.
    #[inline]
    fn notify_at(&self, position: u64) {
        // Pairs with the heavy barrier in `sleep` and `register`: either we
        // see the waiter's threshold, or the waiter's re-check sees our
        // published cursor (no lost wake-up).
        self.barrier.light();
        if self.wanted.load(Ordering::Relaxed) <= position {
            self.wake();
        }
    }

    /// Wakes every waiter, whatever it waits for (the other side is gone).
    fn notify_all(&self) {
        self.barrier.light();
        if self.wanted.load(Ordering::Relaxed) != u64::MAX {
            self.wake();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake(&self) {
        let mut g = lock(&self.lock);
        // Every waiter re-checks once woken, and one still waiting lowers
        // `wanted` again (under the lock) before it sleeps.
        self.wanted.store(u64::MAX, Ordering::Relaxed);
        g.wakes = g.wakes.wrapping_add(1);
        let wakers = std::mem::take(&mut g.wakers);
        let sleeping = g.sleeping != 0;
        drop(g);
        if sleeping {
            self.cv.notify_all();
        }
        for w in wakers {
            w.wake();
        }
    }

    /// Lowers `wanted` to `position` (the caller holds the lock).
    fn want(&self, position: u64) {
        if position < self.wanted.load(Ordering::Relaxed) {
            self.wanted.store(position, Ordering::Relaxed);
        }
    }

    /// Leaves `waker` to be woken once the cursor reaches `position`. The
    /// caller re-checks its condition afterwards (a change published before
    /// the registration is seen by that check).
    fn register(&self, waker: &Waker, position: u64) {
        let mut g = lock(&self.lock);
        if !g.wakers.iter().any(|w| w.will_wake(waker)) {
            g.wakers.push(waker.clone());
        }
        self.want(position);
        drop(g);
        self.barrier.heavy();
    }

    /// Blocks until `ready()` holds, costing no CPU while asleep; woken once
    /// the cursor reaches `position` (or by [`notify_all`](Self::notify_all)).
    ///
    /// The heavy barrier (a `membarrier` system call, which interrupts every
    /// core running this process) and the look at the cursor run with the
    /// lock released, so that the other side's wake-up, which takes the
    /// lock, never waits for them; a wake-up that came meanwhile (counted in
    /// [`Waiters::wakes`]) sends the sleeper back to look again instead of
    /// to sleep.
    fn sleep(&self, position: u64, mut ready: impl FnMut() -> bool) {
        let mut g = lock(&self.lock);
        g.sleeping += 1;
        loop {
            self.want(position);
            let wakes = g.wakes;
            drop(g);
            self.barrier.heavy();
            let done = ready();
            g = lock(&self.lock);
            if done {
                break;
            }
            if g.wakes == wakes {
                g = wait(&self.cv, g);
            }
        }
        g.sleeping -= 1;
        if g.sleeping == 0 && g.wakers.is_empty() {
            // Nobody is left to wait: publishes need not look further.
            self.wanted.store(u64::MAX, Ordering::Relaxed);
        }
    }
}

/// Waits until `ready()` holds, in the manner `mode` says. A `Yield` or
/// `Block` waiter first spins for as long as a `sched_yield` costs
/// ([`Backoff`], calibrated on this machine), looking in steps of 1, 2, 4 ...
/// pause instructions so that it does not keep stealing the other side's
/// cache line while it is being written; then a `Yield` waiter yields
/// between looks for ever, a `Block` waiter until as long as a sleep and
/// wake-up cost has passed. A `Spin` waiter looks every few pauses for ever.
///
/// A `Block` waiter sleeps until the other side's cursor reaches `position`.
///
/// `budget` holds how long this side keeps its core before sleeping, learned
/// from its earlier waits, and learns from this one ([`SleepBudget`]).
fn wait_until(
    mode: Wait,
    event: &Event,
    position: u64,
    budget: &mut SleepBudget,
    mut ready: impl FnMut() -> bool,
) {
    if ready() {
        return;
    }
    if mode == Wait::Block {
        let mut backoff = Backoff::before_sleep_within(budget);
        let slept = loop {
            if !backoff.snooze_before_sleep() {
                event.sleep(position, &mut ready);
                break true;
            }
            if ready() {
                break false;
            }
        };
        // The backoff's clock starts after its first short steps: a wait
        // that ended in them reads no clock at all and teaches what a wait
        // of no time teaches (the budget shrinks towards the floor).
        budget.learn(backoff.waited(), slept);
        return;
    }
    let mut backoff = Backoff::new();
    loop {
        match mode {
            Wait::Spin => backoff.spin_forever(),
            _ if !backoff.spin() => {
                while !ready() {
                    yield_now();
                }
                return;
            }
            _ => {}
        }
        if ready() {
            return;
        }
    }
}

/// The memory the slots live in, and how many there are; replaced when the writer
/// grows the queue.
struct Layout<L> {
    memory: L,
    capacity: u64,
    epoch: u64,
}

/// State shared by the writer and every reader.
struct Shared<L> {
    write: CachePadded<AtomicU64>,
    /// Bumped (under `layout`'s lock) each time the queue grows.
    epoch: CachePadded<AtomicU64>,
    layout: Mutex<Layout<L>>,
    writer_closed: AtomicBool,
    live_readers: AtomicUsize,
    /// Readers sleep here waiting for data.
    data: Event,
    /// The writer sleeps here waiting for space.
    space: Event,
    wait: Wait,
}

/// One reader's published position.
struct ReadCursor {
    read: CachePadded<AtomicU64>,
}

/// The writer's end of the protocol.
pub(crate) struct WriteSide<L> {
    shared: Arc<Shared<L>>,
    readers: Vec<Arc<ReadCursor>>,
    memory: L,
    capacity: u64,
    /// Next position to publish (everything before it is committed).
    write: u64,
    /// Slowest reader's position as last seen.
    min_read: u64,
    /// `write % capacity`, kept incrementally.
    slot: u64,
    /// Whether readers may sleep waiting for data (`Wait::Block`): a
    /// publish then wakes them. Kept here, not read from the shared state
    /// on each publish.
    notify: bool,
    /// How long this side keeps its core before a `Block` sleep.
    budget: SleepBudget,
}

/// A reader's end of the protocol.
pub(crate) struct ReadSide<L> {
    shared: Arc<Shared<L>>,
    cursor: Arc<ReadCursor>,
    /// Next position to consume.
    read: u64,
    /// What the reader has seen of the writer and the layout.
    view: View<L>,
    /// Whether the writer may sleep waiting for space (`Wait::Block`): a
    /// release then wakes it.
    notify: bool,
    /// How long this side keeps its core before a `Block` sleep.
    budget: SleepBudget,
}

/// A reader's view of the queue: the layout and the writer's position as last
/// seen. Kept apart from the shared state so that a wait can refresh it while
/// holding a plain reference to that state (no reference count touched).
struct View<L> {
    memory: L,
    epoch: u64,
    capacity: u64,
    /// Writer's position as last seen.
    write: u64,
    /// `read % capacity`, kept incrementally.
    slot: u64,
}

impl<L: Clone> View<L> {
    /// Looks at the writer's cursor (and follows the queue to new memory if it
    /// grew); returns the items readable from `read`.
    fn refresh(&mut self, shared: &Shared<L>, read: u64) -> u64 {
        self.write = shared.write.load(Ordering::Acquire);
        if shared.epoch.load(Ordering::Relaxed) != self.epoch {
            self.switch_layout(shared, read);
        }
        self.write - read
    }

    /// Follows the writer to the queue's new memory.
    #[cold]
    fn switch_layout(&mut self, shared: &Shared<L>, read: u64) {
        let layout = lock(&shared.layout);
        self.memory = layout.memory.clone();
        self.capacity = layout.capacity;
        self.epoch = layout.epoch;
        self.slot = read % self.capacity;
    }
}

/// A new queue of `capacity` slots with one reader.
pub(crate) fn pair<L: Clone>(
    memory: L,
    capacity: usize,
    wait: Wait,
) -> (WriteSide<L>, ReadSide<L>) {
    // Chosen (and registered with the kernel) before either side exists.
    let barrier = Barrier::of_process();
    let shared = Arc::new(Shared {
        write: CachePadded::new(AtomicU64::new(0)),
        epoch: CachePadded::new(AtomicU64::new(0)),
        layout: Mutex::new(Layout {
            memory: memory.clone(),
            capacity: capacity as u64,
            epoch: 0,
        }),
        writer_closed: AtomicBool::new(false),
        live_readers: AtomicUsize::new(0),
        data: Event::new(barrier),
        space: Event::new(barrier),
        wait,
    });
    let mut w = WriteSide {
        shared,
        readers: Vec::new(),
        memory,
        capacity: capacity as u64,
        write: 0,
        min_read: 0,
        slot: 0,
        notify: wait == Wait::Block,
        budget: SleepBudget::new(),
    };
    let r = w.add_reader();
    (w, r)
}

/// `(slot + k) % capacity` for `slot < capacity` and `k <= capacity`.
fn advance(slot: u64, k: u64, capacity: u64) -> u64 {
    let s = slot + k;
    if s >= capacity { s - capacity } else { s }
}

/// Slowest live reader's position, pruning dropped readers; `None` when none is live.
fn slowest(readers: &mut Vec<Arc<ReadCursor>>) -> Option<u64> {
    let mut min = u64::MAX;
    readers.retain(|c| {
        let r = c.read.load(Ordering::Acquire);
        min = min.min(r);
        r != u64::MAX
    });
    (min != u64::MAX).then_some(min)
}

impl<L: Clone> WriteSide<L> {
    /// Slots the writer may fill now (as last seen).
    fn free(&self) -> u64 {
        self.capacity - (self.write - self.min_read)
    }

    /// Slot index of the next position to write.
    pub(crate) fn slot(&self) -> usize {
        self.slot as usize
    }

    /// Slots the writer may fill now as last seen (never more than are free).
    pub(crate) fn known_free(&self) -> u64 {
        self.free()
    }

    /// Capacity in items.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Makes sure `n` slots are free, waiting for readers if `block`. Returns
    /// `Ok(false)` when not blocking and the space is not there.
    #[inline]
    pub(crate) fn wait_free(&mut self, n: usize, block: bool) -> Result<bool, Error> {
        // The common case, space already known to be free (which also means
        // `n` is within the capacity), without a call.
        if n as u64 <= self.free() {
            return Ok(true);
        }
        self.wait_free_slow(n, block)
    }

    #[cold]
    #[inline(never)]
    fn wait_free_slow(&mut self, n: usize, block: bool) -> Result<bool, Error> {
        if n as u64 > self.capacity {
            return Err(Error::ReserveTooLarge {
                requested: n,
                capacity: self.capacity as usize,
            });
        }
        let n = n as u64;
        if self.free() >= n {
            return Ok(true);
        }
        let shared = &*self.shared;
        let (readers, min_read, write, capacity) = (
            &mut self.readers,
            &mut self.min_read,
            self.write,
            self.capacity,
        );
        let mut closed = false;
        let mut ready = || match slowest(readers) {
            Some(m) => {
                *min_read = m;
                capacity - (write - m) >= n
            }
            None => {
                closed = true;
                true
            }
        };
        if !ready() {
            if !block {
                return Ok(false);
            }
            // The slowest reader must reach this position for `n` slots to be free.
            let needed = (write + n).saturating_sub(capacity);
            wait_until(
                shared.wait,
                &shared.space,
                needed,
                &mut self.budget,
                &mut ready,
            );
        }
        if closed {
            return Err(Error::Closed);
        }
        Ok(true)
    }

    /// A readiness poll: ready once `n` slots are free (or every reader is
    /// gone: then the error), else the task's waker is left with the readers,
    /// who wake it when they release slots ([`Wait::Block`] queues; a queue
    /// of another mode asks to be polled again at once).
    pub(crate) fn poll_free(&mut self, n: usize, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        for attempt in 0..2 {
            match self.wait_free(n, false) {
                Ok(true) => return Poll::Ready(Ok(())),
                Err(e) => return Poll::Ready(Err(e)),
                Ok(false) if attempt == 0 => {
                    if self.shared.wait != Wait::Block {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    let needed = (self.write + n as u64).saturating_sub(self.capacity);
                    self.shared.space.register(cx.waker(), needed);
                }
                Ok(false) => {}
            }
        }
        Poll::Pending
    }

    /// Publishes `k` items written after the current position.
    #[inline]
    pub(crate) fn publish(&mut self, k: usize) {
        debug_assert!(k as u64 <= self.free());
        self.write += k as u64;
        self.slot = advance(self.slot, k as u64, self.capacity);
        self.shared.write.store(self.write, Ordering::Release);
        if self.notify {
            self.shared.data.notify_at(self.write);
        }
    }

    /// A new reader that will see every item published from now on.
    pub(crate) fn add_reader(&mut self) -> ReadSide<L> {
        let cursor = Arc::new(ReadCursor {
            read: CachePadded::new(AtomicU64::new(self.write)),
        });
        self.shared.live_readers.fetch_add(1, Ordering::Relaxed);
        if self.readers.is_empty() {
            self.min_read = self.write;
        }
        self.readers.push(cursor.clone());
        ReadSide {
            shared: self.shared.clone(),
            cursor,
            read: self.write,
            view: View {
                memory: self.memory.clone(),
                epoch: self.shared.epoch.load(Ordering::Relaxed),
                capacity: self.capacity,
                write: self.write,
                slot: self.slot,
            },
            notify: self.notify,
            budget: SleepBudget::new(),
        }
    }

    /// The memory the slots live in now.
    pub(crate) fn memory(&self) -> &L {
        &self.memory
    }

    /// Items published so far.
    pub(crate) fn position(&self) -> u64 {
        self.write
    }

    /// Position of the slowest live reader (the write position if none is live):
    /// everything from there to the write position may still be read.
    pub(crate) fn oldest_unread(&mut self) -> u64 {
        if let Some(m) = slowest(&mut self.readers) {
            self.min_read = m;
        }
        self.min_read.min(self.write)
    }

    /// Moves the queue to new memory of `capacity` slots. The caller has already
    /// copied every unread (and reserved) item to its slot in the new memory.
    pub(crate) fn relayout(&mut self, memory: L, capacity: usize) {
        let capacity = capacity as u64;
        let mut layout = lock(&self.shared.layout);
        layout.memory = memory.clone();
        layout.capacity = capacity;
        layout.epoch += 1;
        // Readers check the epoch after acquiring the write cursor, so they switch
        // before they read any item published from now on.
        self.shared.epoch.store(layout.epoch, Ordering::Release);
        drop(layout);
        self.memory = memory;
        self.capacity = capacity;
        self.slot = self.write % capacity;
    }

    /// Whether every reader has been dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.live_readers.load(Ordering::Acquire) == 0
    }
}

impl<L> Drop for WriteSide<L> {
    fn drop(&mut self) {
        self.shared.writer_closed.store(true, Ordering::Release);
        self.shared.data.notify_all();
    }
}

impl<L: Clone> ReadSide<L> {
    /// Items readable as last seen.
    pub(crate) fn available(&self) -> usize {
        (self.view.write - self.read) as usize
    }

    /// Slot index of the next position to read.
    pub(crate) fn slot(&self) -> usize {
        self.view.slot as usize
    }

    /// Capacity in items.
    pub(crate) fn capacity(&self) -> usize {
        self.view.capacity as usize
    }

    /// The memory the slots live in, as this reader sees it.
    pub(crate) fn memory(&self) -> &L {
        &self.view.memory
    }

    /// Items consumed so far.
    pub(crate) fn position(&self) -> u64 {
        self.read
    }

    fn refresh(&mut self) -> u64 {
        let ReadSide {
            shared, view, read, ..
        } = self;
        view.refresh(shared, *read)
    }

    /// Waits (if `block`) until `threshold` items are readable or the writer is gone,
    /// and returns how many are readable; `Ok(None)` when not blocking and neither
    /// holds yet.
    #[inline]
    pub(crate) fn wait_available(
        &mut self,
        threshold: usize,
        block: bool,
    ) -> Result<Option<usize>, Error> {
        // Enough already known to be readable (which also means the threshold
        // is within the capacity): no need to touch the writer's cache line,
        // nor to make a call.
        let known = self.view.write - self.read;
        if known >= (threshold as u64).max(1) {
            return Ok(Some(known as usize));
        }
        self.wait_available_slow(threshold, block)
    }

    #[cold]
    #[inline(never)]
    fn wait_available_slow(
        &mut self,
        threshold: usize,
        block: bool,
    ) -> Result<Option<usize>, Error> {
        if threshold as u64 > self.view.capacity {
            // The writer may have grown the queue since we last looked.
            self.refresh();
            if threshold as u64 > self.view.capacity {
                return Err(Error::ThresholdTooLarge {
                    threshold,
                    capacity: self.view.capacity as usize,
                });
            }
        }
        let t = threshold as u64;
        // Enough already known to be readable: no need to touch the writer's cache
        // line. (An empty answer is only ever given after a fresh look.)
        let known = self.view.write - self.read;
        if known >= t.max(1) {
            return Ok(Some(known as usize));
        }
        if self.refresh() >= t {
            return Ok(Some(self.available()));
        }
        let ReadSide {
            shared, view, read, ..
        } = self;
        let (shared, read): (&Shared<L>, u64) = (shared, *read);
        let mut ready = || {
            // Read `closed` first: once it is set, the write cursor is final.
            let closed = shared.writer_closed.load(Ordering::Acquire);
            view.refresh(shared, read) >= t || closed
        };
        if !ready() {
            if !block {
                return Ok(None);
            }
            wait_until(
                shared.wait,
                &shared.data,
                read + t,
                &mut self.budget,
                &mut ready,
            );
        }
        Ok(Some(self.available()))
    }

    /// A readiness poll: ready with the readable count once `threshold` items
    /// are readable (or the writer is gone), else the task's waker is left with
    /// the writer, who wakes it when it publishes ([`Wait::Block`] queues; a
    /// queue of another mode asks to be polled again at once).
    pub(crate) fn poll_available(
        &mut self,
        threshold: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<usize, Error>> {
        for attempt in 0..2 {
            match self.wait_available(threshold, false) {
                Ok(Some(n)) => return Poll::Ready(Ok(n)),
                Err(e) => return Poll::Ready(Err(e)),
                Ok(None) if attempt == 0 => {
                    if self.shared.wait != Wait::Block {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    let needed = self.read + (threshold as u64).max(1);
                    self.shared.data.register(cx.waker(), needed);
                }
                Ok(None) => {}
            }
        }
        Poll::Pending
    }

    /// Releases `m` items to the writer.
    #[inline]
    pub(crate) fn release(&mut self, m: usize) -> Result<(), Error> {
        if m > self.available() && m as u64 > self.refresh() {
            return Err(Error::ConsumeTooLarge {
                requested: m,
                available: self.available(),
            });
        }
        self.read += m as u64;
        self.view.slot = advance(self.view.slot, m as u64, self.view.capacity);
        self.cursor.read.store(self.read, Ordering::Release);
        if self.notify {
            self.shared.space.notify_at(self.read);
        }
        Ok(())
    }

    /// Whether the writer is gone (more items may still be readable).
    pub(crate) fn writer_closed(&self) -> bool {
        self.shared.writer_closed.load(Ordering::Acquire)
    }
}

impl<L> Drop for ReadSide<L> {
    fn drop(&mut self) {
        self.cursor.read.store(u64::MAX, Ordering::Release);
        self.shared.live_readers.fetch_sub(1, Ordering::Release);
        self.shared.space.notify_all();
    }
}

#[cfg(all(test, dmaflow_loom))]
mod loom_tests {
    //! Exhaustive interleavings of the cursor protocol. The slots are `loom` cells,
    //! so a writer and a reader touching one slot at once is reported as a race.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::thread;

    struct Slots(Vec<UnsafeCell<u32>>);
    // SAFETY: access is arbitrated by the protocol under test; loom checks it.
    unsafe impl Sync for Slots {}
    // SAFETY: as above.
    unsafe impl Send for Slots {}

    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.check(f);
    }

    fn transfer(mode: Wait, capacity: usize, items: u32) {
        transfer_in_batches(mode, capacity, items, 1);
    }

    /// The writer publishes one item at a time; the reader waits for
    /// `threshold` items (fewer only once the writer is gone) and takes all
    /// it finds.
    fn transfer_in_batches(mode: Wait, capacity: usize, items: u32, threshold: usize) {
        model(move || {
            let slots = Arc::new(Slots((0..capacity).map(|_| UnsafeCell::new(0)).collect()));
            let (mut w, mut r) = pair((), capacity, mode);
            let ws = slots.clone();
            let producer = thread::spawn(move || {
                for i in 0..items {
                    assert!(w.wait_free(1, true).unwrap());
                    // SAFETY: the slot is free per the protocol (loom verifies).
                    ws.0[w.slot()].with_mut(|p| unsafe { *p = i + 1 });
                    w.publish(1);
                }
            });
            let mut seen = Vec::new();
            loop {
                let n = r.wait_available(threshold, true).unwrap().unwrap();
                if n == 0 {
                    assert!(r.writer_closed());
                    break;
                }
                assert!(n >= threshold || r.writer_closed(), "woken early: {n}");
                for _ in 0..n {
                    // SAFETY: the slot is published per the protocol (loom verifies).
                    seen.push(slots.0[r.slot()].with(|p| unsafe { *p }));
                    r.release(1).unwrap();
                }
            }
            producer.join().unwrap();
            assert_eq!(seen, (1..=items).collect::<Vec<_>>());
        });
    }

    #[test]
    fn loom_block_reader_is_woken_by_the_publish_that_reaches_its_threshold() {
        // The first publish is below the sleeping reader's threshold and
        // wakes nobody; the second must.
        transfer_in_batches(Wait::Block, 2, 2, 2);
    }

    #[test]
    fn loom_block_writer_waits_for_the_slowest_of_two_readers() {
        // Both readers may sleep (different positions), and so may the
        // writer: it waits for the slowest reader's cursor, which either
        // reader's release may be the one to move.
        model(|| {
            let (mut w, r1) = pair((), 1, Wait::Block);
            let r2 = w.add_reader();
            let readers: Vec<_> = [r1, r2]
                .into_iter()
                .map(|mut r| {
                    thread::spawn(move || {
                        let mut got = 0;
                        while r.wait_available(1, true).unwrap().unwrap() > 0 {
                            r.release(1).unwrap();
                            got += 1;
                        }
                        got
                    })
                })
                .collect();
            for _ in 0..2 {
                assert!(w.wait_free(1, true).unwrap());
                w.publish(1);
            }
            drop(w);
            for r in readers {
                assert_eq!(r.join().unwrap(), 2);
            }
        });
    }

    #[test]
    fn loom_one_publish_wakes_two_sleepers_looking_without_the_lock() {
        // Both readers wait for the same position on one event; each looks
        // at the cursor with the event's lock released before it sleeps, so
        // the one wake-up may come while either of them looks, or between
        // one's look and its sleep: neither may miss it.
        model(|| {
            let (mut w, r1) = pair((), 1, Wait::Block);
            let r2 = w.add_reader();
            let readers: Vec<_> = [r1, r2]
                .into_iter()
                .map(|mut r| thread::spawn(move || r.wait_available(1, true).unwrap().unwrap()))
                .collect();
            w.publish(1);
            for r in readers {
                assert_eq!(r.join().unwrap(), 1);
            }
        });
    }

    #[test]
    fn loom_block_mode_loses_no_item_and_no_wakeup() {
        transfer(Wait::Block, 1, 2);
    }

    #[test]
    fn loom_block_mode_wraps() {
        transfer(Wait::Block, 2, 3);
    }

    #[test]
    fn loom_spin_mode_wraps() {
        transfer(Wait::Spin, 2, 3);
    }

    #[test]
    fn loom_reader_drop_closes_the_writer() {
        model(|| {
            let (mut w, r) = pair((), 1, Wait::Block);
            let t = thread::spawn(move || drop(r));
            w.publish(1);
            // The queue is full; the only reader goes away: Closed, never a hang.
            assert!(matches!(w.wait_free(1, true), Err(Error::Closed)));
            t.join().unwrap();
        });
    }
}
