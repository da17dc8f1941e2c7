//! Stalls: when every live node waits, a full queue grows (Parks' bounded
//! scheduling) or the graph fails with the cycle of waits (a real deadlock).

use crate::sync::Ordering;

use super::edge::Side;
use super::sched::{Runtime, Sched, Status};
use crate::graph::Error;

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
        // Writers waiting on full queues: grow the smallest queue by its request.
        let mut best: Option<(usize, usize, usize)> = None; // (capacity, edge, amount)
        for node in 0..s.nodes.len() {
            if s.status(node) != Status::Blocked {
                continue;
            }
            for w in s.waits[node].iter().filter(|w| w.side == Side::Write) {
                let cap = s.edges[w.edge].capacity.load(Ordering::Relaxed);
                if best.is_none_or(|b| cap < b.0) {
                    best = Some((cap, w.edge, w.amount));
                }
            }
        }
        if let Some((cap, edge, amount)) = best {
            let e = s.edges[edge].clone();
            e.grow_to
                .fetch_max(cap.saturating_add(amount), Ordering::SeqCst);
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
                Some(from) => return text(from) + &format!("{} closes the cycle", s.names[end]),
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
