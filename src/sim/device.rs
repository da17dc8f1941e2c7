//! The device thread: runs the fabric's steps while there is work, spins
//! briefly, then yields, then sleeps when idle, so it does not starve the host.
//! A short direct-mode transfer may instead be stepped by the thread whose
//! LENGTH write started it ([`Shared::run_now`]), when the fabric is set to.

use std::sync::atomic::Ordering;
use std::sync::{PoisonError, TryLockError};
use std::time::{Duration, Instant};

use super::state::*;

/// How long an idle device thread spins watching for work, then yields the CPU
/// between looks until it sleeps.
const IDLE_SPIN: Duration = Duration::from_micros(500);
const IDLE_YIELD: Duration = Duration::from_millis(2);

/// The longest a thread stepping a short transfer itself spins for the
/// modelled link, or for the device thread to let go of the fabric before
/// it yields its core while waiting on ([`Shared::run_now`]).
const PROMPT_WAIT: Duration = Duration::from_micros(20);

/// The longest that thread waits for the device thread to let go of the
/// fabric: a device step is microseconds on the host, a hundred times that
/// on an emulated CPU (qemu), and the device thread woken by the doorbell
/// may be at this very transfer.
const PROMPT_LOCK_WAIT: Duration = Duration::from_millis(5);

/// Spins until `t` or until new work is posted.
fn spin_until(s: &Shared, t: Instant) {
    let seen = s.posted.load(Ordering::Acquire);
    while Instant::now() < t && s.posted.load(Ordering::Acquire) == seen {
        std::hint::spin_loop();
    }
}

pub(super) fn device_loop(s: &Shared) {
    let mut idle_since = Instant::now();
    loop {
        // Read before looking for work, so work posted after the look is seen.
        let seen = s.posted.load(Ordering::SeqCst);
        let mut st = lock(&s.state);
        if st.stop {
            return;
        }
        if s.busy(&st) {
            if let Some(d) = st.faults.stall.take() {
                // The transfer in progress takes `d` longer: a halt or reset asked
                // for meanwhile takes effect once it has ended (and written its
                // data), as PG021 describes.
                st.in_beat = true;
                drop(st);
                std::thread::sleep(d);
                let mut st = lock(&s.state);
                s.step(&mut st);
                s.end_beat(&mut st);
                continue;
            }
            let wait = s.step(&mut st);
            // Wait for the stream with the lock released, so register writes are
            // never held up by a clocked transfer.
            drop(st);
            if let Some(d) = wait {
                spin_until(s, Instant::now() + d.min(Duration::from_micros(200)));
            }
            idle_since = Instant::now();
            continue;
        }
        if idle_since.elapsed() < IDLE_YIELD {
            // Watch for posted work without the lock: spin a little, then yield
            // the CPU between looks, then sleep.
            drop(st);
            let mut spins = 0u32;
            while s.posted.load(Ordering::Acquire) == seen {
                spins += 1;
                if spins.is_multiple_of(64) {
                    let idle = idle_since.elapsed();
                    if idle >= IDLE_YIELD {
                        break;
                    }
                    if idle >= IDLE_SPIN {
                        s.yields.fetch_add(1, Ordering::Relaxed);
                        std::thread::yield_now();
                        continue;
                    }
                }
                std::hint::spin_loop();
            }
            continue;
        }
        // Sleep. Lock-free posts look at `sleeping` after bumping `posted`, and
        // take the lock (held here until the wait releases it) to notify.
        s.sleeping.store(true, Ordering::SeqCst);
        if s.posted.load(Ordering::SeqCst) != seen {
            s.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        s.sleeps.fetch_add(1, Ordering::Relaxed);
        drop(
            s.work
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner),
        );
        s.sleeping.store(false, Ordering::SeqCst);
        idle_since = Instant::now();
    }
}

impl Shared {
    /// Runs on the calling thread the steps the device can take now, once
    /// the device thread is not mid-step (waited for up to
    /// [`PROMPT_LOCK_WAIT`]) and unless a
    /// transfer is stalled by a fault: what the clock model says is due by
    /// now (or within [`PROMPT_WAIT`]) moves, the rest is left to the device
    /// thread, which the doorbell woke. On a board a short
    /// transfer is done a few microseconds after its doorbell; waking a
    /// sleeping device thread takes the host's scheduler tens of
    /// microseconds or more, so a program that reads the data right after
    /// the doorbell would otherwise find it missing.
    pub(super) fn run_now(&self) {
        // The device thread holds the lock only for a step (a woken one may
        // be at this very transfer): wait a little for it, never long.
        let since = Instant::now();
        let mut st = loop {
            match self.state.try_lock() {
                Ok(st) => break st,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock) if since.elapsed() < PROMPT_WAIT => {
                    std::hint::spin_loop();
                }
                Err(TryLockError::WouldBlock) if since.elapsed() < PROMPT_LOCK_WAIT => {
                    std::thread::yield_now();
                }
                Err(TryLockError::WouldBlock) => return,
            }
        };
        if st.stop || st.in_beat || st.faults.stall.is_some() {
            return;
        }
        // The MM2S read feeds the stream, the core fires, S2MM writes: a few
        // steps at most, each finishing what is due, waiting here for what
        // the model has due within a few microseconds (a board's engine
        // would be at it meanwhile), leaving anything later to the device
        // thread.
        for _ in 0..8 {
            if !self.busy(&st) {
                return;
            }
            match self.step(&mut st) {
                None => {}
                Some(d) if d <= PROMPT_WAIT => {
                    let t = Instant::now() + d;
                    while Instant::now() < t {
                        std::hint::spin_loop();
                    }
                }
                Some(_) => return,
            }
        }
    }
}
