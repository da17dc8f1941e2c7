//! The host's cores and the CPU time its threads use: what a benchmark needs to
//! keep the emulated device off the driver's core and to say what a transfer
//! cost the host.

use std::time::Duration;

use rustix::thread::{CpuSet, Pid, sched_getaffinity, sched_setaffinity};

use super::Error;

fn os(what: &str) -> impl FnOnce(rustix::io::Errno) -> Error + '_ {
    move |e| Error::Io {
        path: what.to_string(),
        source: e.into(),
    }
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`):
/// time it ran, not time it slept or waited to run.
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// CPU time every thread of this process has used so far
/// (`CLOCK_PROCESS_CPUTIME_ID`): the caller's, and that of helper threads a
/// driver runs (a GPU driver's, a waiter's).
pub fn process_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The system-wide monotonic clock (`CLOCK_MONOTONIC`) since an arbitrary
/// start: unlike [`std::time::Instant`], its readings can be compared
/// between processes (one timing a stream's start, another its end).
pub fn monotonic() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The cores a thread (`None`: the caller) may run on, in increasing order.
pub fn allowed_cores(thread: Option<Pid>) -> Result<Vec<usize>, Error> {
    let set = sched_getaffinity(thread).map_err(os("sched_getaffinity"))?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Restricts a thread (`None`: the caller) to `cores`.
pub fn pin(thread: Option<Pid>, cores: &[usize]) -> Result<(), Error> {
    let mut set = CpuSet::new();
    for &c in cores {
        if c >= CpuSet::MAX_CPU {
            return Err(Error::Malformed {
                path: "cpu set".into(),
                reason: format!("core {c} is beyond the {} a cpu set holds", CpuSet::MAX_CPU),
            });
        }
        set.set(c);
    }
    sched_setaffinity(thread, &set).map_err(os("sched_setaffinity"))
}

/// The calling thread's id, as [`pin`] takes it.
pub fn current_thread() -> Pid {
    rustix::thread::gettid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_as_cpu_time_and_sleep_does_not() {
        let t0 = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(30));
        let slept = thread_cpu_time() - t0;
        let t1 = thread_cpu_time();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let worked = thread_cpu_time() - t1;
        assert!(
            slept < Duration::from_millis(10),
            "{slept:?} of CPU while asleep"
        );
        assert!(
            worked > Duration::from_millis(5),
            "{worked:?} of CPU while busy"
        );
    }

    #[test]
    fn a_thread_pinned_to_one_allowed_core_stays_there() {
        let cores = allowed_cores(None).unwrap();
        assert!(!cores.is_empty());
        let last = *cores.last().unwrap();
        std::thread::spawn(move || {
            pin(None, &[last]).unwrap();
            assert_eq!(allowed_cores(None).unwrap(), vec![last]);
            assert_eq!(allowed_cores(Some(current_thread())).unwrap(), vec![last]);
        })
        .join()
        .unwrap();
        // Another thread's pinning left this one alone.
        assert_eq!(allowed_cores(None).unwrap(), cores);
        assert!(pin(None, &[CpuSet::MAX_CPU]).is_err());
    }
}

/// The calling thread's timer slack (how late the kernel may fire its sleeps'
/// timers, 50 us by default) lowered for a while; put back on drop. A guard
/// must be dropped on the thread that made it (it is neither `Send` nor
/// `Sync`).
#[derive(Debug)]
pub struct TimerSlack {
    saved: Option<std::num::NonZeroU64>,
    _thread: std::marker::PhantomData<*const ()>,
}

impl TimerSlack {
    /// Sets the calling thread's timer slack to `slack` (at least 1 ns) until
    /// the guard drops. Where the kernel refuses, sleeps keep the slack they
    /// had.
    pub fn lower(slack: Duration) -> TimerSlack {
        use rustix::thread::{current_timer_slack, set_current_timer_slack};
        let saved = current_timer_slack()
            .ok()
            .and_then(std::num::NonZeroU64::new);
        let ns = std::num::NonZeroU64::new(slack.as_nanos().clamp(1, u64::MAX as u128) as u64);
        let changed = saved.is_some() && set_current_timer_slack(ns).is_ok();
        TimerSlack {
            saved: if changed { saved } else { None },
            _thread: std::marker::PhantomData,
        }
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        if let Some(s) = self.saved {
            let _ = rustix::thread::set_current_timer_slack(Some(s));
        }
    }
}
