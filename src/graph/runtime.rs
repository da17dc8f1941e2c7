//! The runtime's scheduling state: which node waits on which queue, waking
//! nodes, growing a queue on an artificial deadlock (Parks' bounded scheduling),
//! reporting a real one, and running each node on its thread.
//!
//! Lock discipline: one mutex (`Runtime::sched`) guards who waits on what.
//! Nothing called while it is held takes it again: the graph's fixed facts
//! (node names, edge labels) live outside it, a queue's own calls take no
//! runtime lock, and errors are built after it is released. The waits of both
//! sides are here ([`Runtime::wait_room`], [`Runtime::wait_items`]), written
//! against [`WriteEnd`] and [`ReadEnd`] so that the `loom` model below checks
//! this very code on the queue's cursor protocol.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::ring;
use crate::sync::{
    AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Condvar, Mutex, MutexGuard, Ordering, fence,
    lock, wait,
};

use super::{Error, NodeResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Write,
    Read,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Running,
    Done,
    /// Waiting on `edge` to write `amount` items or to read `amount` items.
    Blocked {
        edge: usize,
        side: Side,
        amount: usize,
    },
}

/// Scheduling state of one edge, shared by its ports and the runtime.
pub(super) struct Edge {
    pub(super) id: usize,
    /// `from.port -> to.port, ...` for messages.
    pub(super) label: String,
    pub(super) writer_node: usize,
    /// Reading ends alive (a writer whose every output has none left has
    /// ended its work).
    pub(super) readers: AtomicUsize,
    /// Whether a reader was still there when the writing end closed
    /// ([`WRITER_OPEN`] until it closes).
    pub(super) read_at_close: AtomicU8,
    pub(super) capacity: AtomicUsize,
    /// Bytes of one item, and the most items the queue may grow to.
    pub(super) item_bytes: usize,
    pub(super) max_items: usize,
    /// Capacity a reader's threshold (or the runtime) asked the writer to grow to.
    pub(super) grow_to: AtomicUsize,
    /// The slowest reader position at which the blocked writer can go on.
    pub(super) writer_target: AtomicU64,
    /// The write position at which some blocked reader can go on.
    pub(super) readers_target: AtomicU64,
    pub(super) writer_cv: Condvar,
    pub(super) readers_cv: Condvar,
}

/// [`Edge::read_at_close`]: the writing end has not closed yet.
pub(super) const WRITER_OPEN: u8 = 0;
/// [`Edge::read_at_close`]: closed with no reader left.
pub(super) const CLOSED_UNREAD: u8 = 1;
/// [`Edge::read_at_close`]: closed while a reader was still reading.
pub(super) const CLOSED_WHILE_READ: u8 = 2;

impl Edge {
    /// Records the writing end's close (before the queue closes, so no
    /// reader has seen the end of the stream yet).
    pub(super) fn writer_closing(&self) {
        let read = if self.readers.load(Ordering::SeqCst) > 0 {
            CLOSED_WHILE_READ
        } else {
            CLOSED_UNREAD
        };
        self.read_at_close.store(read, Ordering::SeqCst);
    }

    /// Whether a reader of this edge was left reading when its writer ended:
    /// still there when the writing end closed (or now, if it has not).
    fn left_reading(&self) -> bool {
        match self.read_at_close.load(Ordering::SeqCst) {
            WRITER_OPEN => self.readers.load(Ordering::SeqCst) > 0,
            read => read == CLOSED_WHILE_READ,
        }
    }

    /// The error for growing this queue to `items` items, beyond its limit.
    pub(super) fn over_limit(&self, items: usize) -> ring::Error {
        ring::Error::QueueLimit {
            bytes: items.saturating_mul(self.item_bytes),
            limit: self.max_items.saturating_mul(self.item_bytes),
        }
    }

    /// A new edge `id` written by node `writer_node`, with a queue of `capacity`
    /// items that may grow to `max_items` items of `item_bytes` bytes.
    pub(super) fn new(
        id: usize,
        label: String,
        writer_node: usize,
        capacity: usize,
        item_bytes: usize,
        max_items: usize,
    ) -> Self {
        Edge {
            item_bytes,
            max_items,
            id,
            label,
            writer_node,
            readers: AtomicUsize::new(0),
            read_at_close: AtomicU8::new(WRITER_OPEN),
            capacity: AtomicUsize::new(capacity),
            grow_to: AtomicUsize::new(0),
            writer_target: AtomicU64::new(u64::MAX),
            readers_target: AtomicU64::new(u64::MAX),
            writer_cv: Condvar::new(),
            readers_cv: Condvar::new(),
        }
    }
}

