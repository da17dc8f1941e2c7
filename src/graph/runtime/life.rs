//! A node's life: it runs (a thread node on its thread, see `run_node`; a
//! task on the pool), finishes (its body returned, its ports closed), fails
//! (the graph's first real failure is kept) or is stopped (every waiter
//! woken to see the graph stop).

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::graph::error::{Error, NodeResult};
use crate::ring;
use crate::sync::{Ordering, lock};

use super::edge::Side;
use super::sched::{Runtime, Sched, Status};

impl Runtime {
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
