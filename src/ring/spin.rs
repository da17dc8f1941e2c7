//! How long a waiter spins before it gives its core up: as long as giving it
//! up would cost.
//!
//! A waiter that finds the queue empty (or full) can look again at once
//! (spin), hand its core to another thread for a moment (`sched_yield`), or
//! sleep until woken. A yield costs a system call, a sleep a system call on
//! each side and a wake-up. Spinning first for as long as the next step
//! costs bounds what a wait can waste: if the other side comes back within
//! that time, the waiter saw it at once; if not, the spin cost no more than
//! the yield or sleep it delayed (the classic 2-competitive spin-then-block
//! rule). Both costs are measured once per process, the first time a wait
//! needs them ([`Calibration::get`]), on this machine: a fixed count of
//! pause instructions means 30 ns on one CPU and 4 us on another.
//!
//! [`Backoff`] is that schedule for any waiter: the queue's own waits
//! ([`Wait::Yield`](super::Wait::Yield) and [`Wait::Block`](super::Wait::Block)),
//! the queue shared between processes ([`super::shm`]), the process
//! network's workers, and loops written around a `try_` call.

#[cfg(not(dmaflow_loom))]
use std::sync::OnceLock;
use std::time::Duration;
#[cfg(not(dmaflow_loom))]
use std::time::Instant;

use crate::sync::{spin_loop, yield_now};

/// The costs a waiter weighs, measured on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// What one `sched_yield` costs (the median of a few, with nothing else
    /// asking for the core).
    pub yield_cost: Duration,
    /// What a sleeping thread costs the side that wakes it: the median
    /// time from an `unpark` (a futex wake on Linux, the path a
    /// [`Wait::Block`](super::Wait::Block) sleeper takes) of a thread that
    /// has been asleep long enough for its core to go idle until that
    /// thread's first store is seen by the waker, spinning. It holds the
    /// waker's system call, the idle core's wake-up and the scheduler's
    /// hand-over: on a virtual machine tens of microseconds, where a
    /// round trip between two threads that never let their cores idle
    /// reads one.
    pub wake_cost: Duration,
}

/// The shortest spin budget: below it, a clock read is a large share of it.
const MIN_SPIN: Duration = Duration::from_nanos(200);
/// The longest a waiter that will sleep keeps its core first, however its
/// waits went ([`SleepBudget`]).
const LONGEST_BUDGET: Duration = Duration::from_micros(50);
/// A wait that ended in a sleep after less than this (spin, yields, sleep and
/// wake-up together) was short enough that keeping the core would have
/// served it: the side keeps its core longer next time ([`SleepBudget`]).
const SHORT_SLEEP: Duration = Duration::from_micros(100);
/// The longest: a machine so loaded that a yield or wake-up measures longer
/// is better served by giving the core up.
#[cfg(not(dmaflow_loom))]
const MAX_SPIN: Duration = Duration::from_micros(50);

impl Calibration {
    /// The costs, measured the first time any waiter asks (about a
    /// millisecond, once per process) and the same for every
    /// waiter after.
    #[cfg(not(dmaflow_loom))]
    pub fn get() -> Calibration {
        static CALIBRATION: OnceLock<Calibration> = OnceLock::new();
        *CALIBRATION.get_or_init(Calibration::measure)
    }

    /// Under the model checker: fixed costs (nothing is timed there).
    #[cfg(dmaflow_loom)]
    pub fn get() -> Calibration {
        Calibration {
            yield_cost: MIN_SPIN,
            wake_cost: MIN_SPIN,
        }
    }

    /// Measures both costs now (each bounded to what a spin may last).
    #[cfg(not(dmaflow_loom))]
    pub fn measure() -> Calibration {
        Calibration {
            yield_cost: clamp(yield_cost()),
            wake_cost: clamp(wake_cost().unwrap_or(MAX_SPIN)),
        }
    }

    /// How long a waiter spins before a `sched_yield`.
    pub fn spin_before_yield(&self) -> Duration {
        self.yield_cost
    }

