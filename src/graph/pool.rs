//! The worker pool that runs task nodes ([`super::Graph::task`]): a few
//! worker threads (one per core by default), each polling the node futures
//! the runtime wakes. A task that waits on a queue leaves its waker with the
//! runtime and its worker goes on with another task, so a hand-over between
//! two task nodes costs a push onto the ready queue and a poll, not a
//! context switch.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;

use super::NodeResult;
use super::runtime::Runtime;

thread_local! {
    /// Whether this thread is a worker of a pool.
    static WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a worker running task nodes (where a
/// thread must never sleep on behalf of one task).
pub(super) fn on_worker() -> bool {
    WORKER.with(std::cell::Cell::get)
}

/// A task node's body.
pub(super) type NodeFuture = Pin<Box<dyn Future<Output = NodeResult> + Send>>;

/// One task node.
struct Task {
    id: usize,
    name: Arc<str>,
    /// The body until it has returned (then dropped, closing its ports).
    future: Mutex<Option<NodeFuture>>,
    /// On the ready queue (or about to be): a wake then adds nothing.
    queued: AtomicBool,
    pool: Arc<Shared>,
}

/// What the workers share.
struct Shared {
    queue: Mutex<Ready>,
    /// Signalled when a task is ready and a worker is idle, and when the last
    /// task has ended.
    cv: Condvar,
}

struct Ready {
    tasks: VecDeque<Arc<Task>>,
    /// Tasks that have not ended.
    live: usize,
    /// Workers waiting for a task.
    idle: usize,
}

/// Locks ignoring poisoning: the pool's state is plain assignments, and a
/// panicking body is caught before it could leave any half-made.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn push(&self, task: Arc<Task>) {
        let mut q = lock(&self.queue);
        q.tasks.push_back(task);
        if q.idle > 0 {
            self.cv.notify_one();
        }
    }
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.pool.push(self.clone());
        }
    }
}

/// Starts `workers` worker threads (at least one) running `tasks` (node id,
/// name, body) to their ends. Returns the workers to join, or the error of
/// the first worker that could not start (then none runs and every body is
/// dropped unpolled).
pub(super) fn start(
    rt: &Arc<Runtime>,
    tasks: Vec<(usize, Arc<str>, NodeFuture)>,
    workers: usize,
) -> Result<Vec<JoinHandle<()>>, std::io::Error> {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Ready {
            tasks: VecDeque::new(),
            live: tasks.len(),
            idle: 0,
        }),
        cv: Condvar::new(),
    });
    let all: Vec<Arc<Task>> = tasks
        .into_iter()
        .map(|(id, name, f)| {
            Arc::new(Task {
                id,
                name,
                future: Mutex::new(Some(f)),
                queued: AtomicBool::new(false),
                pool: shared.clone(),
            })
        })
        .collect();
    let mut handles = Vec::new();
    for i in 0..workers.max(1) {
        let (rt, shared) = (rt.clone(), shared.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("dmaflow-worker-{i}"))
            .spawn(move || work(&rt, &shared));
        match spawned {
            Ok(h) => handles.push(h),
            // Fewer workers than asked for still run every task.
            Err(_) if !handles.is_empty() => break,
            Err(e) => {
                for t in &all {
                    drop(lock(&t.future).take());
                }
                return Err(e);
            }
        }
    }
    for t in all {
        t.wake_by_ref();
    }
    Ok(handles)
}

/// Times an idle worker looks for a ready task before it sleeps.
const IDLE_LOOKS: u32 = 32;

/// One worker: polls ready tasks until every task has ended.
fn work(rt: &Runtime, shared: &Shared) {
    WORKER.with(|w| w.set(true));
    loop {
        let task = {
            let mut q = lock(&shared.queue);
            let mut looks = 0;
            loop {
                if let Some(t) = q.tasks.pop_front() {
                    break t;
                }
                if q.live == 0 {
                    // A wake after a task's end may have queued it again:
                    // let go of it (the task holds the pool).
                    q.tasks.clear();
                    return;
                }
                // A hand-over is usually microseconds away: look again a
                // few times, giving the core up in between, before sleeping.
                if looks < IDLE_LOOKS {
                    looks += 1;
                    drop(q);
                    std::thread::yield_now();
                    q = lock(&shared.queue);
                    continue;
                }
                q.idle += 1;
                q = shared.cv.wait(q).unwrap_or_else(PoisonError::into_inner);
                q.idle -= 1;
            }
        };
        // Cleared before the poll: a wake during it queues the task again.
        task.queued.store(false, Ordering::Release);
        if let Some(result) = poll(&task) {
            rt.finish(task.id, &task.name, result);
            let mut q = lock(&shared.queue);
            q.live -= 1;
            if q.live == 0 {
                shared.cv.notify_all();
            }
        }
    }
}

/// Polls `task` once; `Some(result)` when its body has returned or panicked
/// (the body is then dropped, its ports closed, before the node is marked
/// done).
fn poll(task: &Arc<Task>) -> Option<std::thread::Result<NodeResult>> {
    let mut slot = lock(&task.future);
    let fut = slot.as_mut()?;
    let waker = Waker::from(task.clone());
    let mut cx = Context::from_waker(&waker);
    let result = match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))) {
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
        (Err(p), _) | (Ok(_), Err(p)) => Err(p),
    })
}
