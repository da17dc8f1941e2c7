//! The node's state: each node's status, its pending waits and the wakers
//! of waiting task nodes, its count of resumptions, the graph's first
//! failure, and the runtime that guards them with one lock. A node is
//! *blocked* ([`Status::Blocked`]) when it waits on every one of its
//! pending waits; that is the one thing "park" means here
//! ([`NodeState::park`]: a polled task whose poll left waits becomes
//! blocked). A thread's sleep is a sleep (`wait.rs`), a resumption the
//! end of a node's waits (`wake.rs`).

use std::task::Waker;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};

use super::edge::{Edge, Side};
use crate::graph::error::Error;

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
    pub(super) fn waits_on(&self, node: usize, edge: usize, side: Side) -> bool {
        self.waits[node]
            .iter()
            .any(|w| w.edge == edge && w.side == side)
    }
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
}
