//! Another program on the machine: a thread doing fixed work again and again,
//! counting it, until dropped. Three kinds of work: a bare spin (a load that
//! takes a core, free to run on any of several so the scheduler places it as
//! it would another process), a 64-tap FIR filter over 16 Ki samples, which
//! stays in the core's own caches (it competes for the core only), and a
//! STREAM-like triad over arrays far larger than the last-level cache, which is
//! bound by memory bandwidth (it competes for DRAM with the device's
//! transfers).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::Error;

/// Filter taps of the cache-resident work.
pub const TAPS: usize = 64;
/// Samples the filter passes over (64 KiB of input).
pub const SAMPLES: usize = 16 << 10;
/// Elements of each of the triad's three f64 arrays (64 MiB each).
pub const TRIAD_ELEMENTS: usize = 8 << 20;
/// Elements of the triad counted as one unit of work (so that a rate over a
/// tenth of a second counts hundreds of units, not a few passes).
pub const TRIAD_UNIT: usize = 64 << 10;
/// Bytes one unit of the triad moves, as STREAM counts them: two arrays
/// read, one written.
pub const TRIAD_UNIT_BYTES: usize = 3 * 8 * TRIAD_UNIT;

/// What the application does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A spin: it only takes a core.
    Spin,
    /// Cache-resident: a 64-tap FIR filter over [`SAMPLES`] samples.
    Filter,
    /// Memory-bound: `a[i] = b[i] + 3 * c[i]` over [`TRIAD_ELEMENTS`].
    Triad,
}

impl Work {
    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Work::Spin => "spin",
            Work::Filter => "filter",
            Work::Triad => "triad",
        }
    }
}

impl Work {
    /// One unit of the work, its buffers set up: a filter pass, the triad
    /// over the next [`TRIAD_UNIT`] elements, or nothing (the spin).
    fn unit(self) -> Box<dyn FnMut()> {
        match self {
            Work::Spin => Box::new(|| {}),
            Work::Filter => {
                let x: Vec<f32> = (0..SAMPLES).map(|i| (i as f32 * 0.01).sin()).collect();
                let taps: Vec<f32> = (0..TAPS).map(|k| 1.0 / (k + 1) as f32).collect();
                let mut y = vec![0f32; SAMPLES];
                Box::new(move || {
                    filter_pass(&x, &taps, &mut y);
                    std::hint::black_box(&y);
                })
            }
            Work::Triad => {
                let mut a = vec![0f64; TRIAD_ELEMENTS];
                let b: Vec<f64> = (0..TRIAD_ELEMENTS).map(|i| i as f64).collect();
                let c = vec![0.5f64; TRIAD_ELEMENTS];
                // One pass before the count starts: `a`'s zeroed pages are
                // mapped on first write, and those faults are not the
                // application's steady work.
                triad_pass(&mut a, &b, &c);
                let mut at = 0;
                Box::new(move || {
                    let r = at..at + TRIAD_UNIT;
                    triad_pass(&mut a[r.clone()], &b[r.clone()], &c[r]);
                    std::hint::black_box(&a);
                    at = (at + TRIAD_UNIT) % TRIAD_ELEMENTS;
                })
            }
        }
    }
}

/// One pass of the filter: a 64-tap FIR filter over the buffer.
pub fn filter_pass(x: &[f32], taps: &[f32], y: &mut [f32]) {
    for (i, out) in y.iter_mut().enumerate().skip(TAPS - 1) {
        let window = &x[i + 1 - TAPS..=i];
        *out = window
            .iter()
            .zip(taps.iter().rev())
            .map(|(a, b)| a * b)
            .sum();
    }
}

/// One pass of the triad.
pub fn triad_pass(a: &mut [f64], b: &[f64], c: &[f64]) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = b + 3.0 * c;
    }
}

/// The application thread: units of work (filter passes or triad units of
/// [`TRIAD_UNIT`] elements) until told to stop, counted.
pub struct App {
    stop: Arc<AtomicBool>,
    passes: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl App {
    /// Starts `work` on a thread allowed on `cores` only (one core: pinned;
    /// several: the scheduler picks); returns once its buffers are set up.
    pub fn start(work: Work, cores: &[usize]) -> Result<Self, Error> {
        let cores = cores.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), passes.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("dmaflow-app-{}", work.name()))
            .spawn(move || {
                // Best effort: an application the scheduler cannot move is
                // still an application.
                let _ = dmaflow::platform::cpu::pin(None, &cores);
                let mut unit = work.unit();
                let _ = ready_tx.send(());
                while !s.load(Ordering::Relaxed) {
                    unit();
                    std::hint::black_box(p.fetch_add(1, Ordering::Relaxed));
                }
            })
            .map_err(Error::io("application thread"))?;
        let _ = ready_rx.recv();
        Ok(App {
            stop,
            passes,
            thread: Some(thread),
        })
    }

    /// Units of work completed so far (filter passes, triad units).
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }

    /// Units of work per second over `d`, counted from the running application,
    /// while the caller does `during` again and again.
    pub fn rate(
        &self,
        d: Duration,
        mut during: impl FnMut() -> Result<(), Error>,
    ) -> Result<f64, Error> {
        let (p0, t0) = (self.passes(), Instant::now());
        let until = t0 + d;
        while Instant::now() < until {
            during()?;
        }
        Ok((self.passes() - p0) as f64 / t0.elapsed().as_secs_f64())
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spin_counts_until_dropped() {
        let cores = dmaflow::platform::cpu::allowed_cores(None).unwrap();
        let app = App::start(Work::Spin, &cores).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let n = app.passes();
        drop(app);
        assert!(n > 1000, "{n}");
    }

    #[test]
    fn the_filter_is_a_filter() {
        // An impulse through the filter gives back its taps.
        let mut x = vec![0f32; 256];
        x[100] = 1.0;
        let taps: Vec<f32> = (0..TAPS).map(|k| k as f32).collect();
        let mut y = vec![0f32; 256];
        filter_pass(&x, &taps, &mut y);
        for k in 0..TAPS {
            assert_eq!(y[100 + k], k as f32);
        }
        assert_eq!(y[99], 0.0);
    }

    #[test]
    fn the_triad_adds_three_times_the_third_array() {
        let mut a = [0.0; 3];
        triad_pass(&mut a, &[1.0, 2.0, 3.0], &[1.0, 0.0, -1.0]);
        assert_eq!(a, [4.0, 2.0, 0.0]);
    }
}
