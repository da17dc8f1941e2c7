//! Who waits on what: each node's status, the wakers of waiting task
//! nodes, the graph's first failure, and the runtime that guards them with
//! one lock; how a node ends.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::Waker;

use crossbeam_utils::CachePadded;

use crate::ring;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, lock};

use super::edge::{Edge, Side};
use crate::graph::{Error, NodeResult};

/// What a node is doing, as the runtime sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::graph) enum Status {
    Running,
    /// Its body has returned (for good: a port kept past that never makes
    /// the node run again).
    Done,
    /// Waiting on every one of its [`Sched::waits`].
    Blocked,
}

/// One pending wait of a node: on `edge`, to write or read `amount` items.
#[derive(Debug)]
pub(in crate::graph) struct Wait {
    /// Tells this wait from the node's others (a task may select over
    /// several port futures).
    pub(super) token: u64,
    pub(in crate::graph) edge: usize,
    pub(in crate::graph) side: Side,
    pub(in crate::graph) amount: usize,
    /// The waker of this wait where it is not the node's
    /// ([`Sched::wakers`]): a combinator in the node's body that polls each
    /// of its futures with a waker of its own (`FuturesUnordered`).
    pub(super) waker: Option<Waker>,
    /// Whether a port future waits (not a thread): once a resumption has
    /// taken the wait, that future has to see it ([`NodeState::unseen`]).
    pub(super) future: bool,
}

/// A node's status, its count of pending waits and its count of
/// resumptions, in one word: read without the lock by the node's port
/// futures and by [`Runtime::parked`], which makes the one change made
/// without the lock (a polled node with waits pending becomes blocked).
/// Every other change is made with the lock held ([`Sched::set`],
/// [`Sched::resume`]). On a cache line of its own: the nodes of a graph run
/// on different workers.
#[repr(align(128))]
pub(in crate::graph) struct NodeState {
    /// [`Status`] in the low [`STATUS_BITS`], the count of pending waits
    /// (saturating) in the next [`WAIT_BITS`], and above them the count of
    /// resumptions: a port future that saw one count when it began to wait
    /// is ready once the count moves.
    word: AtomicU64,
    /// Port futures whose wait a resumption took and which have not seen
    /// it yet (they will, when polled or dropped).
    unseen: AtomicU64,
}

/// Bits of [`NodeState::word`] that hold the status.
const STATUS_BITS: u32 = 2;
/// Bits of [`NodeState::word`] that hold the count of pending waits.
const WAIT_BITS: u32 = 14;
/// The shift of the count of resumptions in [`NodeState::word`].
const EPOCH_SHIFT: u32 = STATUS_BITS + WAIT_BITS;

impl NodeState {
    fn new() -> Self {
        NodeState {
            word: AtomicU64::new(Self::encode(Status::Running, 0, 0)),
            unseen: AtomicU64::new(0),
        }
    }

    /// The word of `status`, `waits` pending (saturating: only whether
    /// there is one is read) and `epoch` resumptions.
    fn encode(status: Status, waits: usize, epoch: u64) -> u64 {
        let code = match status {
            Status::Running => 0,
            Status::Blocked => 1,
            Status::Done => 2,
        };
        let waits = waits.min((1 << WAIT_BITS) - 1) as u64;
        epoch << EPOCH_SHIFT | waits << STATUS_BITS | code
    }

    fn status_of(word: u64) -> Status {
        match word & ((1 << STATUS_BITS) - 1) {
            0 => Status::Running,
            1 => Status::Blocked,
            _ => Status::Done,
        }
    }

    fn waits_of(word: u64) -> u64 {
        word >> STATUS_BITS & ((1 << WAIT_BITS) - 1)
    }

    /// The node's count of resumptions (wrapping only after 2^48).
    pub(super) fn epoch(&self) -> u64 {
        self.word.load(Ordering::Acquire) >> EPOCH_SHIFT
    }

    /// The node's status now.
    pub(super) fn status(&self) -> Status {
        Self::status_of(self.word.load(Ordering::SeqCst))
    }

    /// A port future whose wait a resumption took has seen it: the count of
    /// resumptions before it counted itself out, and whether every such
    /// future of the node now has.
    pub(super) fn resumption_seen(&self) -> (u64, bool) {
        let epoch = self.epoch();
        (epoch, self.unseen.fetch_sub(1, Ordering::SeqCst) == 1)
    }

