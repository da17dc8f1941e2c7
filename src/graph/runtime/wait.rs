//! The waits of both sides of a queue: a thread node sleeps on the edge's
//! condition variable, a task node leaves its waker with the runtime
//! ([`BlockOn`]). Both are written against [`WriteEnd`] and [`ReadEnd`], so
//! that the `loom` model checks this very code on the queue's cursor protocol.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::ring;
use crate::sync::{MutexGuard, Ordering, fence, lock, wait};

use super::edge::{Edge, Side};
use super::sched::{NodeState, Runtime, Sched, Status, Wait};

/// A blocking round begun ([`Runtime::begin_block`]): the lock held, what
/// the last look found, whether the node is to wait, and the wait's token.
type Begun<'a> = (MutexGuard<'a, Sched>, Result<bool, ring::Error>, bool, u64);

/// Why a wait on a queue ended without the room or the items it waited for.
#[derive(Debug)]
pub(in crate::graph) enum WaitError {
    /// The graph is stopping.
    Aborted,
    /// A task node called a blocking port method where it would have to
    /// sleep (it would hold a worker of the pool).
    BlockingInTask,
    /// The port's node has returned (the port was kept past its end).
    AfterEnd,
    /// The port is waited on from another node's body, or its node already
    /// waits under another waker (the port is used by another executor task
    /// while its own node waits).
    Shared,
    /// The queue's own error (every reader gone, memory lost, ...).
    Queue(ring::Error),
}