/// Who waits on what. Node names are kept here only for deadlock reports,
/// which are built with the lock held; ports carry their own node's name.
pub(super) struct Sched {
    pub(super) names: Vec<String>,
    pub(super) status: Vec<Status>,
    /// For a task node blocked on a queue, the waker that polls it again.
    pub(super) wakers: Vec<Option<Waker>>,
    /// Set when a waiting node is resumed: its task's next poll sees it
    /// without taking the lock.
    resumed: Vec<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Whether each node runs as a task on the worker pool (it must never
    /// sleep on a condition variable: it would hold a worker).
    pub(super) task: Vec<bool>,
    pub(super) edges: Vec<std::sync::Arc<Edge>>,
    /// The reading nodes of each edge, by edge id.
    pub(super) readers_of: Vec<Vec<usize>>,
    /// Nodes whose status is [`Status::Running`] (a stall is possible only
    /// when none is).
    running: usize,
    pub(super) failure: Option<Error>,
}

impl Sched {
    /// Adds node `name`, running, as a thread until started as a task.
    pub(super) fn add_node(&mut self, name: &str) {
        self.names.push(name.to_string());
        self.status.push(Status::Running);
        self.running += 1;
        self.wakers.push(None);
        self.resumed.push(Default::default());
        self.task.push(false);
    }

    /// Sets node `node`'s status, keeping count of the running ones.
    pub(super) fn set(&mut self, node: usize, status: Status) {
        let was = std::mem::replace(&mut self.status[node], status) == Status::Running;
        let is = status == Status::Running;
        match (was, is) {
            (true, false) => self.running -= 1,
            (false, true) => self.running += 1,
            _ => {}
        }
    }

    /// Node `node` runs again: it is no longer blocked and its waker (if it
    /// is a task) polls it.
    fn resume(&mut self, node: usize) {
        self.set(node, Status::Running);
        if let Some(w) = self.wakers[node].take() {
            self.resumed[node].store(true, std::sync::atomic::Ordering::Release);
            w.wake();
        }
    }
}

pub(super) struct Runtime {
    pub(super) sched: Mutex<Sched>,
    pub(super) abort: AtomicBool,
}

/// A blocking round begun ([`Runtime::begin_block`]): the lock held, what
/// the last look found, and whether the node is to wait.
type Begun<'a> = (MutexGuard<'a, Sched>, Result<bool, ring::Error>, bool);

/// Why a wait on a queue ended without the room or the items it waited for.
#[derive(Debug)]
pub(super) enum WaitError {
    /// The graph is stopping.
    Aborted,
    /// A task node called a blocking port method where it would have to
    /// sleep (it would hold a worker of the pool).
    BlockingInTask,
    /// A node awaited a port while a wait on another of its ports was
    /// pending (a select or join over port futures).
    TwoWaits,
    /// The queue's own error (every reader gone, memory lost, ...).
    Queue(ring::Error),
}

/// What the runtime needs of a queue's writing end to wait on it. None of
/// these calls may take the runtime's lock.
pub(super) trait WriteEnd {
    /// Capacity in items.
    fn capacity(&self) -> usize;
    /// Items published so far.
    fn position(&self) -> u64;
    /// Grows the queue to at least `min_items` (readers follow).
    fn grow(&mut self, min_items: usize) -> Result<(), ring::Error>;
    /// Whether `n` slots are free now (they are then reserved).
    fn has_room(&mut self, n: usize) -> Result<bool, ring::Error>;
}

/// What the runtime needs of a queue's reading end to wait on it. None of
/// these calls may take the runtime's lock.
pub(super) trait ReadEnd {
    /// Items consumed so far.
    fn position(&self) -> u64;
    /// `Some(threshold to use)` once `threshold` items are readable or the
    /// stream has ended; `None` while neither holds.
    fn ready(&mut self, threshold: usize) -> Result<Option<usize>, ring::Error>;
}

impl Runtime {
    /// A runtime with no nodes yet.
    pub(super) fn new() -> Self {
        Runtime {
            sched: Mutex::new(Sched {
                names: Vec::new(),
                status: Vec::new(),
                wakers: Vec::new(),
                resumed: Vec::new(),
                task: Vec::new(),
                edges: Vec::new(),
                readers_of: Vec::new(),
                running: 0,
                failure: None,
            }),
            abort: AtomicBool::new(false),
        }
    }

    /// Whether the graph is stopping.
    pub(super) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    /// Wakes the nodes blocked on one side of `edge`.
    pub(super) fn wake(&self, edge: &Edge, side: Side) {
        let mut s = lock(&self.sched);
        Self::wake_locked(&mut s, edge, side);
    }

