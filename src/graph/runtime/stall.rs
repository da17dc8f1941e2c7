//! Stalls: when every live node waits, the graph fails with a cycle of read
//! waits if there is one (a real deadlock, whatever else waits), else a
//! full queue grows (Parks' bounded scheduling), else the graph fails with
//! the cycle of waits.

use crate::sync::Ordering;

use super::edge::Side;
use super::sched::{Runtime, Sched, Status};
use crate::graph::error::Error;

impl Runtime {
    /// Called with the lock held whenever a node blocks or ends: if every live node
    /// is blocked, grows a queue (artificial deadlock) or fails the graph (real one).
    pub(in crate::graph) fn check_stall(&self, s: &mut Sched) {
        if !s.none_running() {
            return;
        }
        let mut any_live = false;
        for st in s.nodes.iter().map(|n| n.status()) {
            match st {
                Status::Running => return,
                Status::Blocked => any_live = true,
                Status::Done => {}
            }
        }
        if !any_live || self.abort.load(Ordering::SeqCst) {
            return;
        }
        // Nodes that wait to read what another of them would write: no
        // growth frees them, so that is the report, before any growth.
        if self.check_read_cycles(s) {
            return;
        }
        // Writers waiting on full queues: grow the smallest queue, at least
        // doubling it (a graph that truly needs a large queue gets there in
        // a few steps).
        let mut best: Option<(usize, usize, usize, usize)> = None; // (capacity, edge, amount, node)
        for node in 0..s.nodes.len() {
            if s.status(node) != Status::Blocked {
                continue;
            }
            for w in s.waits[node].iter().filter(|w| w.side == Side::Write) {
                let cap = s.edges[w.edge].capacity.load(Ordering::Relaxed);
                if best.is_none_or(|b| cap < b.0) {
                    best = Some((cap, w.edge, w.amount, node));
                }
            }
        }
        if let Some((cap, edge, amount, node)) = best {
            let e = s.edges[edge].clone();
            if cap >= e.max_items {
                let err = Error::QueueLimit {
                    queue: e.label.clone(),
                    writer: s.names[node].clone(),
                    items: amount,
                    limit: e.max_items.saturating_mul(e.item_bytes),
                };
                self.fail(s, err);
                return;
            }
            let to = cap
                .saturating_mul(2)
                .min(e.max_items)
                .max(cap.saturating_add(amount));
            e.grow_to.fetch_max(to, Ordering::SeqCst);
            // Woken with the lock held: a stall is rare.
            let mut woken = Vec::new();
            Self::wake_locked(s, &e, Side::Write, &mut woken);
            woken.into_iter().for_each(std::task::Waker::wake);
            return;
        }
        // Everybody waits to read: find the cycle of waits.
        let cycle = Self::describe_cycle(s);
        self.fail(s, Error::Deadlock { cycle });
    }

    /// Fails the graph with [`Error::Deadlock`] if some blocked nodes each
    /// wait only to read from writers among them (a real deadlock whatever
    /// the other nodes do, an endless source included); `true` if so.
    /// Called with the lock held, by a stall check and by the pool's
    /// watchdog a few times per slice.
    pub(in crate::graph) fn check_read_cycles(&self, s: &mut Sched) -> bool {
        if self.abort.load(Ordering::SeqCst) {
            return false;
        }
        let closed = Self::read_waits_closed(s);
        let Some(start) = closed.iter().position(|&c| c) else {
            return false;
        };
        let (path, end, from) = Self::follow(s, start);
        let cycle = Self::cycle_text(s, &path, from.unwrap_or(0), end);
        self.fail(s, Error::Deadlock { cycle });
        true
    }

