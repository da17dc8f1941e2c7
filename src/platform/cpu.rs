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

/// CPU time another thread of this process (`thread`, a thread id) has used
/// so far: its thread CPU clock (`clock_gettime` with the clock id
/// `pthread_getcpuclockid` gives, made from the id as the kernel defines
/// it), which counts a thread running right now up to the moment of the
/// read. For threads a library runs on its own, such as the emulated
/// fabric's device thread, whose cost is reported apart from the caller's.
/// A thread that has ended, or one of another process, is an error.
pub fn cpu_time_of(thread: Pid) -> Result<Duration, Error> {
    // The kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): the id
    // inverted and shifted, CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2).
    let clock = ((!thread.as_raw_nonzero().get()) << 3) | 6;
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call;
    // an unknown clock id is reported by the return value, not undefined.
    let rc = unsafe { libc::clock_gettime(clock as libc::clockid_t, &mut t) };
    if rc != 0 {
        return Err(Error::Io {
            path: format!("CPU clock of thread {}", thread.as_raw_nonzero()),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    ))
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
    fn another_threads_cpu_time_counts_its_work_not_its_sleep() {
        use std::sync::mpsc;
        let (tid_tx, tid_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<bool>();
        let worker = std::thread::spawn(move || {
            tid_tx.send(current_thread()).unwrap();
            while let Ok(busy) = go_rx.recv() {
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(30) {
                    if busy {
                        std::hint::black_box(start.elapsed());
                    } else {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                tid_tx.send(current_thread()).unwrap();
            }
        });
        let tid = tid_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let spent = |busy| {
            let before = cpu_time_of(tid).unwrap();
            go_tx.send(busy).unwrap();
            tid_rx.recv_timeout(Duration::from_secs(5)).unwrap();
            cpu_time_of(tid).unwrap() - before
        };
        let slept = spent(false);
        let worked = spent(true);
        drop(go_tx);
        worker.join().unwrap();
        assert!(slept < Duration::from_millis(10), "{slept:?} while asleep");
        assert!(worked > Duration::from_millis(5), "{worked:?} while busy");
        // A thread that is gone has no CPU time to read: an error, no panic.
        // `join` returns once the kernel has cleared the thread's id word,
        // a moment before it unhashes the id: look again until then.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while cpu_time_of(tid).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "an ended thread's CPU clock still reads after 5 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
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

/// Lowers the calling thread's timer slack to 1 us, once per thread (later
/// calls make no system call), and leaves it so: its timed sleeps then end
/// within microseconds of their time instead of up to 50 us late. Where the
/// kernel refuses, sleeps keep the slack they had.
pub fn keep_timer_slack_low() {
    thread_local!(static LOW: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    LOW.with(|low| {
        if !low.replace(true) {
            let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1000));
        }
    });
}

/// What the kernel granted a thread asked for a scheduling slice
/// ([`request_slice`]) or real-time priority ([`request_fifo`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granted {
    /// `SCHED_OTHER` (EEVDF) with this slice: the thread is picked sooner
    /// after a wake-up and runs at most this long before others get the core
    /// (Linux 6.12+, no privilege needed).
    Slice(Duration),
    /// `SCHED_FIFO` at this priority: the thread runs whenever it is ready.
    Fifo(u32),
    /// Nothing changed, and why (the kernel does not offer it, or refused).
    NotGranted(String),
}

impl std::fmt::Display for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Granted::Slice(d) => write!(f, "EEVDF slice {:.2} ms", d.as_secs_f64() * 1e3),
            Granted::Fifo(p) => write!(f, "SCHED_FIFO priority {p}"),
            Granted::NotGranted(why) => f.write_str(why),
        }
    }
}

/// `struct sched_attr` of `sched_setattr(2)` (SCHED_ATTR_SIZE_VER1, 56 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

const SCHED_OTHER: u32 = 0;
const SCHED_FIFO: u32 = 1;

fn tid_of(thread: Option<Pid>) -> libc::c_long {
    Pid::as_raw(thread) as libc::c_long
}

fn get_attr(thread: Option<Pid>) -> Result<SchedAttr, rustix::io::Errno> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a live, writable `struct sched_attr` of the size
    // passed; the kernel writes at most that many bytes into it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid_of(thread),
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    if r != 0 {
        return Err(rustix::io::Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(attr)
}

fn set_attr(thread: Option<Pid>, attr: &SchedAttr) -> Result<(), rustix::io::Errno> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        ..*attr
    };
    // SAFETY: `attr` is a live `struct sched_attr` whose `size` field says
    // how many bytes the kernel may read; the call changes only the
    // scheduling of `thread` (of this process when given by `gettid`).
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid_of(thread),
            &attr as *const SchedAttr,
            0 as libc::c_uint,
        )
    };
    if r != 0 {
        return Err(rustix::io::Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(())
}

/// Asks for a short scheduling slice for a thread (`None`: the caller):
/// `SCHED_OTHER` with `sched_runtime = slice` through `sched_setattr`, which
/// EEVDF (Linux 6.12+) honours without privilege, clamped to 0.1-100 ms. A
/// thread with a short slice waits less for a core after a wake-up, so a
/// stream's driver beside a busy program gets back to its ring sooner. The
/// thread's nice level is kept. Returns what the kernel reports back: the
/// slice it set, or [`Granted::NotGranted`] where it keeps none (kernels
/// before 6.12 accept the call and ignore the runtime).
pub fn request_slice(thread: Option<Pid>, slice: Duration) -> Granted {
    let now = match get_attr(thread) {
        Ok(a) => a,
        Err(e) => return Granted::NotGranted(format!("sched_getattr: {e}")),
    };
    if now.sched_policy != SCHED_OTHER {
        return Granted::NotGranted(format!(
            "the thread runs under policy {}, not SCHED_OTHER; left as it is",
            now.sched_policy
        ));
    }
    let want = SchedAttr {
        sched_policy: SCHED_OTHER,
        sched_flags: 0,
        sched_runtime: slice.as_nanos().min(u64::MAX as u128) as u64,
        ..now
    };
    if let Err(e) = set_attr(thread, &want) {
        return Granted::NotGranted(format!("sched_setattr refused a slice: {e}"));
    }
    match get_attr(thread) {
        Ok(a) if a.sched_runtime > 0 => Granted::Slice(Duration::from_nanos(a.sched_runtime)),
        Ok(_) => Granted::NotGranted(
            "a scheduling slice is not offered by this kernel (EEVDF slices need Linux 6.12+)"
                .into(),
        ),
        Err(e) => Granted::NotGranted(format!("sched_getattr: {e}")),
    }
}

/// Asks for `SCHED_FIFO` at `priority` (1-99) for a thread (`None`: the
/// caller), where this process is permitted (CAP_SYS_NICE or an RLIMIT_RTPRIO);
/// [`Granted::NotGranted`] with the kernel's answer where not. A real-time
/// thread that spins keeps its core from every ordinary thread: use it for a
/// driver that sleeps between completions.
pub fn request_fifo(thread: Option<Pid>, priority: u32) -> Granted {
    if !(1..=99).contains(&priority) {
        return Granted::NotGranted(format!("SCHED_FIFO priority {priority} is not 1-99"));
    }
    let attr = SchedAttr {
        sched_policy: SCHED_FIFO,
        sched_priority: priority,
        ..SchedAttr::default()
    };
    match set_attr(thread, &attr) {
        Ok(()) => Granted::Fifo(priority),
        Err(e) => Granted::NotGranted(format!("SCHED_FIFO not permitted: {e}")),
    }
}

/// Puts a thread (`None`: the caller) back to `SCHED_OTHER` with the
/// kernel's default slice, its nice level kept.
pub fn default_scheduling(thread: Option<Pid>) -> Result<(), Error> {
    let nice = get_attr(thread).map_or(0, |a| {
        if a.sched_policy == SCHED_OTHER {
            a.sched_nice
        } else {
            0
        }
    });
    let attr = SchedAttr {
        sched_policy: SCHED_OTHER,
        sched_nice: nice,
        ..SchedAttr::default()
    };
    set_attr(thread, &attr).map_err(os("sched_setattr"))
}

#[cfg(test)]
mod sched_tests {
    use super::*;

    /// A slice asked for is the one the kernel reports back, or the kernel
    /// says it keeps none; putting the default back leaves no slice behind.
    /// Runs on a thread of its own, so the test harness's threads keep theirs.
    #[test]
    fn a_requested_slice_is_granted_as_reported_or_refused() {
        std::thread::spawn(|| {
            let g = request_slice(None, Duration::from_micros(300));
            eprintln!("granted: {g}");
            match &g {
                Granted::Slice(d) => {
                    assert_eq!(*d, Duration::from_micros(300), "{g}");
                    let a = get_attr(None).unwrap();
                    assert_eq!(a.sched_runtime, 300_000);
                    // Below EEVDF's floor: clamped to 0.1 ms, and said so.
                    let g = request_slice(None, Duration::from_micros(1));
                    assert_eq!(g, Granted::Slice(Duration::from_micros(100)));
                }
                Granted::NotGranted(why) => assert!(!why.is_empty()),
                Granted::Fifo(_) => panic!("a slice request changed the policy: {g}"),
            }
            default_scheduling(None).unwrap();
            assert_eq!(get_attr(None).unwrap().sched_policy, SCHED_OTHER);
            assert!(matches!(
                request_fifo(None, 0),
                Granted::NotGranted(why) if why.contains("1-99")
            ));
        })
        .join()
        .unwrap();
    }
}
