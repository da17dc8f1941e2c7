//! The runtime's scheduling state: which node waits on which queue, waking
//! nodes, growing a queue on an artificial deadlock (Parks' bounded scheduling),
//! reporting a real one, and running each node on its thread.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::ring;

use super::{Error, NodeResult};

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

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
    pub(super) capacity: AtomicUsize,
    /// Capacity a reader's threshold (or the runtime) asked the writer to grow to.
    pub(super) grow_to: AtomicUsize,
    /// The slowest reader position at which the blocked writer can go on.
    pub(super) writer_target: AtomicU64,
    /// The write position at which some blocked reader can go on.
    pub(super) readers_target: AtomicU64,
    pub(super) writer_cv: Condvar,
    pub(super) readers_cv: Condvar,
}

pub(super) struct Sched {
    pub(super) names: Vec<String>,
    pub(super) status: Vec<Status>,
    pub(super) edges: Vec<Arc<Edge>>,
    pub(super) failure: Option<Error>,
}

pub(super) struct Runtime {
    pub(super) sched: Mutex<Sched>,
    pub(super) abort: AtomicBool,
}

impl Runtime {
    pub(super) fn node_name(&self, node: usize) -> String {
        lock(&self.sched).names[node].clone()
    }

    /// Wakes the nodes blocked on one side of `edge`.
    pub(super) fn wake(&self, edge: &Edge, side: Side) {
        let mut s = lock(&self.sched);
        Self::wake_locked(&mut s, edge, side);
    }

    pub(super) fn wake_locked(s: &mut Sched, edge: &Edge, side: Side) {
        for st in &mut s.status {
            if matches!(*st, Status::Blocked { edge: e, side: sd, .. } if e == edge.id && sd == side)
            {
                *st = Status::Running;
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
    pub(super) fn stop_all(&self, s: &Sched) {
        self.abort.store(true, Ordering::SeqCst);
        for e in &s.edges {
            e.writer_cv.notify_all();
            e.readers_cv.notify_all();
        }
    }

    /// Called with the lock held whenever a node blocks or ends: if every live node
    /// is blocked, grows a queue (artificial deadlock) or fails the graph (real one).
    pub(super) fn check_stall(&self, s: &mut Sched) {
        let mut any_live = false;
        for st in &s.status {
            match st {
                Status::Running => return,
                Status::Blocked { .. } => any_live = true,
                Status::Done => {}
            }
        }
        if !any_live {
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
            e.grow_to.fetch_max(cap + amount, Ordering::SeqCst);
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
    let mut s = lock(&rt.sched);
    s.status[id] = Status::Done;
    let err = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => match e.downcast::<Error>() {
            Ok(e) if matches!(*e, Error::Aborted { .. }) => None,
            Ok(e) => Some(match *e {
                e @ (Error::Port { .. } | Error::Deadlock { .. }) => e,
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
    match err {
        Some(e) => rt.fail(&mut s, e),
        None => rt.check_stall(&mut s),
    }
}