    /// How long a waiter spins before it sleeps: a yield is cheaper than a
    /// sleep, so never less than before a yield.
    pub fn spin_before_sleep(&self) -> Duration {
        self.wake_cost.max(self.yield_cost)
    }
}

#[cfg(not(dmaflow_loom))]
fn clamp(d: Duration) -> Duration {
    d.clamp(MIN_SPIN, MAX_SPIN)
}

/// The median of `samples`.
#[cfg(not(dmaflow_loom))]
fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Median time of one `sched_yield`.
#[cfg(not(dmaflow_loom))]
fn yield_cost() -> Duration {
    let samples = (0..31)
        .map(|_| {
            let t = Instant::now();
            std::thread::yield_now();
            t.elapsed()
        })
        .collect();
    median(samples)
}

/// The median time from waking a thread that sleeps (and whose core has
/// had time to go idle) until this thread, spinning, sees it run; `None` if
/// no thread can be started.
///
/// A round trip of two threads parking and unparking each other in turn
/// measures less: neither core ever idles, and on a virtual machine waking
/// an idle virtual CPU (an interrupt through the hypervisor) is most of what
/// a sleep costs a queue whose two sides run on two cores.
#[cfg(not(dmaflow_loom))]
fn wake_cost() -> Option<Duration> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    const ROUNDS: u32 = 9;
    /// How long the sleeper sleeps before each wake-up: long enough for its
    /// core to leave the scheduler's idle polling.
    const ASLEEP: Duration = Duration::from_micros(100);
    /// A wake-up not seen by then counts as this long (the spin's bound).
    const GIVE_UP: Duration = Duration::from_millis(5);
    let turn = Arc::new(AtomicU32::new(0));
    let t = turn.clone();
    let peer = std::thread::Builder::new()
        .name("dmaflow-calibrate".into())
        .spawn(move || {
            for k in 0..ROUNDS {
                // Wait for the ball (2k + 1), hand it back (2k + 2).
                while t.load(Ordering::Acquire) != 2 * k + 1 {
                    std::thread::park();
                }
                t.store(2 * k + 2, Ordering::Release);
            }
        })
        .ok()?;
    let mut samples = Vec::with_capacity(ROUNDS as usize);
    for k in 0..ROUNDS {
        std::thread::sleep(ASLEEP);
        let t0 = Instant::now();
        turn.store(2 * k + 1, Ordering::Release);
        peer.thread().unpark();
        while turn.load(Ordering::Acquire) != 2 * k + 2 {
            if t0.elapsed() >= GIVE_UP {
                // Let the peer run here (one core, or a loaded machine).
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        samples.push(t0.elapsed().min(GIVE_UP));
    }
    peer.join().ok()?;
    Some(median(samples))
}

/// How long one side of a queue that sleeps ([`Wait::Block`](super::Wait::Block))
/// keeps its core before it sleeps, learned from its own waits.
///
/// A stream's waits come back at the pace of the other side's work, so the
/// last few waits say how long the next will last. A wait that ends without
/// a sleep after `t` sets the budget to `2 t` (the spin-then-block rule's
/// bound: the spin wastes at most as much as the wait it covers) or three
/// quarters of the old budget, whichever is longer: one short wait does not
/// undo what many longer ones taught. A wait that ended in a sleep after less
/// than 100 us in all, sleep and wake-up included, was one a longer spin
/// would have covered, and the sleep put a futex wake (and the other side's
/// lock) on the other side's publish and a wake-up on this one: the budget
/// doubles. A longer one means the other side is idle: the budget falls back
/// to a wake-up's cost ([`Calibration::spin_before_sleep`]). The budget
/// stays between that cost and 50 us.
///
/// Measuring only the last wait is not enough: a wait that ends in a sleep
/// lasts the wake-up too, so once one wait outlasted the budget, every later
/// one would sleep and read too long to teach a longer budget.
///
/// ```
/// use std::time::Duration;
/// use dmaflow::ring::{Backoff, SleepBudget};
/// let mut budget = SleepBudget::new();
/// let wake_up = budget.get();
/// // A 30 us wait that ended without a sleep: the budget covers it
/// // (up to the 50 us bound, never below a wake-up's cost).
/// budget.learn(Duration::from_micros(30), false);
/// assert!(budget.get() >= Duration::from_micros(50));
/// assert!(budget.get() >= wake_up);
/// // A long wait that ended in a sleep: the other side is idle.
/// budget.learn(Duration::from_millis(1), true);
/// assert_eq!(budget.get(), wake_up);
/// let _backoff = Backoff::before_sleep_within(&budget);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SleepBudget {
    after: Duration,
}

