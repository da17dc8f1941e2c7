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

mod edge;
#[cfg(all(test, dmaflow_loom))]
mod loom_tests;
mod sched;
mod stall;
mod turn;
mod wait;

pub(super) use edge::{Edge, Side};
pub(super) use sched::{Runtime, Status, drop_quietly, run_node};
pub(super) use turn::{Marks, out_of_budget, take_yield, with_marks};
pub(super) use wait::{ReadEnd, WaitError, WriteEnd, as_node, poll_node};
