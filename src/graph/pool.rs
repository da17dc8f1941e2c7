//! The worker pool that runs task nodes ([`super::Graph::task`]): a few
//! worker threads (one per core by default), each polling the node futures
//! the runtime wakes. A task that waits on a queue leaves its waker with the
//! runtime and its worker goes on with another task, so a hand-over between
//! two task nodes costs a push onto a ready queue and a poll, not a context
//! switch. A task woken on a worker (by the task that worker polls: the
//! other side of a hand-over) is queued on that worker's own queue, so that
//! it runs where the data it is handed is in cache; a worker with nothing
//! of its own takes from the shared queue, then from the others' queues.

use std::cell::RefCell;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal, Stealer, Worker as Local};

use super::error::{Error, NodeResult};
use super::runtime::{
    Marks, Runtime, Side, as_node, drop_quietly, poll_node, take_yield, with_marks,
};

thread_local! {
    /// Whether this thread is a worker of a pool.
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The worker's own queue, with its pool (the address of the pool's
    /// [`Shared`], which the worker holds for as long as this is set).
    static LOCAL: RefCell<Option<(usize, Local<Arc<Task>>)>> = const { RefCell::new(None) };
}

/// Whether the calling thread is a worker running task nodes (where a
/// thread must never sleep on behalf of one task).
pub(super) fn on_worker() -> bool {
    WORKER.with(std::cell::Cell::get)
}

/// A task node's body.
pub(super) type NodeFuture = Pin<Box<dyn Future<Output = NodeResult> + Send>>;

/// [`Task::state`]: neither queued nor polled.
const IDLE: u8 = 0;
/// [`Task::state`]: on the ready queue.
const QUEUED: u8 = 1;
/// [`Task::state`]: being polled.
const POLLING: u8 = 2;
/// [`Task::state`]: being polled, and woken since the poll began (it is
/// queued again once the poll returns pending, never taken by a second worker).
const NOTIFIED: u8 = 3;
/// [`Task::state`]: its body has returned.
const ENDED: u8 = 4;

/// One task node.
struct Task {
    id: usize,
    /// Its index among the pool's tasks.
    index: usize,
    name: Arc<str>,
    /// The body until it has returned (then dropped, closing its ports).
    future: Mutex<Option<NodeFuture>>,
    /// [`IDLE`], [`QUEUED`], [`POLLING`], [`NOTIFIED`] or [`ENDED`].
    state: AtomicU8,
    pool: Arc<Shared>,
}

/// What the workers share.
struct Shared {
    /// Tasks woken off the pool's workers (the first wake of each, and wakes
    /// from thread nodes).
    injector: Injector<Arc<Task>>,
    /// Each worker's queue, to take from when a worker has nothing of its own.
    stealers: RwLock<Vec<Stealer<Arc<Task>>>>,
    /// Workers about to sleep or asleep (a push then notifies one).
    idle: AtomicUsize,
    /// The count of live tasks; the lock idle workers sleep under.
    queue: Mutex<Ready>,
    /// Signalled when a task is ready and a worker is idle, and when the last
    /// task has ended.
    cv: Condvar,
    /// Signalled when the last task has ended (for [`Pool::join`] and the
    /// watchdog, which must never take a wake meant for a worker).
    ended: Condvar,
    /// Each task's node id and name, by task index.
    names: Vec<(usize, Arc<str>)>,
    /// Whether each task has been counted out of [`Ready::live`] (it ended,
    /// or it held its worker past the limit and was given up).
    counted_out: Vec<AtomicBool>,
    /// Set once [`Ready::live`] has reached zero: an idle worker stops
    /// looking (a look gives its core up, which on a loaded machine can
    /// cost a scheduler tick) and leaves at once.
    all_ended: AtomicBool,
    /// Every worker started, with what the watchdog watches of it.
    workers: Mutex<Vec<(JoinHandle<()>, Arc<Slot>)>>,
    /// Port calls that did not wait a task may make in one poll before it
    /// yields its worker.
    budget: u32,
}