impl Default for SleepBudget {
    fn default() -> Self {
        Self::new()
    }
}

impl SleepBudget {
    /// Nothing learned yet: a wake-up's cost (measured at the first wait,
    /// not here).
    pub const fn new() -> Self {
        SleepBudget {
            after: Duration::ZERO,
        }
    }

    /// How long from the start of a wait this side keeps its core.
    pub fn get(&self) -> Duration {
        self.after.max(Calibration::get().spin_before_sleep())
    }

    /// Learns from a wait that lasted `waited` in all and ended in a sleep
    /// (`slept`) or not.
    pub fn learn(&mut self, waited: Duration, slept: bool) {
        let floor = Calibration::get().spin_before_sleep();
        let now = self.after.max(floor);
        let after = if !slept {
            (waited * 2).max(now - now / 4)
        } else if waited < SHORT_SLEEP {
            now * 2
        } else {
            floor
        };
        self.after = after.clamp(floor, LONGEST_BUDGET.max(floor));
    }
}

/// Pause instructions in the longest step of a spin: a look at the other
/// side's cursor at most this often, so that the waiter does not keep
/// stealing the cache line while it is being written.
const LONGEST_STEP: u32 = 64;

/// A waiter's schedule: spins in steps of 1, 2, 4 ... 64 pause instructions
/// for as long as its budget (a yield's cost, see [`Calibration`]) and then
/// yields on every [`snooze`](Self::snooze); a waiter that will sleep
/// ([`before_sleep`](Self::before_sleep)) yields only until a wake-up's cost
/// (or what the side learned, [`before_sleep_within`](Self::before_sleep_within))
/// has passed.
/// The caller looks at what it waits for between two calls.
///
/// ```
/// # use std::sync::atomic::{AtomicBool, Ordering};
/// use dmaflow::ring::Backoff;
/// let flag = AtomicBool::new(true);
/// let mut backoff = Backoff::new();
/// while !flag.load(Ordering::Acquire) {
///     backoff.snooze();
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    step: u32,
    #[cfg_attr(dmaflow_loom, allow(dead_code))]
    budget: Duration,
    /// How long from the start of the wait a waiter that will sleep spins
    /// and yields before it sleeps ([`before_sleep`](Self::before_sleep)).
    #[cfg_attr(dmaflow_loom, allow(dead_code))]
    sleep_after: Duration,
    /// When spinning began (read once the first short steps have passed:
    /// a wait that ends in them reads no clock).
    #[cfg(not(dmaflow_loom))]
    since: Option<Instant>,
    spun_out: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// A waiter that spins as long as a `sched_yield` costs, then yields.
    pub fn new() -> Self {
        Self::spinning_for(Calibration::get().spin_before_yield())
    }

    /// A waiter that will sleep: it spins as long as a `sched_yield`
    /// costs, then yields until as long as a sleep and wake-up cost has
    /// passed since the wait began, then (the caller decides) sleeps; see
    /// [`snooze_before_sleep`](Self::snooze_before_sleep).
    pub fn before_sleep() -> Self {
        let c = Calibration::get();
        let mut b = Self::spinning_for(c.spin_before_yield());
        b.sleep_after = c.spin_before_sleep();
        b
    }

    /// A waiter that will sleep once `budget` (what this side has learned
    /// of its waits, see [`SleepBudget`]) has passed since the wait began;
    /// never sooner than [`before_sleep`](Self::before_sleep) would.
    pub fn before_sleep_within(budget: &SleepBudget) -> Self {
        let mut b = Self::before_sleep();
        b.sleep_after = b.sleep_after.max(budget.get());
        b
    }

    /// A waiter that spins for `budget`.
    pub fn spinning_for(budget: Duration) -> Self {
        Backoff {
            step: 0,
            budget,
            sleep_after: budget,
            #[cfg(not(dmaflow_loom))]
            since: None,
            spun_out: false,
        }
    }

    /// One step of the spin: `true` while the spin lasts (the caller looks
    /// again), `false` once its budget is spent (the caller yields or
    /// sleeps; every later call is `false` at once, until
    /// [`reset`](Self::reset)).
    #[inline]
    pub fn spin(&mut self) -> bool {
        if self.spun_out {
            return false;
        }
        for _ in 0..(1u32 << self.step).min(LONGEST_STEP) {
            spin_loop();
        }
        self.step = self.step.saturating_add(1);
        self.spun_out = self.budget_spent();
        true
    }

    /// Spins without end: the steps stay at the longest ([`Wait::Spin`](super::Wait::Spin)).
    #[inline]
    pub fn spin_forever(&mut self) {
        for _ in 0..(1u32 << self.step.min(2)) {
            spin_loop();
        }
        self.step = self.step.saturating_add(1);
    }

    #[cfg(not(dmaflow_loom))]
    fn budget_spent(&mut self) -> bool {
        // The first steps take nanoseconds: no clock for them.
        if self.step < 4 {
            return false;
        }
        self.since.get_or_insert_with(Instant::now).elapsed() >= self.budget
    }

    /// Under the model checker: one step of spinning, then the wait's
    /// strategy (so the model explores the yield and the sleep).
    #[cfg(dmaflow_loom)]
    fn budget_spent(&mut self) -> bool {
        true
    }

    /// One wait: a step of the spin while it lasts, then a `sched_yield`.
    #[inline]
    pub fn snooze(&mut self) {
        if !self.spin() {
            yield_now();
        }
    }

    /// One wait of a waiter that will sleep: a step of the spin while it
    /// lasts, then a `sched_yield` while the time before sleeping lasts
    /// (`true`: the caller looks again); `false` once that time is spent
    /// (the caller sleeps).
    #[inline]
    pub fn snooze_before_sleep(&mut self) -> bool {
        if self.spin() {
            return true;
        }
        if self.sleep_due() {
            return false;
        }
        yield_now();
        true
    }

    /// Whether a waiter that will sleep has spun and yielded long enough.
    #[cfg(not(dmaflow_loom))]
    fn sleep_due(&mut self) -> bool {
        self.since.get_or_insert_with(Instant::now).elapsed() >= self.sleep_after
    }

    /// Under the model checker: straight to the sleep once the spin is
    /// over (the model explores the sleep, and a yield changes nothing in
    /// the protocol).
    #[cfg(dmaflow_loom)]
    fn sleep_due(&mut self) -> bool {
        true
    }

    /// How long the wait has lasted, counted from the end of its first
    /// short steps (which read no clock: zero for a wait that ended in
    /// them, and at most a few dozen pause instructions short otherwise).
    pub fn waited(&self) -> Duration {
        #[cfg(not(dmaflow_loom))]
        {
            self.since.map_or(Duration::ZERO, |t| t.elapsed())
        }
        #[cfg(dmaflow_loom)]
        {
            Duration::ZERO
        }
    }

    /// Whether the spin is over (the waiter now yields or sleeps).
    pub fn is_spun_out(&self) -> bool {
        self.spun_out
    }

    /// Back to the start of the spin, after progress.
    pub fn reset(&mut self) {
        self.step = 0;
        self.spun_out = false;
        #[cfg(not(dmaflow_loom))]
        {
            self.since = None;
        }
    }
}

