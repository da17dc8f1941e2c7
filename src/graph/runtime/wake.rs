//! Waking: a commit (or a consume) that reaches the position a waiting
//! side published wakes it: the runtime resumes the nodes that wait on that
//! side of the edge (their waits are over, their count of resumptions
//! moves), notifies a sleeping thread node's condition variable and wakes a
//! task's waker once the lock is let go. The waits themselves are in
//! `wait.rs`; a resumed node's state in `sched.rs`.
//!
//! Thread-locals: `WOKEN`, the wakers a wake took under the lock, kept for
//! the thread's next wake so that a wake allocates nothing.

use std::task::Waker;

use crate::sync::{Ordering, fence, lock};

use super::edge::{Edge, Side};
use super::sched::{Runtime, Sched};

thread_local! {
    /// The wakers [`Runtime::wake`] takes under the lock (kept for the
    /// thread's next wake, so that a wake allocates nothing).
    static WOKEN: std::cell::RefCell<Vec<Waker>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Runtime {
    /// After the writer of `edge` published up to `position`: wakes its
    /// readers if one waits for that.
    #[inline]
    pub(in crate::graph) fn after_commit(&self, edge: &Edge, position: u64) {
        fence(Ordering::SeqCst);
        if edge.readers_target.load(Ordering::SeqCst) <= position {
            self.wake_waiting(edge, Side::Read);
        }
    }

    /// After a reader of `edge` consumed up to `position`: wakes the writer if
    /// it waits for that.
    #[inline]
    pub(in crate::graph) fn after_consume(&self, edge: &Edge, position: u64) {
        fence(Ordering::SeqCst);
        if edge.writer_target.load(Ordering::SeqCst) <= position {
            self.wake_waiting(edge, Side::Write);
        }
    }

    /// [`Runtime::wake`] out of the line of a hand-over (most hand-overs
    /// find nobody waiting).
    #[cold]
    #[inline(never)]
    fn wake_waiting(&self, edge: &Edge, side: Side) {
        self.wake(edge, side);
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
}
