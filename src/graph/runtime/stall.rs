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

    pub(in crate::graph) fn describe_cycle(s: &Sched) -> String {
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