    pub(super) fn wake_locked(s: &mut Sched, edge: &Edge, side: Side) {
        let waits = |st: Status| matches!(st, Status::Blocked { edge: e, side: sd, .. } if e == edge.id && sd == side);
        match side {
            // Only its writer writes to an edge.
            Side::Write => {
                if waits(s.status[edge.writer_node]) {
                    s.resume(edge.writer_node);
                }
            }
            Side::Read => {
                for i in 0..s.readers_of.get(edge.id).map_or(0, Vec::len) {
                    let node = s.readers_of[edge.id][i];
                    if waits(s.status[node]) {
                        s.resume(node);
                    }
                }
            }
        }
        match side {
            Side::Write => {
                edge.writer_target.store(u64::MAX, Ordering::SeqCst);
                edge.writer_cv.notify_all();
            }
            Side::Read => {
                edge.readers_target.store(u64::MAX, Ordering::SeqCst);
                edge.readers_cv.notify_all();
            }
        }
    }

    /// Records the first real failure and wakes everybody to stop.
    pub(super) fn fail(&self, s: &mut Sched, err: Error) {
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
    pub(super) fn stop_all(&self, s: &Sched) {
        self.abort.store(true, Ordering::SeqCst);
        for e in &s.edges {
            e.writer_cv.notify_all();
            e.readers_cv.notify_all();
        }
        for w in s.wakers.iter().flatten() {
            w.wake_by_ref();
        }
    }

    /// Called with the lock held whenever a node blocks or ends: if every live node
    /// is blocked, grows a queue (artificial deadlock) or fails the graph (real one).
    pub(super) fn check_stall(&self, s: &mut Sched) {
        if s.running > 0 {
            return;
        }
        let mut any_live = false;
        for st in &s.status {
            match st {
                Status::Running => return,
                Status::Blocked { .. } => any_live = true,
                Status::Done => {}
            }
        }
        if !any_live || self.abort.load(Ordering::SeqCst) {
            return;
        }
        // Writers waiting on full queues: grow the smallest queue by its request.
        let mut best: Option<(usize, usize, usize)> = None; // (capacity, node, edge)
        for (node, st) in s.status.iter().enumerate() {
            if let Status::Blocked {
                edge,
                side: Side::Write,
                ..
            } = *st
            {
                let cap = s.edges[edge].capacity.load(Ordering::Relaxed);
                if best.is_none_or(|b| cap < b.0) {
                    best = Some((cap, node, edge));
                }
            }
        }
        if let Some((cap, node, edge)) = best {
            let Status::Blocked { amount, .. } = s.status[node] else {
                return;
            };
            let e = s.edges[edge].clone();
            e.grow_to
                .fetch_max(cap.saturating_add(amount), Ordering::SeqCst);
            Self::wake_locked(s, &e, Side::Write);
            return;
        }
        // Everybody waits to read: find the cycle of waits.
        let cycle = Self::describe_cycle(s);
        self.fail(s, Error::Deadlock { cycle });
    }

    pub(super) fn describe_cycle(s: &Sched) -> String {
        let start = s
            .status
            .iter()
            .position(|st| matches!(st, Status::Blocked { .. }))
            .unwrap_or(0);
        let mut seen = vec![usize::MAX; s.status.len()];
        let mut path: Vec<(usize, usize, usize)> = Vec::new(); // (node, edge, amount)
        let mut node = start;
        while seen[node] == usize::MAX {
            seen[node] = path.len();
            let Status::Blocked { edge, amount, .. } = s.status[node] else {
                break;
            };
            path.push((node, edge, amount));
            node = s.edges[edge].writer_node;
        }
        let from = if seen[node] == usize::MAX {
            0
        } else {
            seen[node]
        };
        let mut out = String::new();
        for &(n, e, amount) in &path[from..] {
            out += &format!(
                "{} waits for {} items on {}; ",
                s.names[n], amount, s.edges[e].label
            );
        }
        out += &format!("{} closes the cycle", s.names[node]);
        out
    }

    /// The first half of one blocking round of node `node` on `side` of
    /// `edge`: marks it blocked, publishes `target` for the other side, looks
    /// once more (`ready`, with the lock held: it must not take it) and lets
    /// the runtime resolve a stall. Returns the lock, what the look found and
    /// whether the node is to wait (still blocked, the graph not stopping);
    /// [`WaitError::TwoWaits`] if the node already waits on another port.
    fn begin_block(
        &self,
        node: usize,
        edge: &Edge,
        side: Side,
        amount: usize,
        target: u64,
        ready: impl FnOnce() -> Result<bool, ring::Error>,
    ) -> Result<Begun<'_>, WaitError> {
        let mut s = lock(&self.sched);
        // A node waits on one port at a time: the runtime keeps one wait per
        // node (who waits on what, for growth and deadlock reports), so a
        // second pending wait (a task's select or join over port futures)
        // would overwrite the first and could turn into a false deadlock.
        if matches!(s.status[node], Status::Blocked { .. }) {
            return Err(WaitError::TwoWaits);
        }
        s.set(
            node,
            Status::Blocked {
                edge: edge.id,
                side,
                amount,
            },
        );
        match side {
            Side::Write => edge.writer_target.store(target, Ordering::SeqCst),
            Side::Read => {
                edge.readers_target.fetch_min(target, Ordering::SeqCst);
            }
        }
        // Pairs with the fence in `after_commit` / `after_consume`: either the
        // other side sees the target (and wakes us, under the lock, after we
        // sleep), or `ready` sees what the other side published.
        fence(Ordering::SeqCst);
        let growing = side == Side::Write
            && edge.grow_to.load(Ordering::SeqCst) > edge.capacity.load(Ordering::SeqCst);
        let look = if growing || self.abort.load(Ordering::SeqCst) {
            Ok(true)
        } else {
            ready()
        };
        let mut sleep = false;
        if let Ok(false) = look {
            self.check_stall(&mut s);
            // A stall check may have woken us (growth) or stopped the graph
            // (a deadlock, reported by this very node): then do not sleep.
            sleep = matches!(s.status[node], Status::Blocked { .. })
                && !self.abort.load(Ordering::SeqCst);
        }
        Ok((s, look, sleep))
    }