#[cfg(all(test, not(dmaflow_loom)))]
mod tests {
    use super::*;

    #[test]
    fn calibration_is_measured_once_and_bounded() {
        let c = Calibration::get();
        assert_eq!(c, Calibration::get());
        for d in [c.yield_cost, c.wake_cost] {
            assert!((MIN_SPIN..=MAX_SPIN).contains(&d), "{c:?}");
        }
        assert!(c.spin_before_sleep() >= c.spin_before_yield());
    }

    #[test]
    fn a_spin_ends_after_its_budget_and_not_before() {
        let budget = Duration::from_micros(20);
        let mut b = Backoff::spinning_for(budget);
        let t = Instant::now();
        let mut steps = 0;
        while b.spin() {
            steps += 1;
            assert!(steps < 10_000_000, "the spin never ends");
        }
        assert!(t.elapsed() >= budget);
        assert!(b.is_spun_out() && !b.spin());
        b.reset();
        assert!(!b.is_spun_out() && b.spin());
    }

    #[test]
    fn a_sleep_budget_grows_after_short_sleeps_and_falls_back_after_long_ones() {
        let floor = Calibration::get().spin_before_sleep();
        let mut b = SleepBudget::new();
        assert_eq!(b.get(), floor);
        // Waits that slept yet came back soon: the budget grows to its bound
        // although each of them read longer than the budget it had.
        for _ in 0..16 {
            b.learn(Duration::from_micros(60), true);
        }
        assert_eq!(b.get(), LONGEST_BUDGET.max(floor));
        // A wait the spin covered does not undo that at once ...
        b.learn(Duration::from_nanos(100), false);
        assert!(b.get() >= LONGEST_BUDGET.max(floor) * 3 / 4, "{b:?}");
        // ... many do, down to twice what they last (or the floor).
        for _ in 0..64 {
            b.learn(Duration::from_micros(4), false);
        }
        assert_eq!(
            b.get(),
            Duration::from_micros(8).clamp(floor, LONGEST_BUDGET.max(floor))
        );
        // An idle other side: straight back to a wake-up's cost.
        b.learn(Duration::from_millis(2), true);
        assert_eq!(b.get(), floor);
        // A descheduled wait that did not sleep never lifts it past the bound.
        b.learn(Duration::from_millis(2), false);
        assert_eq!(b.get(), LONGEST_BUDGET.max(floor));
    }

