//! The waits of both sides of a queue: a thread node sleeps on the edge's
//! condition variable, a task node leaves its waker with the runtime
//! ([`BlockOn`]). Both are written against [`WriteEnd`] and [`ReadEnd`], so
//! that the `loom` model checks this very code on the queue's cursor protocol.

use std::pin::Pin;
use std::task::{Context, Poll};

use crate::ring;
use crate::sync::{MutexGuard, Ordering, fence, lock, wait};

use super::edge::{Edge, Side};
use super::sched::{Runtime, Sched, Status};

/// A blocking round begun ([`Runtime::begin_block`]): the lock held, what
/// the last look found, and whether the node is to wait.
type Begun<'a> = (MutexGuard<'a, Sched>, Result<bool, ring::Error>, bool);

/// Why a wait on a queue ended without the room or the items it waited for.
#[derive(Debug)]
pub(in crate::graph) enum WaitError {
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

    /// [`Runtime::wait_room`] for a task node: waits without a thread.
    pub(in crate::graph) async fn wait_room_async<W: WriteEnd>(
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

    /// [`Runtime::wait_items`] for a task node: waits without a thread.
    pub(in crate::graph) async fn wait_items_async<R: ReadEnd>(
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
    pub(in crate::graph) fn after_commit(&self, edge: &Edge, position: u64) {
        fence(Ordering::SeqCst);
        if edge.readers_target.load(Ordering::SeqCst) <= position {
            self.wake(edge, Side::Read);
        }
    }

    /// After a reader of `edge` consumed up to `position`: wakes the writer if
    /// it waits for that.
    pub(in crate::graph) fn after_consume(&self, edge: &Edge, position: u64) {
        fence(Ordering::SeqCst);
        if edge.writer_target.load(Ordering::SeqCst) <= position {
            self.wake(edge, Side::Write);
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