    /// One blocking round of a thread node (see [`Runtime::begin_block`]),
    /// sleeping on the edge's condition variable until woken. The node is
    /// running again on return, whatever happened; the caller looks at the
    /// queue again.
    fn block(
        &self,
        node: usize,
        edge: &Edge,
        side: Side,
        amount: usize,
        target: u64,
        ready: impl FnOnce() -> Result<bool, ring::Error>,
    ) -> Result<(), WaitError> {
        let (mut s, look, sleep) = self.begin_block(node, edge, side, amount, target, ready)?;
        if sleep {
            if s.task[node] {
                s.set(node, Status::Running);
                return Err(WaitError::BlockingInTask);
            }
            let cv = match side {
                Side::Write => &edge.writer_cv,
                Side::Read => &edge.readers_cv,
            };
            s = wait(cv, s);
        }
        s.set(node, Status::Running);
        drop(s);
        look.map(|_| ()).map_err(WaitError::Queue)
    }

    /// Grows `w` if a reader's threshold, the runtime or `n` asks for it.
    pub(super) fn apply_growth<W: WriteEnd>(
        &self,
        edge: &Edge,
        w: &mut W,
        n: usize,
    ) -> Result<(), ring::Error> {
        let want = edge.grow_to.load(Ordering::SeqCst).max(n);
        if want > w.capacity() {
            if want > edge.max_items {
                return Err(edge.over_limit(want));
            }
            w.grow(want)?;
            edge.capacity.store(w.capacity(), Ordering::SeqCst);
            // Readers waiting on a threshold the queue could not hold may go on.
            self.wake(edge, Side::Read);
        }
        Ok(())
    }

    /// Whether `n` slots of `w` are free now (they are then reserved). A
    /// reader that released slots it had lent elsewhere asked, before it
    /// released them, for the queue to move (`Input::close_keeping_memory`):
    /// the move happens here, before any of them is reused.
    pub(super) fn room_without_growth<W: WriteEnd>(
        &self,
        edge: &Edge,
        w: &mut W,
        n: usize,
    ) -> Result<bool, WaitError> {
        if !w.has_room(n).map_err(WaitError::Queue)? {
            return Ok(false);
        }
        if edge.grow_to.load(Ordering::SeqCst) > w.capacity() {
            self.apply_growth(edge, w, n).map_err(WaitError::Queue)?;
            return w.has_room(n).map_err(WaitError::Queue);
        }
        Ok(true)
    }

    /// One look at the writing end `w` for `n` slots: `None` once they are
    /// reserved (growing the queue when `n` exceeds it or the runtime asks),
    /// else the slowest reader position at which they will be free.
    fn room_step<W: WriteEnd>(
        &self,
        edge: &Edge,
        w: &mut W,
        n: usize,
    ) -> Result<Option<u64>, WaitError> {
        if self.aborted() {
            return Err(WaitError::Aborted);
        }
        self.apply_growth(edge, w, n).map_err(WaitError::Queue)?;
        if self.room_without_growth(edge, w, n)? {
            return Ok(None);
        }
        let cap = w.capacity() as u64;
        Ok(Some((w.position() + n as u64).saturating_sub(cap)))
    }

