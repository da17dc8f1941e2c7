//! Scheduled polling's pause between two reads of a channel's DMASR.
//!
//! Paper 002's "user-level scheduled" driver polls the engine but leaves the
//! core to other work meanwhile. `sched_yield` does that only on an idle
//! core: beside a CPU-bound thread on the same core it hands over a whole time
//! slice (milliseconds), so a 64-byte transfer would wait as long as a large
//! one. A [`Pause`] spins for [`SPIN`] (a transfer that ends within it costs
//! no system call), then sleeps with the thread's timer slack lowered to
//! [`SLACK`] while the wait lasts: slices of an eighth of the time waited so
//! far, at least [`SLICE_MIN`] and at most [`SLICE_MAX`]. A completion is then
//! seen at most about an eighth late (and [`SLICE_MIN`] plus a wake-up for
//! short waits) whatever else shares the core, a long wait wakes a few dozen
//! times rather than once per slice, and the core is the others' in between.

use std::time::{Duration, Instant};

use crate::platform::cpu::TimerSlack;

/// How long a wait spins before it sleeps.
pub const SPIN: Duration = Duration::from_micros(5);
/// The shortest sleep between two reads.
pub const SLICE_MIN: Duration = Duration::from_micros(10);
/// The longest sleep between two reads.
pub const SLICE_MAX: Duration = Duration::from_millis(1);
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

    /// Pauses before the next read: a spin hint for the first [`SPIN`], then
    /// a sleep of [`Pause::slice`].
    pub fn pause(&mut self) {
        let waited = self.start.elapsed();
        if waited < SPIN {
            std::hint::spin_loop();
            return;
        }
        self.slack.get_or_insert_with(|| TimerSlack::lower(SLACK));
        std::thread::sleep(Self::slice(waited));
    }

    /// The sleep after `waited`: an eighth of it, within
    /// [`SLICE_MIN`]..=[`SLICE_MAX`].
    pub fn slice(waited: Duration) -> Duration {
        (waited / 8).clamp(SLICE_MIN, SLICE_MAX)
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

    #[test]
    fn slices_grow_with_the_wait_within_their_bounds() {
        let us = Duration::from_micros;
        assert_eq!(Pause::slice(us(6)), us(10));
        assert_eq!(Pause::slice(us(800)), us(100));
        assert_eq!(Pause::slice(Duration::from_secs(1)), us(1000));
    }
}
