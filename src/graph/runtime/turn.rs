//! A task's turn on its worker: how long one poll of a task node may run
//! before it gives its worker back, and what the watchdog sees of it.
//!
//! A task yields at its next async port call once its poll has made
//! [`crate::graph::DEFAULT_TASK_BUDGET`] port calls that did not wait (the
//! budget in calls: a task whose queues are always ready lets the others
//! run) or once the poll has run past [`crate::graph::DEFAULT_TASK_SLICE`]
//! (the budget in time: a slow stage, a large FFT or a decoder whose input
//! is always full and whose output is always drained, gives its worker back
//! between its steps). Every async port call a task reaches is marked in
//! its worker's [`Marks`], which the pool's watchdog reads: the hold limit
//! times how long a task has gone without reaching one (a blocking call, a
//! spin), never the length of a poll.
//!
//! Thread-locals, all of this file and all per thread:
//! - `TURN`: the budget of calls left in the present poll, the count of
//!   async port calls this thread has made (a foreign executor's pass over
//!   port futures is told from the next by it, see `wait.rs`), and the
//!   [`Marks`] of the worker that runs on this thread (null off the pool),
//!   and whether the present poll yielded (its worker then looks at the
//!   shared queue first: a task that yields goes behind the others).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::edge::Side;

/// What a worker's watchdog sees of the task it polls: written by the
/// worker's own thread at every async port call, read by the watchdog.
#[derive(Default)]
pub(in crate::graph) struct Marks {
    /// Async port calls (and yields) reached on this worker so far.
    calls: AtomicU64,
    /// The last one: its edge's id times 4, plus 1 for a read, 2 for a
    /// write (0: none yet in this poll).
    last: AtomicU64,
    /// Set by the watchdog when the present poll has run past the slice:
    /// the task yields at its next async port call.
    slice_over: AtomicBool,
}

impl Marks {
    /// The count of async port calls reached so far.
    pub(in crate::graph) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The last async port call reached in the present poll, as
    /// `(edge id, side)`; `None` if the poll has reached none.
    pub(in crate::graph) fn last(&self) -> Option<(usize, Side)> {
        let last = self.last.load(Ordering::Relaxed);
        let side = match last & 3 {
            1 => Side::Read,
            2 => Side::Write,
            _ => return None,
        };
        Some(((last >> 2) as usize, side))
    }

    /// Asks the task polled now to yield at its next async port call.
    pub(in crate::graph) fn end_slice(&self) {
        self.slice_over.store(true, Ordering::Relaxed);
    }
}

/// The per-thread state of a turn (see the module's docs).
struct Turn {
    budget: Cell<u32>,
    calls: Cell<u64>,
    marks: Cell<*const Marks>,
    /// Whether the present poll ended in a yield.
    yielded: Cell<bool>,
}

thread_local! {
    static TURN: Turn = const {
        Turn {
            budget: Cell::new(u32::MAX),
            calls: Cell::new(0),
            marks: Cell::new(std::ptr::null()),
            yielded: Cell::new(false),
        }
    };
}

/// Runs `f` (a worker's loop) with `marks` as this thread's [`Marks`].
pub(in crate::graph) fn with_marks<R>(marks: &Marks, f: impl FnOnce() -> R) -> R {
    struct Restore(*const Marks);
    impl Drop for Restore {
        fn drop(&mut self) {
            TURN.with(|t| t.marks.set(self.0));
        }
    }
    let _restore = Restore(TURN.with(|t| t.marks.replace(marks)));
    f()
}

/// Begins a poll with `budget` port calls (`u32::MAX`: never spent, a
/// thread's own executor): its slice starts now.
pub(super) fn begin_poll(budget: u32) {
    TURN.with(|t| {
        t.budget.set(budget);
        let m = t.marks.get();
        if !m.is_null() {
            // SAFETY: set by `with_marks` from a reference that outlives
            // the worker's loop, and reset when the loop ends.
            let m = unsafe { &*m };
            m.slice_over.store(false, Ordering::Relaxed);
            m.last.store(0, Ordering::Relaxed);
        }
    });
}

/// Notes that the present poll yields its worker.
pub(super) fn note_yield() {
    TURN.with(|t| t.yielded.set(true));
}

/// Whether the poll that just ended yielded its worker (and forgets it).
pub(in crate::graph) fn take_yield() -> bool {
    TURN.with(|t| t.yielded.replace(false))
}

/// The count of async port calls this thread has made.
pub(super) fn calls_on_thread() -> u64 {
    TURN.with(|t| t.calls.get())
}

/// Marks an async port call on `side` of edge `edge` and spends one unit
/// of the poll's budget; `true` when the call is to yield first (no budget
/// left, or the poll has run past its slice). A budget of `u32::MAX` (a
/// thread's own executor) is never spent.
#[inline]
pub(in crate::graph) fn out_of_budget(edge: usize, side: Side) -> bool {
    TURN.with(|t| {
        let calls = t.calls.get().wrapping_add(1);
        t.calls.set(calls);
        let m = t.marks.get();
        let mut over = false;
        if !m.is_null() {
            // SAFETY: as in `begin_poll`.
            let m = unsafe { &*m };
            // Only this thread writes them: plain stores.
            m.calls.store(calls, Ordering::Relaxed);
            let code = match side {
                Side::Read => 1,
                Side::Write => 2,
            };
            m.last.store((edge as u64) << 2 | code, Ordering::Relaxed);
            over = m.slice_over.load(Ordering::Relaxed);
        }
        match t.budget.get() {
            0 => true,
            u32::MAX => over,
            n => {
                t.budget.set(n - 1);
                over
            }
        }
    })
}