    /// Running with waits pending and `seen` resumptions becomes blocked;
    /// `false` if the node was not running, had no wait pending or has been
    /// resumed since it counted `seen`.
    pub(super) fn park(&self, seen: u64) -> bool {
        let mut word = self.word.load(Ordering::SeqCst);
        loop {
            if Self::status_of(word) != Status::Running
                || Self::waits_of(word) == 0
                || word >> EPOCH_SHIFT != seen
            {
                return false;
            }
            let blocked = word & !((1 << STATUS_BITS) - 1) | Self::encode(Status::Blocked, 0, 0);
            match self
                .word
                .compare_exchange(word, blocked, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => word = now,
            }
        }
    }
}

/// Who waits on what. Node names are kept here only for deadlock reports,
/// which are built with the lock held; ports carry their own node's name.
pub(in crate::graph) struct Sched {
    pub(in crate::graph) names: Vec<String>,
    /// Each node's status, count of waits and count of resumptions (each in
    /// an `Arc` of its own, never dropped before the runtime: a port future
    /// borrows it for as long as it borrows the runtime).
    pub(in crate::graph) nodes: Vec<std::sync::Arc<NodeState>>,
    /// The waits each node has pending since it last ran on (a thread node
    /// has at most one; a task one per port future it polled).
    pub(in crate::graph) waits: Vec<Vec<Wait>>,
    /// For a task node waiting on a queue, the waker that polls it again.
    pub(in crate::graph) wakers: Vec<Option<Waker>>,
    /// Whether each node runs as a task on the worker pool (it must never
    /// sleep on a condition variable: it would hold a worker).
    pub(in crate::graph) task: Vec<bool>,
    pub(in crate::graph) edges: Vec<std::sync::Arc<Edge>>,
    /// The reading nodes of each edge, by edge id.
    pub(in crate::graph) readers_of: Vec<Vec<usize>>,
    /// Nodes whose status is [`Status::Running`] (a stall is possible only
    /// when none is): [`Runtime::running`].
    running: std::sync::Arc<CachePadded<AtomicUsize>>,
    /// The next [`Wait::token`].
    pub(super) next_token: u64,
    pub(in crate::graph) failure: Option<Error>,
}

impl Sched {
    /// Adds node `name`, running, as a thread until started as a task.
    pub(in crate::graph) fn add_node(&mut self, name: &str) {
        self.names.push(name.to_string());
        self.running.fetch_add(1, Ordering::SeqCst);
        self.nodes.push(std::sync::Arc::new(NodeState::new()));
        self.waits.push(Vec::new());
        self.wakers.push(None);
        self.task.push(false);
    }

    /// Node `node`'s status.
    pub(in crate::graph) fn status(&self, node: usize) -> Status {
        self.nodes[node].status()
    }

    /// Sets node `node`'s status, keeping count of the running ones, and
    /// publishes its count of waits. A node that is done stays done. A
    /// node is counted running before it shows as running, and counted out
    /// after it no longer does (so the count is never below the running
    /// nodes); the caller looks for a stall where the count may have
    /// reached zero.
    pub(in crate::graph) fn set(&mut self, node: usize, status: Status) {
        self.update(node, status, 0);
    }

    /// [`Sched::set`], adding `resumed` to the node's count of resumptions.
    fn update(&mut self, node: usize, status: Status, resumed: u64) {
        let st = &self.nodes[node];
        let waits = self.waits[node].len();
        let mut word = st.word.load(Ordering::SeqCst);
        loop {
            let was = NodeState::status_of(word);
            let to = if was == Status::Done { was } else { status };
            let up = was != Status::Running && to == Status::Running;
            if up {
                self.running.fetch_add(1, Ordering::SeqCst);
            }
            let epoch = (word >> EPOCH_SHIFT).wrapping_add(resumed);
            let next = NodeState::encode(to, waits, epoch);
            // Without the lock, only a running node's word changes
            // (`NodeState::park`).
            match st
                .word
                .compare_exchange(word, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    if was == Status::Running && to != Status::Running {
                        self.running.fetch_sub(1, Ordering::SeqCst);
                    }
                    return;
                }
                Err(now) => {
                    if up {
                        self.running.fetch_sub(1, Ordering::SeqCst);
                    }
                    word = now;
                }
            }
        }
    }

    /// Publishes node `node`'s count of waits, its status unchanged.
    pub(super) fn publish_waits(&mut self, node: usize) {
        let status = self.status(node);
        self.set(node, status);
    }

    /// Whether no node is counted running (a stall is then possible).
    pub(super) fn none_running(&self) -> bool {
        self.running.load(Ordering::SeqCst) == 0
    }

    /// Node `node` runs on: its pending waits are over (its port futures see
    /// the count of resumptions move and look at their queues again). Its
    /// waker, if it is a task, goes to `woken`, to be woken (once the lock
    /// is let go where the caller can).
    pub(super) fn resume(&mut self, node: usize, woken: &mut Vec<Waker>) {
        let futures = self.waits[node].iter().filter(|w| w.future).count();
        if futures > 0 {
            // Counted before the resumption shows (see
            // `NodeState::resumption_seen`).
            self.nodes[node]
                .unseen
                .fetch_add(futures as u64, Ordering::SeqCst);
        }
        woken.extend(self.waits[node].drain(..).filter_map(|w| w.waker));
        self.update(node, Status::Running, 1);
        if let Some(w) = self.wakers[node].take() {
            woken.push(w);
        }
    }

    /// Whether node `node` has a wait pending on `side` of edge `edge`.
    fn waits_on(&self, node: usize, edge: usize, side: Side) -> bool {
        self.waits[node]
            .iter()
            .any(|w| w.edge == edge && w.side == side)
    }
}

