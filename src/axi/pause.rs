//! Scheduled polling's pause between two reads of a channel's DMASR.
//!
//! Paper 002's "user-level scheduled" driver polls the engine but leaves the
//! core to other work meanwhile. `sched_yield` does that only on an idle
//! core: beside a CPU-bound thread on the same core it hands over a whole time
//! slice (milliseconds), so a 64-byte transfer would wait as long as a large
//! one. A [`Pause`] spins for [`SPIN`] (a transfer that ends within it costs
//! no system call), then sleeps in slices of [`SLICE`] with the thread's timer
//! slack lowered to [`SLACK`] while the wait lasts, so a completion is seen
//! within about a slice and a wake-up whatever else shares the core, and the
//! core is the others' in between.

use std::time::{Duration, Instant};

use crate::platform::cpu::TimerSlack;

/// How long a wait spins before it sleeps.
pub const SPIN: Duration = Duration::from_micros(5);
/// The sleep between two reads once the wait sleeps.
pub const SLICE: Duration = Duration::from_micros(10);
/// The timer slack while the wait sleeps (the default, 50 us, would add up
/// to that much to every slice).
pub const SLACK: Duration = Duration::from_micros(1);

/// One wait's pauses between reads.
#[derive(Debug)]
pub struct Pause {
    start: Instant,
    slack: Option<TimerSlack>,
}

impl Pause {
    /// A wait that starts now.
    pub fn new() -> Self {
        Pause {
            start: Instant::now(),
            slack: None,
        }
    }

    /// Pauses before the next read: a spin hint for the first [`SPIN`], a
    /// sleep of [`SLICE`] after.
    pub fn pause(&mut self) {
        if self.start.elapsed() < SPIN {
            std::hint::spin_loop();
            return;
        }
        self.slack.get_or_insert_with(|| TimerSlack::lower(SLACK));
        std::thread::sleep(SLICE);
    }
}

impl Default for Pause {
    fn default() -> Self {
        Pause::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_sleeps_after_its_spin_and_gives_the_slack_back() {
        let before = rustix::thread::current_timer_slack().unwrap();
        let mut p = Pause::new();
        std::thread::sleep(SPIN);
        p.pause();
        assert_eq!(
            rustix::thread::current_timer_slack().unwrap(),
            SLACK.as_nanos() as u64
        );
        drop(p);
        assert_eq!(rustix::thread::current_timer_slack().unwrap(), before);
    }
}