    #[test]
    fn a_waiter_within_a_budget_keeps_its_core_that_long() {
        let mut budget = SleepBudget::new();
        for _ in 0..16 {
            budget.learn(Duration::from_micros(60), true);
        }
        let mut b = Backoff::before_sleep_within(&budget);
        let t = Instant::now();
        while b.snooze_before_sleep() {
            assert!(t.elapsed() < Duration::from_secs(5), "the wait never ends");
        }
        assert!(t.elapsed() >= budget.get(), "{budget:?}");
    }

    #[test]
    fn a_wait_before_sleep_spins_then_yields_until_a_wake_up_has_passed() {
        let c = Calibration::get();
        let mut b = Backoff::before_sleep();
        let t = Instant::now();
        let (mut spins, mut yields) = (0u64, 0u64);
        while b.snooze_before_sleep() {
            if b.is_spun_out() {
                yields += 1;
            } else {
                spins += 1;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "the wait never ends");
        }
        assert!(t.elapsed() >= c.spin_before_sleep(), "{c:?}");
        assert!(spins > 0);
        // Spinning stops after a yield's cost: if a wake-up costs more
        // than twice that, some of the wait was spent yielding.
        if c.wake_cost > 2 * c.yield_cost + Duration::from_micros(10) {
            assert!(yields > 0, "{c:?}: {spins} spins, no yield");
        }
        assert!(!b.snooze_before_sleep());
    }
}
