//! The runtime of a process network, one concept per file:
//!
//! - `sched.rs`, the node's state: each node's status (running, blocked,
//!   done), its pending waits, its count of resumptions, and the one lock
//!   that guards who waits on what. "Park" means one thing: a node becomes
//!   blocked on its waits (`NodeState::park`).
//! - `wake.rs`, waking: commit (or consume) -> wake -> resume.
//! - `turn.rs`, the executor's accounting: a task's budget in port calls
//!   and in time, and the marks the pool's watchdog reads.
//! - `wait.rs`, the waits: a thread node sleeps on the edge's condition
//!   variable, a task's port future leaves its waker (`BlockOn`), a poll
//!   counts its node blocked once it returns pending (`poll_node`).
//! - `life.rs`, a node's life: run, finish, fail, stop.
//! - `stall.rs`, stalls: a cycle of read waits is a deadlock, else a full
//!   queue grows (Parks' bounded scheduling), else the cycle is reported.
//! - `edge.rs`, the scheduling state of one edge.
//!
//! Lock discipline: one mutex (`Runtime::sched`) guards who waits on what.
//! Nothing called while it is held takes it again: the graph's fixed facts
//! (node names, edge labels) live outside it, a queue's own calls take no
//! runtime lock, and errors are built after it is released. The waits of
//! both sides ([`Runtime::wait_room`], [`Runtime::wait_items`]) are written
//! against [`WriteEnd`] and [`ReadEnd`] so that the `loom` model checks this
//! very code on the queue's cursor protocol. No file of the runtime imports
//! one that imports it back (`scripts/graph-imports.py`).

mod edge;
mod life;
#[cfg(all(test, dmaflow_loom))]
mod loom_tests;
mod sched;
mod stall;
mod turn;
mod wait;
mod wake;

pub(super) use edge::{Edge, Side};
pub(super) use life::{drop_quietly, run_node};
pub(super) use sched::{Runtime, Status};
pub(super) use turn::{Marks, out_of_budget, take_yield, with_marks};
pub(super) use wait::{ReadEnd, WaitError, WriteEnd, as_node, poll_node};