    /// Waits, as thread node `node`, until `n` slots of `w` are free (they
    /// are then reserved), growing the queue when `n` exceeds it or the
    /// runtime asks.
    pub(super) fn wait_room<W: WriteEnd>(
        &self,
        node: usize,
        edge: &Edge,
        w: &mut W,
        n: usize,
    ) -> Result<(), WaitError> {
        while let Some(target) = self.room_step(edge, w, n)? {
            self.block(node, edge, Side::Write, n, target, || w.has_room(n))?;
        }
        Ok(())
    }

    /// [`Runtime::wait_room`] for a task node: waits without a thread.
    pub(super) async fn wait_room_async<W: WriteEnd>(
        &self,
        node: usize,
        edge: &Edge,
        w: &mut W,
        n: usize,
    ) -> Result<(), WaitError> {
        while let Some(target) = self.room_step(edge, w, n)? {
            let ready = || w.has_room(n);
            BlockOn::new(self, node, edge, (Side::Write, n, target), ready).await?;
        }
        Ok(())
    }

    /// Before a reader waits for `threshold` items: a threshold beyond the
    /// queue asks its writer to grow it (within the queue's limit).
    fn items_request(&self, edge: &Edge, threshold: usize) -> Result<(), WaitError> {
        if threshold > edge.max_items {
            return Err(WaitError::Queue(edge.over_limit(threshold)));
        }
        if threshold > edge.capacity.load(Ordering::SeqCst) {
            edge.grow_to.fetch_max(threshold, Ordering::SeqCst);
            self.wake(edge, Side::Write);
        }
        Ok(())
    }

    /// One look at the reading end `r` for `threshold` items: `Ok(threshold
    /// to peek with)` once they are readable or the stream has ended, else
    /// `Err` of the write position at which they will be.
    fn items_step<R: ReadEnd>(
        &self,
        r: &mut R,
        threshold: usize,
    ) -> Result<Result<usize, u64>, WaitError> {
        if self.aborted() {
            return Err(WaitError::Aborted);
        }
        if let Some(t) = r.ready(threshold).map_err(WaitError::Queue)? {
            return Ok(Ok(t));
        }
        Ok(Err(r.position().saturating_add(threshold as u64)))
    }

    /// Waits, as thread node `node`, until `threshold` items of `r` are
    /// readable or its stream has ended; returns the threshold to peek with.
    /// A threshold beyond the queue asks its writer to grow it.
    pub(super) fn wait_items<R: ReadEnd>(
        &self,
        node: usize,
        edge: &Edge,
        r: &mut R,
        threshold: usize,
    ) -> Result<usize, WaitError> {
        self.items_request(edge, threshold)?;
        loop {
            match self.items_step(r, threshold)? {
                Ok(t) => return Ok(t),
                Err(target) => self.block(node, edge, Side::Read, threshold, target, || {
                    r.ready(threshold).map(|t| t.is_some())
                })?,
            }
        }
    }

    /// [`Runtime::wait_items`] for a task node: waits without a thread.
    pub(super) async fn wait_items_async<R: ReadEnd>(
        &self,
        node: usize,
        edge: &Edge,
        r: &mut R,
        threshold: usize,
    ) -> Result<usize, WaitError> {
        self.items_request(edge, threshold)?;
        loop {
            match self.items_step(r, threshold)? {
                Ok(t) => return Ok(t),
                Err(target) => {
                    let ready = || r.ready(threshold).map(|t| t.is_some());
                    BlockOn::new(self, node, edge, (Side::Read, threshold, target), ready).await?
                }
            }
        }
    }

    /// After the writer of `edge` published up to `position`: wakes its
    /// readers if one waits for that.
    pub(super) fn after_commit(&self, edge: &Edge, position: u64) {
        fence(Ordering::SeqCst);
        if edge.readers_target.load(Ordering::SeqCst) <= position {
            self.wake(edge, Side::Read);
        }
    }

    /// After a reader of `edge` consumed up to `position`: wakes the writer if
    /// it waits for that.
    pub(super) fn after_consume(&self, edge: &Edge, position: u64) {
        fence(Ordering::SeqCst);
        if edge.writer_target.load(Ordering::SeqCst) <= position {
            self.wake(edge, Side::Write);
        }
    }