/// What the watchdog sees of one worker.
#[derive(Default)]
struct Slot {
    /// Polls begun and ended: odd while a poll runs; [`GIVEN_UP`] added by
    /// the watchdog to the count of the poll it gives the worker up in.
    polls: AtomicU64,
    /// The index of the task last polled.
    task: AtomicUsize,
    /// Given up: it held a task past the limit (never joined; it leaves the
    /// pool once that poll returns).
    held: AtomicBool,
    /// The async port calls its tasks reach, and the end of a slice.
    marks: Marks,
}

/// Marks a worker's count of polls: given up in the poll it counts.
const GIVEN_UP: u64 = 1 << 63;

struct Ready {
    /// Tasks not counted out yet.
    live: usize,
}

/// Locks ignoring poisoning: the pool's state is plain assignments, and a
/// panicking body is caught before it could leave any half-made.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads a lock ignoring poisoning, as [`lock`].
fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// This pool's identity in [`LOCAL`].
    fn id(&self) -> usize {
        self as *const Shared as usize
    }

    /// Queues `task`: on the calling worker's own queue if it is a worker of
    /// this pool, else on the shared one; an idle worker is notified.
    fn push(&self, task: Arc<Task>) {
        let task = LOCAL.with(|l| match &*l.borrow() {
            Some((pool, local)) if *pool == self.id() => {
                local.push(task);
                None
            }
            _ => Some(task),
        });
        if let Some(task) = task {
            self.injector.push(task);
        }
        // Pairs with the fence of a worker going to sleep: either it sees
        // the task, or this sees it idle (and notifies it under the lock it
        // sleeps under).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.idle.load(Ordering::SeqCst) > 0 {
            let _q = lock(&self.queue);
            self.cv.notify_one();
        }
    }

    /// A ready task for the calling worker: its own queue's first (unless
    /// `shared_first`), else some of the shared queue's, else one of
    /// another worker's.
    fn next_task(&self, shared_first: bool) -> Option<Arc<Task>> {
        LOCAL.with(|l| {
            let l = l.borrow();
            let local = l.as_ref().map(|(_, q)| q);
            if shared_first && let Steal::Success(t) = self.injector.steal() {
                return Some(t);
            }
            if let Some(t) = local.and_then(Local::pop) {
                return Some(t);
            }
            loop {
                let from_shared = match local {
                    Some(q) => self.injector.steal_batch_and_pop(q),
                    None => self.injector.steal(),
                };
                let mut retry = match from_shared {
                    Steal::Success(t) => return Some(t),
                    Steal::Retry => true,
                    Steal::Empty => false,
                };
                for s in read(&self.stealers).iter() {
                    match s.steal() {
                        Steal::Success(t) => return Some(t),
                        Steal::Retry => retry = true,
                        Steal::Empty => {}
                    }
                }
                if !retry {
                    return None;
                }
            }
        })
    }

    /// Whether any queue holds a task.
    fn any_ready(&self) -> bool {
        !self.injector.is_empty() || read(&self.stealers).iter().any(|s| !s.is_empty())
    }

    /// Counts task `index` out of the live ones, once.
    fn count_out(&self, index: usize) -> bool {
        if self.counted_out[index].swap(true, Ordering::AcqRel) {
            return false;
        }
        let mut q = lock(&self.queue);
        q.live -= 1;
        if q.live == 0 {
            self.all_ended.store(true, Ordering::Release);
            self.cv.notify_all();
            self.ended.notify_all();
        }
        true
    }
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => QUEUED,
                POLLING => NOTIFIED,
                _ => return,
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == QUEUED => return self.pool.push(self.clone()),
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }
}

/// The running pool: its workers and the watchdog, joined by [`Pool::join`].
pub(super) struct Pool {
    shared: Arc<Shared>,
    watchdog: Option<JoinHandle<()>>,
}