thread_local! {
    /// The wakers [`Runtime::wake`] takes under the lock (kept for the
    /// thread's next wake, so that a wake allocates nothing).
    static WOKEN: std::cell::RefCell<Vec<Waker>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub(in crate::graph) struct Runtime {
    pub(in crate::graph) sched: Mutex<Sched>,
    /// Read by every port call: kept off the lock's cache line, which the
    /// waits of every node write.
    pub(in crate::graph) abort: CachePadded<AtomicBool>,
    /// Nodes counted running: changed with the lock held, and without it
    /// where a polled node becomes blocked ([`Runtime::parked`]).
    pub(super) running: std::sync::Arc<CachePadded<AtomicUsize>>,
}

impl Runtime {
    /// A runtime with no nodes yet.
    pub(in crate::graph) fn new() -> Self {
        let running = std::sync::Arc::new(CachePadded::new(AtomicUsize::new(0)));
        Runtime {
            sched: Mutex::new(Sched {
                names: Vec::new(),
                nodes: Vec::new(),
                waits: Vec::new(),
                wakers: Vec::new(),
                task: Vec::new(),
                edges: Vec::new(),
                readers_of: Vec::new(),
                running: running.clone(),
                next_token: 0,
                failure: None,
            }),
            abort: CachePadded::new(AtomicBool::new(false)),
            running,
        }
    }

    /// Whether the graph is stopping.
    #[inline]
    pub(in crate::graph) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    /// Wakes the nodes blocked on one side of `edge`. Their tasks are
    /// woken after the lock is let go (a wake may queue the task and
    /// notify a worker: not while every other node waits for the lock).
    pub(in crate::graph) fn wake(&self, edge: &Edge, side: Side) {
        WOKEN.with(|buffer| {
            // Taken out, never borrowed across a wake: a wake may come back here.
            let mut woken = buffer.take();
            let mut s = lock(&self.sched);
            Self::wake_locked(&mut s, edge, side, &mut woken);
            drop(s);
            for w in woken.drain(..) {
                w.wake();
            }
            buffer.replace(woken);
        });
    }

    /// Resumes the nodes blocked on one side of `edge` (the lock held): a
    /// thread node's condition variable is notified, a task's waker put in
    /// `woken`.
    pub(in crate::graph) fn wake_locked(
        s: &mut Sched,
        edge: &Edge,
        side: Side,
        woken: &mut Vec<Waker>,
    ) {
        // Whether a thread node sleeping on the edge's condition variable
        // was resumed: only then is it notified (a notification costs a
        // system call even with nobody waiting; a task is woken by its waker).
        let mut thread = false;
        match side {
            // Only its writer writes to an edge.
            Side::Write => {
                if s.waits_on(edge.writer_node, edge.id, side) {
                    thread |= !s.task[edge.writer_node];
                    s.resume(edge.writer_node, woken);
                }
            }
            Side::Read => {
                for i in 0..s.readers_of.get(edge.id).map_or(0, Vec::len) {
                    let node = s.readers_of[edge.id][i];
                    if s.waits_on(node, edge.id, side) {
                        thread |= !s.task[node];
                        s.resume(node, woken);
                    }
                }
            }
        }
        let (target, cv) = match side {
            Side::Write => (&edge.writer_target, &edge.writer_cv),
            Side::Read => (&edge.readers_target, &edge.readers_cv),
        };
        target.store(u64::MAX, Ordering::SeqCst);
        if thread {
            cv.notify_all();
        }
    }

    /// Records the first real failure and wakes everybody to stop.
    pub(in crate::graph) fn fail(&self, s: &mut Sched, err: Error) {
        // A node whose readers vanished fails with `Closed`; when the readers
        // vanished because their node failed, that node's error is the cause (it
        // may be recorded second: its ports close before its result arrives).
        let consequence = |e: &Error| {
            matches!(
                e,
                Error::Port {
                    source: ring::Error::Closed,
                    ..
                }
            )
        };
        match &s.failure {
            None => s.failure = Some(err),
            Some(old) if consequence(old) && !consequence(&err) => s.failure = Some(err),
            Some(_) => {}
        }
        self.stop_all(s);
    }

    /// Makes every port call return [`Error::Aborted`] and wakes every waiter.
    /// Called with the lock held, so that no waiter is between its last look
    /// at `abort` and its wait.
    pub(in crate::graph) fn stop_all(&self, s: &Sched) {
        self.abort.store(true, Ordering::SeqCst);
        for e in &s.edges {
            e.writer_cv.notify_all();
            e.readers_cv.notify_all();
        }
        for w in s.wakers.iter().flatten() {
            w.wake_by_ref();
        }
        for w in s.waits.iter().flatten().filter_map(|w| w.waker.as_ref()) {
            w.wake_by_ref();
        }
    }

    /// Node `id` ended with `result` (its ports already closed): records the
    /// first real failure, or looks for a stall the end leaves behind.
    pub(in crate::graph) fn finish(
        &self,
        id: usize,
        name: &str,
        result: std::thread::Result<NodeResult>,
    ) {
        // The error is built before the lock is taken.
        let mut closed = false;
        let err = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => match e.downcast::<Error>() {
                // Stopped because another node failed: not a failure.
                Ok(e) if matches!(*e, Error::Aborted { .. }) => None,
                Ok(e) => Some(match *e {
                    e @ Error::Port {
                        source: ring::Error::Closed,
                        ..
                    } => {
                        closed = true;
                        e
                    }
                    e @ (Error::Port { .. }
                    | Error::Deadlock { .. }
                    | Error::BlockingInTask { .. }
                    | Error::WaitAfterEnd { .. }
                    | Error::PortShared { .. }) => e,
                    e => Error::Node {
                        node: name.to_string(),
                        source: Box::new(e),
                    },
                }),
                Err(e) => Some(Error::Node {
                    node: name.to_string(),
                    source: e,
                }),
            },
            Err(p) => {
                let message = panic_message(p.as_ref());
                drop_quietly(p);
                Some(Error::Panicked {
                    node: name.to_string(),
                    message,
                })
            }
        };
        let mut s = lock(&self.sched);
        s.set(id, Status::Done);
        // A thread still asleep on a wait of the node (a port kept past the
        // node's end, used on another thread) wakes to learn of the end.
        for w in std::mem::take(&mut s.waits[id]) {
            let e = &s.edges[w.edge];
            match w.side {
                Side::Write => e.writer_cv.notify_all(),
                Side::Read => e.readers_cv.notify_all(),
            }
            if let Some(w) = w.waker {
                w.wake();
            }
        }
        // So does a task or thread whose waker a wait of the node left (a
        // port used by another node's body, refused or not).
        if let Some(w) = s.wakers[id].take() {
            w.wake();
        }
        // `Closed` ends a node normally only when every reader of every one
        // of its outputs had finished (a `head` downstream) when that output
        // closed: one output whose reader finished while another was still
        // read is a failure, never a silent truncation (the other reader may
        // have finished since, on the end of stream the close gave it).
        let err = if closed
            && !s
                .edges
                .iter()
                .filter(|e| e.writer_node == id)
                .any(|e| e.left_reading())
        {
            None
        } else {
            err
        };
        match err {
            Some(e) => self.fail(&mut s, e),
            None => self.check_stall(&mut s),
        }
    }
}

/// Drops `x`, catching a panic its `Drop` raises (a panic payload may be
/// one whose drop panics): the runtime's own threads must never unwind, and
/// the second panic's payload is leaked rather than dropped in turn.
pub(in crate::graph) fn drop_quietly<T>(x: T) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(x))) {
        std::mem::forget(again);
    }
}

/// The text of a panic's payload, if it has one.
pub(in crate::graph) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs a thread node's body to its end and records how it ended.
pub(in crate::graph) fn run_node(
    rt: &Runtime,
    id: usize,
    name: &str,
    body: Box<dyn FnOnce() -> NodeResult + Send>,
) {
    // The body (and with it every port it captured) is consumed here, so its
    // queues are closed before the node is marked done.
    let result = super::wait::as_node(rt, id, || catch_unwind(AssertUnwindSafe(body)));
    rt.finish(id, name, result);
}