    /// Node `id` ended with `result` (its ports already closed): records the
    /// first real failure, or looks for a stall the end leaves behind.
    pub(super) fn finish(&self, id: usize, name: &str, result: std::thread::Result<NodeResult>) {
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
                    | Error::TwoWaits { .. }) => e,
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
            Err(p) => Some(Error::Panicked {
                node: name.to_string(),
                message: panic_message(p.as_ref()),
            }),
        };
        let mut s = lock(&self.sched);
        s.set(id, Status::Done);
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

/// One blocking round of a task node (see [`Runtime::begin_block`]) as a
/// future: instead of sleeping, the node's waker is left with the runtime,
/// which wakes it where it would notify a thread. Ready once the node runs
/// again; the caller looks at the queue again.
struct BlockOn<'a, F> {
    rt: &'a Runtime,
    node: usize,
    edge: &'a Edge,
    /// The side waited on, the amount and the other side's target position.
    wait: (Side, usize, u64),
    state: BlockState<F>,
    /// The node's resumed flag, once it waits.
    resumed: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

enum BlockState<F> {
    /// Not polled yet: the last look before the node waits.
    Look(F),
    /// The node's waker is with the runtime.
    Waiting,
    /// Ready returned.
    Done,
}

impl<'a, F> BlockOn<'a, F> {
    fn new(
        rt: &'a Runtime,
        node: usize,
        edge: &'a Edge,
        wait: (Side, usize, u64),
        ready: F,
    ) -> Self {
        BlockOn {
            rt,
            node,
            edge,
            wait,
            state: BlockState::Look(ready),
            resumed: None,
        }
    }
}

impl<F: FnOnce() -> Result<bool, ring::Error> + Unpin> std::future::Future for BlockOn<'_, F> {
    type Output = Result<(), WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let node = this.node;
        match std::mem::replace(&mut this.state, BlockState::Done) {
            BlockState::Look(ready) => {
                let (side, amount, target) = this.wait;
                let (mut s, look, sleep) = match this
                    .rt
                    .begin_block(node, this.edge, side, amount, target, ready)
                {
                    Ok(begun) => begun,
                    Err(e) => return Poll::Ready(Err(e)),
                };
                if sleep {
                    s.wakers[node] = Some(cx.waker().clone());
                    let flag = s.resumed[node].clone();
                    flag.store(false, std::sync::atomic::Ordering::Relaxed);
                    this.resumed = Some(flag);
                    this.state = BlockState::Waiting;
                    return Poll::Pending;
                }
                s.set(node, Status::Running);
                Poll::Ready(look.map(|_| ()).map_err(WaitError::Queue))
            }
            BlockState::Waiting => {
                // Resumed (marked running, its waker taken) by the runtime:
                // nothing left to undo, no lock to take.
                if this
                    .resumed
                    .as_ref()
                    .is_some_and(|f| f.swap(false, std::sync::atomic::Ordering::Acquire))
                {
                    return Poll::Ready(Ok(()));
                }
                let mut s = lock(&this.rt.sched);
                if matches!(s.status[node], Status::Blocked { .. }) && !this.rt.aborted() {
                    // Polled before the runtime woke it: it waits on.
                    match &mut s.wakers[node] {
                        Some(w) => w.clone_from(cx.waker()),
                        w => *w = Some(cx.waker().clone()),
                    }
                    this.state = BlockState::Waiting;
                    return Poll::Pending;
                }
                s.set(node, Status::Running);
                s.wakers[node] = None;
                Poll::Ready(Ok(()))
            }
            BlockState::Done => Poll::Ready(Ok(())),
        }
    }
}

impl<F> Drop for BlockOn<'_, F> {
    fn drop(&mut self) {
        // Dropped while waiting (its task ended otherwise): no longer blocked.
        if matches!(self.state, BlockState::Waiting) {
            let mut s = lock(&self.rt.sched);
            if matches!(s.status[self.node], Status::Blocked { .. }) {
                s.set(self.node, Status::Running);
            }
            s.wakers[self.node] = None;
        }
    }
}

pub(super) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

pub(super) fn run_node(
    rt: &Runtime,
    id: usize,
    name: &str,
    body: Box<dyn FnOnce() -> NodeResult + Send>,
) {
    // The body (and with it every port it captured) is consumed here, so its
    // queues are closed before the node is marked done.
    let result = catch_unwind(AssertUnwindSafe(body));
    rt.finish(id, name, result);
}

#[cfg(all(test, dmaflow_loom))]
mod loom_tests {
    //! Exhaustive interleavings of the graph's blocking protocol: the runtime's
    //! own waits, stall checks, growth and abort, on the queue's own cursor
    //! protocol (slots without memory: `L = ()`).
    use super::*;
    use crate::ring::Wait;
    use crate::ring::cursor::{ReadSide, WriteSide, pair};
    use loom::sync::Arc;
    use loom::thread;