impl Pool {
    /// Waits until every task has ended (or been given up), then joins the
    /// workers, except those left to a task that held them.
    pub(super) fn join(mut self) {
        {
            let mut q = lock(&self.shared.queue);
            while q.live > 0 {
                q = self
                    .shared
                    .ended
                    .wait(q)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
        let workers = std::mem::take(&mut *lock(&self.shared.workers));
        for (handle, slot) in workers {
            if !slot.held.load(Ordering::Acquire) {
                let _ = handle.join();
            }
        }
    }
}

/// Starts a worker thread for `shared`'s tasks.
fn spawn_worker(rt: &Arc<Runtime>, shared: &Arc<Shared>, i: usize) -> std::io::Result<()> {
    let slot = Arc::new(Slot::default());
    let (rt, sh, sl) = (rt.clone(), shared.clone(), slot.clone());
    let handle = std::thread::Builder::new()
        .name(format!("dmaflow-worker-{i}"))
        .spawn(move || work(&rt, &sh, &sl))?;
    lock(&shared.workers).push((handle, slot));
    Ok(())
}

/// How the pool shares its workers between tasks.
#[derive(Clone, Copy)]
pub(super) struct Turns {
    /// Port calls that did not wait before a task yields its worker.
    pub(super) budget: u32,
    /// How long one poll may run before the task yields at its next port call.
    pub(super) slice: Duration,
    /// How long a task may go without reaching a port call or a yield.
    pub(super) hold_limit: Duration,
}

/// Starts `workers` worker threads (at least one) running `tasks` (node id,
/// name, body) to their ends, and a watchdog that ends each poll's slice
/// and stops the graph with [`Error::TaskHeldWorker`] when a task goes over
/// the hold limit without reaching a port call. Returns the pool to join,
/// or the error of the first worker that could not start (then none runs
/// and every body is dropped unpolled).
pub(super) fn start(
    rt: &Arc<Runtime>,
    tasks: Vec<(usize, Arc<str>, NodeFuture)>,
    workers: usize,
    turns: Turns,
) -> Result<Pool, std::io::Error> {
    let shared = Arc::new(Shared {
        injector: Injector::new(),
        stealers: RwLock::new(Vec::new()),
        idle: AtomicUsize::new(0),
        queue: Mutex::new(Ready { live: tasks.len() }),
        cv: Condvar::new(),
        ended: Condvar::new(),
        names: tasks.iter().map(|(id, n, _)| (*id, n.clone())).collect(),
        counted_out: tasks.iter().map(|_| AtomicBool::new(false)).collect(),
        all_ended: AtomicBool::new(tasks.is_empty()),
        workers: Mutex::new(Vec::new()),
        budget: turns.budget,
    });
    let all: Vec<Arc<Task>> = tasks
        .into_iter()
        .enumerate()
        .map(|(index, (id, name, f))| {
            Arc::new(Task {
                id,
                index,
                name,
                future: Mutex::new(Some(f)),
                state: AtomicU8::new(IDLE),
                pool: shared.clone(),
            })
        })
        .collect();
    for i in 0..workers.max(1) {
        match spawn_worker(rt, &shared, i) {
            Ok(()) => {}
            // Fewer workers than asked for still run every task.
            Err(_) if !lock(&shared.workers).is_empty() => break,
            Err(e) => {
                for t in &all {
                    drop(lock(&t.future).take());
                }
                return Err(e);
            }
        }
    }
    let watchdog = {
        let (rt, shared) = (rt.clone(), shared.clone());
        std::thread::Builder::new()
            .name("dmaflow-watchdog".into())
            .spawn(move || watch(&rt, &shared, turns))
            .ok()
    };
    for t in all {
        t.wake_by_ref();
    }
    Ok(Pool { shared, watchdog })
}

/// What the watchdog last saw of one worker.
struct Seen {
    /// Its count of polls, and when that count was first seen.
    polls: u64,
    poll_since: Instant,
    /// Its count of port calls, and when that count was first seen.
    calls: u64,
    calls_since: Instant,
}

/// The watchdog: looks at every worker a few times per slice and per hold
/// limit. A poll seen running for a slice or more is asked to yield at its
/// next port call; a worker seen in one poll with no port call reached for
/// the hold limit or more is given up (its task counted out, the graph
/// stopped with the task's name and what it last did, a new worker started
/// in its place).
fn watch(rt: &Arc<Runtime>, shared: &Arc<Shared>, turns: Turns) {
    let limit = turns.hold_limit;
    let period = (limit / 4)
        .min(turns.slice / 2)
        .clamp(Duration::from_millis(1), Duration::from_secs(1));
    let mut seen: Vec<Seen> = Vec::new();
    let mut started = lock(&shared.workers).len();
    loop {
        {
            let q = lock(&shared.queue);
            if q.live == 0 {
                return;
            }
            let (q, _) = shared
                .ended
                .wait_timeout(q, period)
                .unwrap_or_else(PoisonError::into_inner);
            if q.live == 0 {
                return;
            }
        }
        // Tasks that wait to read from one another are a deadlock whatever
        // the other nodes do (an endless source never lets a stall show).
        rt.check_read_cycles(&mut crate::sync::lock(&rt.sched));
        let slots: Vec<Arc<Slot>> = lock(&shared.workers)
            .iter()
            .map(|(_, s)| s.clone())
            .collect();
        let now = Instant::now();
        seen.resize_with(slots.len(), || Seen {
            polls: 0,
            poll_since: now,
            calls: 0,
            calls_since: now,
        });
        for (slot, seen) in slots.iter().zip(seen.iter_mut()) {
            if slot.held.load(Ordering::Acquire) {
                continue;
            }
            let polls = slot.polls.load(Ordering::Acquire);
            let calls = slot.marks.calls();
            if polls % 2 == 0 || polls != seen.polls {
                *seen = Seen {
                    polls,
                    poll_since: now,
                    calls,
                    calls_since: now,
                };
                continue;
            }
            if calls != seen.calls {
                seen.calls = calls;
                seen.calls_since = now;
            }
            if now.duration_since(seen.poll_since) >= turns.slice {
                slot.marks.end_slice();
            }
            // Given up only while still in that poll: the worker learns it
            // when the poll returns (see `work`).
            if now.duration_since(seen.calls_since) < limit
                || slot
                    .polls
                    .compare_exchange(polls, polls | GIVEN_UP, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
            {
                continue;
            }
            slot.held.store(true, Ordering::Release);
            let index = slot.task.load(Ordering::Acquire);
            let (_, name) = &shared.names[index];
            {
                let mut s = crate::sync::lock(&rt.sched);
                let last = match slot.marks.last() {
                    Some((edge, side)) => format!(
                        "last seen {} {}",
                        match side {
                            Side::Read => "reading",
                            Side::Write => "writing",
                        },
                        s.edges[edge].label
                    ),
                    None => "it reached no port call since it was last polled".to_string(),
                };
                let err = Error::TaskHeldWorker {
                    node: name.to_string(),
                    limit,
                    last,
                };
                rt.fail(&mut s, err);
            }
            shared.count_out(index);
            // The other tasks still need a worker to see the graph stop.
            if spawn_worker(rt, shared, started).is_ok() {
                started += 1;
            }
        }
    }
}

/// Times an idle worker looks for a ready task before it sleeps.
const IDLE_LOOKS: u32 = 32;

/// Every this many polls a worker looks at the shared queue before its own,
/// so that tasks woken from outside the pool run even while the workers'
/// own queues never empty (tasks that are always ready).
const SHARED_EVERY: u64 = 61;

/// One worker: polls ready tasks until every task has ended.
fn work(rt: &Runtime, shared: &Shared, slot: &Slot) {
    with_marks(&slot.marks, || work_marked(rt, shared, slot));
}

/// [`work`], with the worker's marks set for its port calls.
fn work_marked(rt: &Runtime, shared: &Shared, slot: &Slot) {
    WORKER.with(|w| w.set(true));
    let local = Local::new_fifo();
    lock_write(&shared.stealers).push(local.stealer());
    LOCAL.with(|l| *l.borrow_mut() = Some((shared.id(), local)));
    let mut polls = 0u64;
    // Whether the last poll yielded: the next task is then taken from the
    // shared queue first, so that the one that yielded goes behind every
    // other ready task, not only this worker's own.
    let mut yielded = false;
    loop {
        let mut looks = 0;
        let mut spin = crate::ring::Backoff::new();
        let task = loop {
            let shared_first = yielded || (polls / 2).is_multiple_of(SHARED_EVERY);
            if let Some(t) = shared.next_task(shared_first) {
                break t;
            }
            // A hand-over is usually microseconds away: look again, spinning
            // as long as a yield costs, then a few times giving the core up
            // in between, before sleeping.
            if spin.spin() {
                continue;
            }
            // Every task ended: no more looks, the worker leaves below.
            if looks < IDLE_LOOKS && !shared.all_ended.load(Ordering::Acquire) {
                looks += 1;
                std::thread::yield_now();
                continue;
            }
            let q = lock(&shared.queue);
            if q.live == 0 {
                // A wake after a task's end may have queued it again: let
                // go of it (the task holds the pool).
                if let Some((_, local)) = LOCAL.with(|l| l.borrow_mut().take()) {
                    while local.pop().is_some() {}
                }
                while !shared.injector.steal().is_empty() {}
                return;
            }
            shared.idle.fetch_add(1, Ordering::SeqCst);
            // Pairs with the fence of a push (see `Shared::push`).
            std::sync::atomic::fence(Ordering::SeqCst);
            if !shared.any_ready() {
                drop(shared.cv.wait(q).unwrap_or_else(PoisonError::into_inner));
            } else {
                drop(q);
            }
            shared.idle.fetch_sub(1, Ordering::SeqCst);
        };
        // Only the worker that took it from the queue polls it: a wake
        // during the poll marks it to be queued again after.
        task.state.store(POLLING, Ordering::Release);
        slot.task.store(task.index, Ordering::Release);
        polls += 1;
        slot.polls.store(polls, Ordering::Release);
        let ended = poll(rt, &task, shared.budget);
        yielded = take_yield();
        polls += 1;
        let given_up = slot.polls.swap(polls, Ordering::AcqRel) & GIVEN_UP != 0;
        match ended {
            Some(result) => {
                task.state.store(ENDED, Ordering::Release);
                rt.finish(task.id, &task.name, result);
                shared.count_out(task.index);
            }
            None if given_up => {
                // Counted out by the watchdog (the graph stops with its
                // error): never polled again. Its body is dropped here,
                // closing its ports, so that no later wake queues it.
                task.state.store(ENDED, Ordering::Release);
                drop_quietly(lock(&task.future).take());
            }
            None => {
                if task
                    .state
                    .compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // Woken during its poll.
                    task.state.store(QUEUED, Ordering::Release);
                    shared.push(task);
                }
            }
        }
        if given_up {
            // Another worker runs in this one's place: the tasks on its own
            // queue go to the shared one, and it leaves.
            if let Some((_, local)) = LOCAL.with(|l| l.borrow_mut().take()) {
                while let Some(t) = local.pop() {
                    shared.push(t);
                }
            }
            return;
        }
    }
}

/// Polls `task` once; `Some(result)` when its body has returned or panicked
/// (the body is then dropped, its ports closed, before the node is marked
/// done).
fn poll(rt: &Runtime, task: &Arc<Task>, budget: u32) -> Option<std::thread::Result<NodeResult>> {
    let mut slot = lock(&task.future);
    let fut = slot.as_mut()?;
    // The task's waker, borrowing the caller's count of the task (no
    // count taken and given back per poll; a clone the body keeps takes
    // its own).
    // SAFETY: the `Arc` made from `task`'s pointer is never dropped (the
    // waker holding it is `ManuallyDrop`), so it gives back no count it did
    // not take; `task` outlives the poll, so the pointer stays valid for
    // as long as the waker is lent.
    let waker =
        std::mem::ManuallyDrop::new(Waker::from(unsafe { Arc::from_raw(Arc::as_ptr(task)) }));
    let mut cx = Context::from_waker(&waker);
    let polled = catch_unwind(AssertUnwindSafe(|| {
        as_node(rt, task.id, || {
            poll_node(fut.as_mut(), &mut cx, budget, Some(rt))
        })
    }));
    let result = match polled {
        Ok(Poll::Pending) => return None,
        Ok(Poll::Ready(r)) => Ok(r),
        Err(panic) => Err(panic),
    };
    let body = slot.take();
    drop(slot);
    // A port's drop does not panic; a body's own captures might.
    let dropped = catch_unwind(AssertUnwindSafe(move || drop(body)));
    Some(match (result, dropped) {
        (Ok(r), Ok(())) => Ok(r),
        (Err(p), Ok(())) => Err(p),
        (Ok(r), Err(p)) => {
            drop_quietly(r);
            Err(p)
        }
        (Err(p), Err(again)) => {
            drop_quietly(again);
            Err(p)
        }
    })
}

/// Write-locks ignoring poisoning, as [`lock`].
fn lock_write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(PoisonError::into_inner)
}