    /// [`Runtime::check_read_cycles`] for the nodes node `start`, which has
    /// just blocked on a read, waits on (directly or through others): looks
    /// no further than the first writer that runs or waits to write, which
    /// is almost always the first.
    pub(in crate::graph) fn check_read_cycle_from(&self, s: &mut Sched, start: usize) -> bool {
        let reads_only = |n: usize| {
            s.status(n) == Status::Blocked
                && !s.waits[n].is_empty()
                && s.waits[n].iter().all(|w| w.side == Side::Read)
        };
        let mut seen = vec![start];
        let mut todo = vec![start];
        while let Some(n) = todo.pop() {
            if !reads_only(n) {
                return false;
            }
            for w in &s.waits[n] {
                let writer = s.edges[w.edge].writer_node;
                if !seen.contains(&writer) {
                    seen.push(writer);
                    todo.push(writer);
                }
            }
        }
        // Every node reached waits only to read, from nodes reached.
        self.check_read_cycles(s)
    }

    /// The blocked nodes that wait only to read, each from queues whose
    /// writers are among them: none of them can run again, whatever the
    /// others do (none of them writes, so none is woken, and growth frees
    /// only writers). All `false` if there are none.
    fn read_waits_closed(s: &Sched) -> Vec<bool> {
        let mut closed: Vec<bool> = (0..s.nodes.len())
            .map(|n| {
                s.status(n) == Status::Blocked
                    && !s.waits[n].is_empty()
                    && s.waits[n].iter().all(|w| w.side == Side::Read)
            })
            .collect();
        loop {
            let mut changed = false;
            for n in 0..closed.len() {
                if closed[n]
                    && s.waits[n]
                        .iter()
                        .any(|w| !closed[s.edges[w.edge].writer_node])
                {
                    closed[n] = false;
                    changed = true;
                }
            }
            if !changed {
                return closed;
            }
        }
    }

    /// The waits of `path` from its step `from` on, ending at node `end`
    /// which closes the cycle, as text.
    fn cycle_text(s: &Sched, path: &[(usize, usize, usize)], from: usize, end: usize) -> String {
        let mut out = String::new();
        for w in &path[from..] {
            out += &format!(
                "{} waits for {} items on {}; ",
                s.names[w.0], w.2, s.edges[w.1].label
            );
        }
        out + &format!("{} closes the cycle", s.names[end])
    }

    /// The waits of a stalled graph where every node waits to read, as
    /// text: a cycle of waits where there is one, else the chain that ends
    /// at a node that has returned with a port kept open past its end.
    pub(in crate::graph) fn describe_cycle(s: &Sched) -> String {
        let mut chain = None;
        for start in (0..s.nodes.len()).filter(|&n| s.status(n) == Status::Blocked) {
            let (path, end, cycle) = Self::follow(s, start);
            let text = |from: usize| {
                let mut out = String::new();
                for w in &path[from..] {
                    out += &format!(
                        "{} waits for {} items on {}; ",
                        s.names[w.0], w.2, s.edges[w.1].label
                    );
                }
                out
            };
            match cycle {
                Some(from) => return Self::cycle_text(s, &path, from, end),
                None if chain.is_none() => {
                    let last = path.last().map_or("", |w| s.edges[w.1].label.as_str());
                    chain = Some(
                        text(0)
                            + &format!(
                                "{} has returned with {last} still open (a port kept past its node's end)",
                                s.names[end]
                            ),
                    );
                }
                None => {}
            }
        }
        chain.unwrap_or_default()
    }

    /// Follows the waits from node `start` to the writer each waits on:
    /// the path (node, edge, amount), the node it ends at, and where on the
    /// path the cycle begins if that node is on it.
    fn follow(s: &Sched, start: usize) -> (Vec<(usize, usize, usize)>, usize, Option<usize>) {
        let mut seen = vec![usize::MAX; s.nodes.len()];
        let mut path = Vec::new();
        let mut node = start;
        while seen[node] == usize::MAX {
            seen[node] = path.len();
            let Some(w) = s.waits[node]
                .first()
                .filter(|_| s.status(node) == Status::Blocked)
            else {
                return (path, node, None);
            };
            path.push((node, w.edge, w.amount));
            node = s.edges[w.edge].writer_node;
        }
        (path, node, Some(seen[node]))
    }
}