    impl WriteEnd for WriteSide<()> {
        fn capacity(&self) -> usize {
            WriteSide::capacity(self)
        }
        fn position(&self) -> u64 {
            WriteSide::position(self)
        }
        fn grow(&mut self, min_items: usize) -> Result<(), ring::Error> {
            self.relayout((), min_items);
            Ok(())
        }
        fn has_room(&mut self, n: usize) -> Result<bool, ring::Error> {
            self.wait_free(n, false)
        }
    }

    impl ReadEnd for ReadSide<()> {
        fn position(&self) -> u64 {
            ReadSide::position(self)
        }
        fn ready(&mut self, threshold: usize) -> Result<Option<usize>, ring::Error> {
            match self.wait_available(threshold, false) {
                Ok(Some(_)) => Ok(Some(threshold)),
                Ok(None) => Ok(None),
                Err(ring::Error::ThresholdTooLarge { .. }) if self.writer_closed() => {
                    Ok(Some(self.capacity()))
                }
                Err(ring::Error::ThresholdTooLarge { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.check(f);
    }

    /// A runtime with `nodes` running nodes and one edge of `capacity` from
    /// node 0 to node 1.
    fn setup(nodes: usize, capacity: usize) -> (Arc<Runtime>, std::sync::Arc<Edge>) {
        let rt = Runtime::new();
        let edge = std::sync::Arc::new(Edge::new(
            0,
            "a.out -> b.in".into(),
            0,
            capacity,
            4,
            usize::MAX,
        ));
        {
            let mut s = lock(&rt.sched);
            for i in 0..nodes {
                s.add_node(&format!("n{i}"));
            }
            s.edges.push(edge.clone());
            s.readers_of.push(vec![1]);
        }
        (Arc::new(rt), edge)
    }

    /// The writer's side of a node: wait, publish, tell the readers.
    fn write(rt: &Runtime, edge: &Edge, w: &mut WriteSide<()>, n: usize) -> Result<(), WaitError> {
        rt.wait_room(0, edge, w, n)?;
        w.publish(n);
        rt.after_commit(edge, w.position());
        Ok(())
    }

    /// Reads up to the end of the stream in steps of `threshold`; returns the count.
    fn read_all(
        rt: &Runtime,
        edge: &Edge,
        r: &mut ReadSide<()>,
        threshold: usize,
    ) -> Result<u64, WaitError> {
        let mut got = 0;
        loop {
            let t = rt.wait_items(1, edge, r, threshold)?;
            // As `Reader::peek(t)` does: a fresh look at what is readable.
            let n = r
                .wait_available(t, false)
                .map_err(WaitError::Queue)?
                .unwrap_or(0);
            if n == 0 {
                return Ok(got);
            }
            r.release(n).map_err(WaitError::Queue)?;
            got += n as u64;
            rt.after_consume(edge, r.position());
        }
    }

    #[test]
    fn loom_graph_waits_on_both_sides_lose_no_wakeup() {
        model(|| {
            let (rt, edge) = setup(2, 1);
            let (mut w, mut r) = pair((), 1, Wait::Spin);
            let (rt2, e2) = (rt.clone(), edge.clone());
            let t = thread::spawn(move || {
                for _ in 0..2 {
                    write(&rt2, &e2, &mut w, 1).unwrap();
                }
                drop(w);
                rt2.wake(&e2, Side::Read);
                rt2.finish(0, "n0", Ok(Ok(())));
            });
            assert_eq!(read_all(&rt, &edge, &mut r, 1).unwrap(), 2);
            drop(r);
            rt.wake(&edge, Side::Write);
            rt.finish(1, "n1", Ok(Ok(())));
            t.join().unwrap();
            assert!(lock(&rt.sched).failure.is_none());
        });
    }

    #[test]
    fn loom_graph_reader_that_closes_early_ends_a_waiting_writer() {
        model(|| {
            let (rt, edge) = setup(2, 1);
            let (mut w, r) = pair((), 1, Wait::Spin);
            let (rt2, e2) = (rt.clone(), edge.clone());
            let t = thread::spawn(move || {
                // The reader finishes without reading: the writer, waiting on
                // a full queue, must see the queue closed, never sleep on.
                drop(r);
                rt2.wake(&e2, Side::Write);
                rt2.finish(1, "n1", Ok(Ok(())));
            });
            write(&rt, &edge, &mut w, 1).unwrap();
            let second = write(&rt, &edge, &mut w, 1);
            assert!(
                matches!(second, Err(WaitError::Queue(ring::Error::Closed))),
                "{second:?}"
            );
            drop(w);
            rt.finish(0, "n0", Ok(Ok(())));
            t.join().unwrap();
        });
    }

    #[test]
    fn loom_graph_threshold_beyond_the_queue_grows_it() {
        model(|| {
            // The reader's threshold (2) exceeds the queue (1): the writer,
            // blocked on the full queue, is asked to grow it and goes on.
            let (rt, edge) = setup(2, 1);
            let (mut w, mut r) = pair((), 1, Wait::Spin);
            let (rt2, e2) = (rt.clone(), edge.clone());
            let t = thread::spawn(move || {
                for _ in 0..2 {
                    write(&rt2, &e2, &mut w, 1).unwrap();
                }
                drop(w);
                rt2.wake(&e2, Side::Read);
                rt2.finish(0, "n0", Ok(Ok(())));
            });
            let got = read_all(&rt, &edge, &mut r, 2).unwrap();
            assert_eq!(got, 2);
            drop(r);
            rt.wake(&edge, Side::Write);
            rt.finish(1, "n1", Ok(Ok(())));
            t.join().unwrap();
            assert!(edge.capacity.load(Ordering::SeqCst) >= 2);
        });
    }

    #[test]
    fn loom_graph_abort_wakes_both_sides() {
        model(|| {
            // Three nodes: a writer and a reader on one edge, and a third that
            // fails. Whatever the two are doing then, neither waits for ever:
            // each ends with `Aborted` or has finished its work.
            let (rt, edge) = setup(3, 1);
            let (mut w, mut r) = pair((), 1, Wait::Spin);
            let (rt2, e2) = (rt.clone(), edge.clone());
            let writer = thread::spawn(move || {
                let res = (0..3).try_for_each(|_| write(&rt2, &e2, &mut w, 1));
                // Done, stopped, or its reader was stopped first.
                assert!(
                    matches!(
                        res,
                        Ok(())
                            | Err(WaitError::Aborted)
                            | Err(WaitError::Queue(ring::Error::Closed))
                    ),
                    "{res:?}"
                );
                drop(w);
                rt2.wake(&e2, Side::Read);
                rt2.finish(0, "n0", Ok(Ok(())));
            });
            let (rt3, e3) = (rt.clone(), edge.clone());
            let reader = thread::spawn(move || {
                let res = read_all(&rt3, &e3, &mut r, 1);
                // Everything the writer wrote before it was stopped, or stopped.
                assert!(
                    matches!(res, Ok(0..=3) | Err(WaitError::Aborted)),
                    "{res:?}"
                );
                drop(r);
                rt3.wake(&e3, Side::Write);
                rt3.finish(1, "n1", Ok(Ok(())));
            });
            rt.finish(2, "n2", Ok(Err("fails".into())));
            writer.join().unwrap();
            reader.join().unwrap();
            assert!(matches!(lock(&rt.sched).failure, Some(Error::Node { .. })));
        });
    }

    #[test]
    fn loom_graph_reader_of_its_own_output_reports_the_deadlock() {
        model(|| {
            // Two nodes each waiting to read what the other would write: the
            // second to block reports the cycle and neither sleeps for ever.
            let rt = Arc::new(Runtime::new());
            let ab = std::sync::Arc::new(Edge::new(0, "a.out -> b.in".into(), 0, 1, 4, usize::MAX));
            let ba = std::sync::Arc::new(Edge::new(1, "b.out -> a.in".into(), 1, 1, 4, usize::MAX));
            {
                let mut s = lock(&rt.sched);
                s.add_node("a");
                s.add_node("b");
                s.edges = vec![ab.clone(), ba.clone()];
                s.readers_of = vec![vec![1], vec![0]];
            }
            let (w_ab, mut r_ab) = pair((), 1, Wait::Spin);
            let (w_ba, mut r_ba) = pair((), 1, Wait::Spin);
            let (rt2, ba2) = (rt.clone(), ba.clone());
            let a = thread::spawn(move || {
                let res = rt2.wait_items(0, &ba2, &mut r_ba, 1);
                assert!(matches!(res, Err(WaitError::Aborted)), "{res:?}");
                drop((w_ab, r_ba));
                rt2.finish(0, "a", Ok(Ok(())));
            });
            let res = rt.wait_items(1, &ab, &mut r_ab, 1);
            assert!(matches!(res, Err(WaitError::Aborted)), "{res:?}");
            drop((w_ba, r_ab));
            rt.finish(1, "b", Ok(Ok(())));
            a.join().unwrap();
            assert!(matches!(
                lock(&rt.sched).failure,
                Some(Error::Deadlock { .. })
            ));
        });
    }
}