/// How a node counts while a wait of it is pending.
#[derive(Clone, Copy)]
pub(super) enum Counted<'w> {
    /// A thread node about to sleep: blocked at once.
    Thread,
    /// A port future polled by dmaflow's executor ([`poll_node`]): the node
    /// is blocked once the whole poll has returned pending, on every wait it
    /// left (a select over several port futures waits on all of them).
    Polled(&'w Waker),
    /// A port future polled by another executor: blocked once that
    /// executor has polled the node's port futures once more with no port
    /// call made in between (a select over an empty and a ready port
    /// future goes on with the ready one, never counted blocked).
    Foreign(&'w Waker),
}

thread_local! {
    /// Set while [`poll_node`] polls a node body on this thread.
    static POLLING: Cell<bool> = const { Cell::new(false) };
    /// The runtime of the executor polling on this thread, if it has one.
    static EXEC_RT: Cell<*const Runtime> = const { Cell::new(std::ptr::null()) };
    /// A node of that runtime that left a wait during the present poll
    /// (null if none): its state, which lives as long as the runtime, and
    /// its count of resumptions when the poll's first wait began.
    static PARKED_NODE: Cell<(*const NodeState, u64)> = const { Cell::new((std::ptr::null(), 0)) };
    /// A node of another runtime that did, with its runtime (which keeps
    /// the state alive) and that count.
    static PARKED: RefCell<Option<(std::sync::Arc<Runtime>, *const NodeState, u64)>> = const { RefCell::new(None) };
    /// The node whose body runs on this thread now, with its runtime (null
    /// if none): set by a thread node's thread for the whole body and by
    /// the pool for each poll of a task.
    static CALLER: Cell<(*const Runtime, usize)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// Runs `f` as the body of node `node` of `rt`: a wait on a port of another
/// node of `rt` made meanwhile on this thread is refused
/// ([`WaitError::Shared`]).
pub(in crate::graph) fn as_node<R>(rt: &Runtime, node: usize, f: impl FnOnce() -> R) -> R {
    struct Restore((*const Runtime, usize));
    impl Drop for Restore {
        fn drop(&mut self) {
            CALLER.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CALLER.with(|c| c.replace((rt as *const Runtime, node))));
    f()
}

/// The node of `rt` whose body runs on this thread, if known (a body on a
/// thread of its own, or on an executor that is not a node's, is no node's).
fn caller(rt: &Runtime) -> Option<usize> {
    let (caller_rt, caller) = CALLER.with(Cell::get);
    std::ptr::eq(caller_rt, rt).then_some(caller)
}

/// Polls a node body once as dmaflow's executor: a port future that waits
/// leaves its node's wait with the runtime, and once the body's poll has
/// returned pending the node counts as blocked (so that every port future a
/// body polls in one go, a select, is waited on). `budget` port calls may
/// complete without waiting before one yields (cooperative scheduling: a
/// task whose queues are always ready still lets the others run). `rt` is
/// the runtime the executor holds for as long as it polls, if any.
pub(in crate::graph) fn poll_node<F: Future + ?Sized>(
    body: Pin<&mut F>,
    cx: &mut Context<'_>,
    budget: u32,
    rt: Option<&Runtime>,
) -> Poll<F::Output> {
    struct Reset(bool, *const Runtime);
    impl Drop for Reset {
        fn drop(&mut self) {
            POLLING.with(|p| p.set(self.0));
            EXEC_RT.with(|r| r.set(self.1));
            // A body that panicked left no wait to count.
            PARKED_NODE.with(|p| p.set((std::ptr::null(), 0)));
            PARKED.with(|p| p.borrow_mut().take());
        }
    }
    let own = rt.map_or(std::ptr::null(), |r| r as *const Runtime);
    let _reset = Reset(
        POLLING.with(|p| p.replace(true)),
        EXEC_RT.with(|r| r.replace(own)),
    );
    super::turn::begin_poll(budget);
    let out = body.poll(cx);
    if out.is_pending() {
        let (own, seen) = PARKED_NODE.with(|p| p.replace((std::ptr::null(), 0)));
        if let Some(rt) = rt.filter(|_| !own.is_null()) {
            // SAFETY: set during this poll from a state of `rt` (the
            // executor's runtime), which lives while `rt` is borrowed.
            rt.parked(unsafe { &*own }, seen);
        }
        if let Some((rt, node, seen)) = PARKED.with(|p| p.borrow_mut().take()) {
            // SAFETY: a state of `rt`, which the `Arc` keeps alive.
            rt.parked(unsafe { &*node }, seen);
        }
    }
    out
}

/// Notes that the node of state `node` of `rt` left a wait during the
/// present poll, begun at its count of resumptions `seen` (a runtime of the
/// executor's own is not counted again). The poll's first wait keeps its
/// count: a resumption after it (of a wait of this very poll, its task
/// woken while polled) means the node is not to count as blocked.
fn note_parked(rt: &std::sync::Arc<Runtime>, node: &NodeState, seen: u64) {
    if EXEC_RT.with(Cell::get) == std::sync::Arc::as_ptr(rt) {
        PARKED_NODE.with(|p| {
            if p.get().0.is_null() {
                p.set((node, seen));
            }
        });
    } else {
        PARKED.with(|p| {
            p.borrow_mut()
                .get_or_insert_with(|| (rt.clone(), node, seen));
        });
    }
}

/// Pending once (after waking its task), then ready: a task's yield.
#[derive(Default)]
struct Yield(bool);

impl Future for Yield {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        super::turn::note_yield();
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// What the runtime needs of a queue's writing end to wait on it. None of
/// these calls may take the runtime's lock.
pub(in crate::graph) trait WriteEnd {
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
pub(in crate::graph) trait ReadEnd {
    /// Items consumed so far.
    fn position(&self) -> u64;
    /// `Some(threshold to use)` once `threshold` items are readable or the
    /// stream has ended; `None` while neither holds.
    fn ready(&mut self, threshold: usize) -> Result<Option<usize>, ring::Error>;
}

impl Runtime {
    /// The first half of one blocking round of node `node` on `side` of
    /// `edge`: leaves the wait with the runtime (the node counted as
    /// `counted` says), publishes `target` for the other side, looks once
    /// more (`ready`, with the lock held: it must not take it) and lets the
    /// runtime resolve a stall. Returns the lock, what the look found,
    /// whether the node is to wait (its wait still pending, the graph not
    /// stopping) and the wait's token; a wait not to be waited on is
    /// withdrawn. [`WaitError::AfterEnd`] if the node has returned.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn begin_block(
        &self,
        node: usize,
        edge: &Edge,
        side: Side,
        amount: usize,
        target: u64,
        ready: impl FnOnce() -> Result<bool, ring::Error>,
        counted: Counted<'_>,
    ) -> Result<Begun<'_>, WaitError> {
        let mut s = lock(&self.sched);
        if s.status(node) == Status::Done {
            return Err(WaitError::AfterEnd);
        }
        // A port is its node's body's: waited on from another node's body,
        // the wait would be counted, and woken, as its own node's.
        let caller = caller(self);
        if caller.is_some_and(|c| c != node) {
            return Err(WaitError::Shared);
        }
        // One node, one poller: from the node's own body, a wait under a
        // waker other than the node's (a combinator polling each of its
        // futures with a waker of its own) keeps that waker with the wait;
        // from anywhere else, while the node waits, it comes from another
        // task holding the port, and is refused.
        let own_body = caller == Some(node);
        if let Counted::Polled(waker) | Counted::Foreign(waker) = counted
            && !own_body
            && !s.waits[node].is_empty()
            && s.wakers[node].as_ref().is_some_and(|w| !w.will_wake(waker))
        {
            return Err(WaitError::Shared);
        }
        let token = s.next_token;
        s.next_token += 1;
        s.waits[node].push(Wait {
            token,
            edge: edge.id,
            side,
            amount,
            waker: None,
            future: !matches!(counted, Counted::Thread),
        });
        let at_once = matches!(counted, Counted::Thread);
        // A node being polled runs (it may have been polled for nothing
        // while blocked): its waits count once the poll has ended (once
        // another executor has polled them all again, see `BlockOn`).
        s.set(
            node,
            if at_once {
                Status::Blocked
            } else {
                Status::Running
            },
        );
        if let Counted::Polled(waker) | Counted::Foreign(waker) = counted {
            Self::keep_waker(&mut s, node, token, waker, own_body);
        }
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
            if at_once && side == Side::Read {
                self.check_read_cycle_from(&mut s, node);
            }
            if at_once {
                self.check_stall(&mut s);
            }
            // A stall check may have resumed us (growth) or stopped the graph
            // (a deadlock, reported by this very node): then do not sleep.
            sleep = s.waits[node].iter().any(|w| w.token == token)
                && !self.abort.load(Ordering::SeqCst);
        }
        if !sleep {
            Self::withdraw(&mut s, node, token);
        }
        Ok((s, look, sleep, token))
    }

    /// Keeps `waker` to wake wait `token` of node `node` with: as the
    /// node's waker, unless it is the node's own body (`own_body`) waiting
    /// under a waker other than the node's pending waits', which the wait
    /// then keeps beside it.
    fn keep_waker(s: &mut Sched, node: usize, token: u64, waker: &Waker, own_body: bool) {
        match &s.wakers[node] {
            Some(w) if w.will_wake(waker) => return,
            Some(_) if own_body && s.waits[node].iter().any(|w| w.token != token) => {}
            _ => {
                s.wakers[node] = Some(waker.clone());
                return;
            }
        }
        if let Some(w) = s.waits[node].iter_mut().find(|w| w.token == token)
            && !w.waker.as_ref().is_some_and(|k| k.will_wake(waker))
        {
            w.waker = Some(waker.clone());
        }
    }

    /// Takes back wait `token` of node `node`: a node blocked on nothing
    /// else runs on.
    fn withdraw(s: &mut Sched, node: usize, token: u64) {
        if let Some(i) = s.waits[node].iter().position(|w| w.token == token) {
            s.waits[node].swap_remove(i);
        }
        if s.waits[node].is_empty() && s.status(node) == Status::Blocked {
            s.set(node, Status::Running);
        } else {
            s.publish_waits(node);
        }
    }

    /// Node `node`'s state, borrowed for as long as the runtime (`s` is
    /// this runtime's, locked).
    pub(super) fn node_state<'r>(&'r self, s: &Sched, node: usize) -> &'r NodeState {
        let state = std::sync::Arc::as_ptr(&s.nodes[node]);
        // SAFETY: `s` is `self.sched`'s: the node's `Arc` stays in
        // `s.nodes` (never removed or replaced) until the runtime is
        // dropped, so what it points to lives while `self` is borrowed.
        unsafe { &*state }
    }

    /// After dmaflow's executor polled the node of state `node` and the
    /// poll returned pending with waits left, the first begun at the
    /// node's count of resumptions `seen`: unless the node has been resumed
    /// since (its task then woken, to be polled again) or its waits taken
    /// back, it is blocked (on all of them), without the lock; the lock is
    /// taken only to look for a stall when that left no node running.
    pub(super) fn parked(&self, node: &NodeState, seen: u64) {
        if node.park(seen) && self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            let mut s = lock(&self.sched);
            self.check_stall(&mut s);
        }
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
        let (mut s, look, sleep, token) =
            self.begin_block(node, edge, side, amount, target, ready, Counted::Thread)?;
        if sleep {
            if s.task[node] {
                Self::withdraw(&mut s, node, token);
                return Err(WaitError::BlockingInTask);
            }
            let cv = match side {
                Side::Write => &edge.writer_cv,
                Side::Read => &edge.readers_cv,
            };
            s = wait(cv, s);
            // Resumed, or woken to stop (or for nothing): it runs on.
            Self::withdraw(&mut s, node, token);
        }
        drop(s);
        look.map(|_| ()).map_err(WaitError::Queue)
    }

    /// Grows `w` if a reader's threshold, the runtime or `n` asks for it.
    pub(in crate::graph) fn apply_growth<W: WriteEnd>(
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
    pub(in crate::graph) fn room_without_growth<W: WriteEnd>(
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
    pub(in crate::graph) fn wait_room<W: WriteEnd>(
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

    /// [`Runtime::wait_room`] for a task node: waits without a thread,
    /// yielding first if the poll's budget is `spent` ([`super::turn::out_of_budget`]).
    pub(in crate::graph) async fn wait_room_async<W: WriteEnd>(
        self: &std::sync::Arc<Self>,
        node: usize,
        edge: &Edge,
        w: &mut W,
        n: usize,
        spent: bool,
    ) -> Result<(), WaitError> {
        if spent {
            Yield::default().await;
        }
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
    pub(in crate::graph) fn wait_items<R: ReadEnd>(
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

    /// [`Runtime::wait_items`] for a task node: waits without a thread,
    /// yielding first if the poll's budget is `spent` ([`super::turn::out_of_budget`]).
    pub(in crate::graph) async fn wait_items_async<R: ReadEnd>(
        self: &std::sync::Arc<Self>,
        node: usize,
        edge: &Edge,
        r: &mut R,
        threshold: usize,
        spent: bool,
    ) -> Result<usize, WaitError> {
        if spent {
            Yield::default().await;
        }
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
}

/// One blocking round of a task node (see [`Runtime::begin_block`]) as a
/// future: instead of sleeping, the node's waker is left with the runtime,
/// which wakes it where it would notify a thread. Ready once the node has
/// been resumed (its count of resumptions moved) or the graph stops; the
/// caller looks at the queue again.
struct BlockOn<'a, F> {
    rt: &'a std::sync::Arc<Runtime>,
    node: usize,
    edge: &'a Edge,
    /// The side waited on, the amount and the other side's target position.
    wait: (Side, usize, u64),
    state: BlockState<'a, F>,
}

enum BlockState<'a, F> {
    /// Not polled yet: the last look before the node waits.
    Look(F),
    /// The wait is with the runtime (with the waker left there): the
    /// node's count of resumptions and its value then, and the wait's token.
    Waiting {
        state: &'a NodeState,
        seen: u64,
        token: u64,
        /// Under another executor, until the node counts as blocked: the
        /// thread's count of async port calls when this future last
        /// returned pending (see [`Counted::Foreign`]).
        foreign: Option<u64>,
    },
    /// Ready returned.
    Done,
}

impl<'a, F> BlockOn<'a, F> {
    fn new(
        rt: &'a std::sync::Arc<Runtime>,
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
        }
    }
}

/// A port future whose wait a resumption took has seen it (`polled`: in a
/// poll of dmaflow's executor). Once every such future of the node has, the
/// waits the node begins from now on are the ones it really waits on: the
/// poll's note of the node (taken at its first wait) moves to the count of
/// resumptions now, so that a wait begun and ended inside one poll (under
/// another executor's `block_on` inside a task) does not leave the node
/// counted running while it later waits.
fn resumption_seen(state: &NodeState, polled: bool) {
    let (epoch, all) = state.resumption_seen();
    if !(all && polled) {
        return;
    }
    PARKED_NODE.with(|p| {
        if std::ptr::eq(p.get().0, state) {
            p.set((state, epoch));
        }
    });
    PARKED.with(|p| {
        if let Some((_, node, seen)) = p.borrow_mut().as_mut()
            && std::ptr::eq(*node, state)
        {
            *seen = epoch;
        }
    });
}

impl Runtime {
    /// Node `node`, waiting under another executor, whose port futures that
    /// executor polled once more with no port call in between: it is
    /// blocked now on all its waits (unless resumed since `seen`), and a
    /// stall is looked for.
    fn foreign_parked(&self, node: usize, state: &NodeState, seen: u64) {
        let mut s = lock(&self.sched);
        if state.epoch() != seen || s.waits[node].is_empty() || s.status(node) != Status::Running {
            return;
        }
        s.set(node, Status::Blocked);
        self.check_stall(&mut s);
    }
}

impl<F: FnOnce() -> Result<bool, ring::Error> + Unpin> Future for BlockOn<'_, F> {
    type Output = Result<(), WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let node = this.node;
        let polled = POLLING.with(Cell::get);
        match std::mem::replace(&mut this.state, BlockState::Done) {
            BlockState::Look(ready) => {
                let (side, amount, target) = this.wait;
                let counted = if polled {
                    Counted::Polled(cx.waker())
                } else {
                    Counted::Foreign(cx.waker())
                };
                let (s, look, sleep, token) = match this
                    .rt
                    .begin_block(node, this.edge, side, amount, target, ready, counted)
                {
                    Ok(begun) => begun,
                    Err(e) => return Poll::Ready(Err(e)),
                };
                if !sleep {
                    return Poll::Ready(look.map(|_| ()).map_err(WaitError::Queue));
                }
                let state = this.rt.node_state(&s, node);
                let seen = state.epoch();
                drop(s);
                let foreign = if polled {
                    note_parked(this.rt, state, seen);
                    None
                } else {
                    // Polled again at once: the executor's next pass tells
                    // whether anything else it polls is ready.
                    cx.waker().wake_by_ref();
                    Some(super::turn::calls_on_thread())
                };
                this.state = BlockState::Waiting {
                    state,
                    seen,
                    token,
                    foreign,
                };
                Poll::Pending
            }
            BlockState::Waiting {
                state,
                seen,
                token,
                foreign,
            } => {
                // Resumed (its waits taken back by the runtime) or stopping:
                // nothing left to undo, no lock to take.
                if state.epoch() != seen {
                    resumption_seen(state, polled);
                    return Poll::Ready(Ok(()));
                }
                if this.rt.aborted() {
                    return Poll::Ready(Ok(()));
                }
                // Polled before the runtime resumed it (woken by something
                // else, which a hand-over never is): it waits on, with this
                // poll's waker left with the runtime.
                {
                    let mut s = lock(&this.rt.sched);
                    if state.epoch() != seen {
                        drop(s);
                        resumption_seen(state, polled);
                        return Poll::Ready(Ok(()));
                    }
                    let own_body = caller(this.rt) == Some(node);
                    Runtime::keep_waker(&mut s, node, token, cx.waker(), own_body);
                }
                let foreign = match foreign {
                    None => {
                        if polled {
                            note_parked(this.rt, state, seen);
                        }
                        None
                    }
                    // A whole pass of the other executor with no port call:
                    // nothing else it polls was ready, the node waits.
                    Some(calls) if calls == super::turn::calls_on_thread() => {
                        this.rt.foreign_parked(node, state, seen);
                        None
                    }
                    Some(_) => {
                        cx.waker().wake_by_ref();
                        Some(super::turn::calls_on_thread())
                    }
                };
                this.state = BlockState::Waiting {
                    state,
                    seen,
                    token,
                    foreign,
                };
                Poll::Pending
            }
            BlockState::Done => Poll::Ready(Ok(())),
        }
    }
}

impl<F> Drop for BlockOn<'_, F> {
    fn drop(&mut self) {
        // Dropped while waiting (a select that took another branch, or its
        // task ended): the wait is taken back unless the runtime did.
        if let BlockState::Waiting {
            state, seen, token, ..
        } = &self.state
        {
            let mut s = lock(&self.rt.sched);
            if state.epoch() == *seen {
                Runtime::withdraw(&mut s, self.node, *token);
            } else {
                drop(s);
                state.resumption_seen();
            }
        }
    }
}
