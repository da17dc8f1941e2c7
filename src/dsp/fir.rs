//! Frequency-domain FIR filtering by overlap-save (paper 001, §IV).
//!
//! Each block transforms a window of `N` input samples (the FFT length), multiplies
//! by the filter's spectrum and transforms back; the last `N - L + 1` samples (the
//! *hop*) are valid output, and the window then slides by the hop. The first `L - 1`
//! samples of every window are the overlap with the previous one.
//!
//! Two ways to feed the transform, run as process-network nodes:
//! - [`run_zero_copy`]: `peek(N)` then `consume(hop)` on a mirrored queue, and the
//!   forward transform reads the window where it lies. The overlap never moves.
//! - [`run_copying`]: the manual overlap management of paper 001 §II: copy the
//!   overlap from the end to the start of a private buffer, copy the new samples
//!   after it, then transform.
//!
//! Both give the same output as `scipy.signal.lfilter(taps, 1.0, x)`: causal, zero
//! initial state, one output sample per input sample. For short filters there is
//! also a direct-form stage ([`run_direct`]), and [`direct`] and [`Reference`]
//! compute the filter's output from its definition, to check the others against.

use std::f64::consts::PI;
use std::sync::Arc;

use num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner};
use rustfft::{Fft, FftPlanner};

use crate::graph::{self, Input, Output};

/// Why a filter cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The filter has no taps.
    #[error("the filter has no taps")]
    NoTaps,
    /// The FFT length is not a power of two (or is below 2).
    #[error("FFT length {0} is not a power of two of at least 2")]
    NotPowerOfTwo(usize),
    /// The FFT length is shorter than the filter.
    #[error("FFT length {fft_len} is shorter than the filter ({taps} taps)")]
    TooShort {
        /// FFT length asked for.
        fft_len: usize,
        /// Number of taps.
        taps: usize,
    },
    /// A tap is NaN or infinite.
    #[error("tap {0} is not a finite number")]
    NonFiniteTap(usize),
    /// The FFT length is beyond what dmaflow plans (and the queues it implies).
    #[error("FFT length {0} is more than the limit of {MAX_FFT_LEN} (2^24)")]
    TooLong(usize),
}

/// The longest FFT (and so the longest filter) dmaflow plans: 2^24 points, whose
/// plans and queues take a few hundred MiB.
pub const MAX_FFT_LEN: usize = 1 << 24;

/// The FFT length chosen for `taps` taps when none is given: the smallest power of
/// two of at least `4 * taps` (and at least 16), so that most of each block is new
/// samples.
pub fn default_fft_len(taps: usize) -> usize {
    (4 * taps.max(1)).next_power_of_two().max(16)
}

/// Floating-point operations of one block by the paper's count: a forward and an
/// inverse FFT at `5 N log2 N` each (complex-FFT flops, as FFTW counts them) and a
/// complex multiply of `6 N`.
pub fn flops_per_block(fft_len: usize) -> f64 {
    let n = fft_len as f64;
    10.0 * n * n.log2() + 6.0 * n
}

/// An overlap-save filter with its FFT plans and buffers, made once.
pub struct OverlapSave {
    taps: usize,
    n: usize,
    /// Complex FFT of length N/2 that transforms the real window read as N/2
    /// complex pairs, without writing to it.
    half: Arc<dyn Fft<f32>>,
    inverse: Arc<dyn ComplexToReal<f32>>,
    /// Filter spectrum (bins 0..=N/2), scaled by 1/N for the unnormalised inverse.
    h: Vec<Complex<f32>>,
    /// `exp(-2 pi i k / N)` for k in 0..=N/2.
    twiddles: Vec<Complex<f32>>,
    z: Vec<Complex<f32>>,
    spectrum: Vec<Complex<f32>>,
    time: Vec<f32>,
    scratch_fwd: Vec<Complex<f32>>,
    scratch_inv: Vec<Complex<f32>>,
}

impl OverlapSave {
    /// A filter with `taps`, transforming blocks of `fft_len` samples (default:
    /// [`default_fft_len`]).
    pub fn new(taps: &[f32], fft_len: Option<usize>) -> Result<Self, Error> {
        if taps.is_empty() {
            return Err(Error::NoTaps);
        }
        if let Some(i) = taps.iter().position(|t| !t.is_finite()) {
            return Err(Error::NonFiniteTap(i));
        }
        let l = taps.len();
        let n = fft_len.unwrap_or_else(|| default_fft_len(l));
        if n > MAX_FFT_LEN {
            return Err(Error::TooLong(n));
        }
        if n < 2 || !n.is_power_of_two() {
            return Err(Error::NotPowerOfTwo(n));
        }
        if n < l {
            return Err(Error::TooShort {
                fft_len: n,
                taps: l,
            });
        }
        let m = n / 2;
        let half = FftPlanner::<f32>::new().plan_fft_forward(m);
        let mut real = RealFftPlanner::<f32>::new();
        let forward = real.plan_fft_forward(n);
        let inverse = real.plan_fft_inverse(n);
        let mut padded = vec![0f32; n];
        padded[..l].copy_from_slice(taps);
        let mut h = forward.make_output_vec();
        forward
            .process(&mut padded, &mut h)
            .unwrap_or_else(|_| unreachable!("buffers come from the plan"));
        let scale = 1.0 / n as f32;
        for x in &mut h {
            *x *= scale;
        }
        let twiddles = (0..=m)
            .map(|k| {
                let a = -2.0 * PI * k as f64 / n as f64;
                Complex::new(a.cos() as f32, a.sin() as f32)
            })
            .collect();
        Ok(OverlapSave {
            taps: l,
            n,
            scratch_fwd: vec![Complex::default(); half.get_immutable_scratch_len()],
            scratch_inv: inverse.make_scratch_vec(),
            half,
            inverse,
            h,
            twiddles,
            z: vec![Complex::default(); m],
            spectrum: vec![Complex::default(); m + 1],
            time: vec![0f32; n],
        })
    }

    /// Number of taps L.
    pub fn taps(&self) -> usize {
        self.taps
    }

    /// FFT length N: samples per window.
    pub fn fft_len(&self) -> usize {
        self.n
    }

    /// New samples (and valid outputs) per block: N - L + 1.
    pub fn hop(&self) -> usize {
        self.n - self.taps + 1
    }

    /// Filters one window of N samples (read in place, not modified) and writes the
    /// first `out.len()` (at most [`hop`](Self::hop)) valid output samples.
    pub fn process_block(&mut self, window: &[f32], out: &mut [f32]) {
        let (n, m) = (self.n, self.n / 2);
        debug_assert_eq!(window.len(), n);
        // The real window read as N/2 complex numbers (even, odd) with no copy.
        let z_in: &[Complex<f32>] = bytemuck::cast_slice(&window[..n]);
        self.half
            .process_immutable_with_scratch(z_in, &mut self.z, &mut self.scratch_fwd);
        // Split the half-length transform into the real signal's spectrum and
        // multiply by the filter's: bin k takes Z[k] and Z[m - k] (Z[0] for
        // both ends, k = 0 and k = m).
        let split = |zk: Complex<f32>, zmk: Complex<f32>, w: Complex<f32>| {
            let zc = zmk.conj();
            let even = (zk + zc) * 0.5;
            let d = zk - zc;
            let odd = Complex::new(d.im * 0.5, -d.re * 0.5);
            even + w * odd
        };
        let z0 = self.z[0];
        self.spectrum[0] = split(z0, z0, self.twiddles[0]) * self.h[0];
        self.spectrum[m] = split(z0, z0, self.twiddles[m]) * self.h[m];
        let mirrored = self.z[1..].iter().rev();
        for ((((out, &zk), &zmk), &w), &h) in self.spectrum[1..m]
            .iter_mut()
            .zip(&self.z[1..])
            .zip(mirrored)
            .zip(&self.twiddles[1..m])
            .zip(&self.h[1..m])
        {
            *out = split(zk, zmk, w) * h;
        }
        self.spectrum[0].im = 0.0;
        self.spectrum[m].im = 0.0;
        self.inverse
            .process_with_scratch(&mut self.spectrum, &mut self.time, &mut self.scratch_inv)
            .unwrap_or_else(|_| unreachable!("buffers come from the plan"));
        let valid = &self.time[self.taps - 1..];
        let k = out.len().min(valid.len());
        out[..k].copy_from_slice(&valid[..k]);
    }
}

/// Filters a window assembled in `buf`: `lead` zeros, `samples`, zeros to the end;
/// writes `due` outputs.
async fn filter_padded(
    fir: &mut OverlapSave,
    buf: &mut [f32],
    lead: usize,
    samples: &[f32],
    due: usize,
    output: &mut Output<f32>,
) -> Result<(), graph::Error> {
    buf[..lead].fill(0.0);
    buf[lead..lead + samples.len()].copy_from_slice(samples);
    buf[lead + samples.len()..].fill(0.0);
    fir.process_block(buf, output.reserve_async(due).await?);
    output.commit(due)
}

/// The filter as a node body, zero-copy: each block peeks N samples where they lie
/// in the input queue and consumes the hop. Only the first windows (which reach
/// before the first sample, into the zero initial state) and the last (which reach
/// past the end) are assembled in a small private buffer. The same body runs as
/// a task ([`add_task`]) or, through [`graph::block_on`], on a thread.
pub async fn run_zero_copy(
    fir: &mut OverlapSave,
    input: &mut Input<f32>,
    output: &mut Output<f32>,
) -> Result<(), graph::Error> {
    let (n, l, hop) = (fir.fft_len(), fir.taps(), fir.hop());
    let mut buf = vec![0f32; n];
    // Stream index of the current window's first sample.
    let mut start = -((l - 1) as i64);
    while start < 0 {
        let lead = (-start) as usize;
        let need = n - lead;
        let s = input.peek_async(need).await?;
        let present = s.len().min(need);
        let due = (lead + present).saturating_sub(l - 1).min(hop);
        if due == 0 {
            return Ok(());
        }
        filter_padded(fir, &mut buf, lead, &s[..present], due, output).await?;
        let next = start + hop as i64;
        if next > 0 {
            input.consume((next as usize).min(present))?;
        }
        if due < hop {
            return Ok(());
        }
        start = next;
    }
    loop {
        let s = input.peek_async(n).await?;
        if s.len() >= n {
            // Every whole window readable now, up to a batch: one reservation,
            // one commit and one consume for them all.
            let blocks = ((s.len() - n) / hop + 1).min(batch_blocks(hop, output));
            let out = output.reserve_async(blocks * hop).await?;
            for (b, o) in out.chunks_exact_mut(hop).enumerate() {
                fir.process_block(&s[b * hop..b * hop + n], o);
            }
            output.commit(blocks * hop)?;
            input.consume(blocks * hop)?;
            continue;
        }
        // The end: pad the last window with zeros.
        let due = s.len().saturating_sub(l - 1).min(hop);
        if due > 0 {
            filter_padded(fir, &mut buf, 0, s, due, output).await?;
        }
        let rest = s.len();
        input.consume(rest)?;
        return Ok(());
    }
}

/// The filter as a node body with manual overlap management (paper 001 §II): per
/// block, copy the overlap from the end of a private buffer to its start, copy the
/// hop's new samples after it, transform.
pub async fn run_copying(
    fir: &mut OverlapSave,
    input: &mut Input<f32>,
    output: &mut Output<f32>,
) -> Result<(), graph::Error> {
    let (n, l, hop) = (fir.fft_len(), fir.taps(), fir.hop());
    let mut buf = vec![0f32; n];
    loop {
        let s = input.peek_async(hop).await?;
        if s.is_empty() {
            return Ok(());
        }
        // Every whole hop readable now, up to a batch (as the zero-copy
        // node batches), or the last, short one.
        let take = if s.len() >= hop {
            (s.len() / hop).min(batch_blocks(hop, output)) * hop
        } else {
            s.len()
        };
        let out = output.reserve_async(take).await?;
        for (new, o) in s[..take].chunks(hop).zip(out.chunks_mut(hop)) {
            let r = new.len();
            buf.copy_within(hop.., 0);
            buf[l - 1..l - 1 + r].copy_from_slice(new);
            buf[l - 1 + r..].fill(0.0);
            fir.process_block(&buf, o);
        }
        output.commit(take)?;
        input.consume(take)?;
        if take < hop {
            return Ok(());
        }
    }
}

/// Blocks of `hop` outputs a node filters between two queue operations: as
/// many as a quarter of the output queue holds (so the reader downstream
/// works meanwhile), at most 64 Ki samples, at least one.
fn batch_blocks<T: crate::ring::Pod>(hop: usize, output: &Output<T>) -> usize {
    ((output.capacity() / 4).min(1 << 16) / hop).max(1)
}

/// How the filter node reads its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Windows read in place from the mirrored queue.
    ZeroCopy,
    /// Manual overlap copy into a private buffer.
    Copy,
}

/// Adds a filter node `name` reading `input` and writing `output` to `g`.
pub fn add_node(
    g: &mut graph::Graph,
    name: &str,
    fir: OverlapSave,
    mode: Mode,
    input: Input<f32>,
    output: Output<f32>,
) -> Result<(), graph::Error> {
    g.node(name, move || graph::block_on(run(fir, mode, input, output)))
}

/// Adds the filter as a task node `name` (see [`graph::Graph::task`]).
pub fn add_task(
    g: &mut graph::Graph,
    name: &str,
    fir: OverlapSave,
    mode: Mode,
    input: Input<f32>,
    output: Output<f32>,
) -> Result<(), graph::Error> {
    g.task(name, run(fir, mode, input, output))
}

/// The node body of either mode, owning its filter and ports.
async fn run(
    mut fir: OverlapSave,
    mode: Mode,
    mut input: Input<f32>,
    mut output: Output<f32>,
) -> graph::NodeResult {
    match mode {
        Mode::ZeroCopy => run_zero_copy(&mut fir, &mut input, &mut output).await?,
        Mode::Copy => run_copying(&mut fir, &mut input, &mut output).await?,
    }
    Ok(())
}

/// Filters `x` through a source -> FIR -> sink graph.
pub fn filter(
    taps: &[f32],
    x: &[f32],
    fft_len: Option<usize>,
    mode: Mode,
) -> Result<Vec<f32>, crate::Error> {
    let fir = OverlapSave::new(taps, fft_len)?;
    let n = fir.fft_len();
    let mut g = graph::Graph::new();
    let (mut src, fin) = g.connect_with_capacity::<f32>(("source", "out"), ("fir", "in"), 4 * n)?;
    let (fout, mut sin) = g.connect_with_capacity::<f32>(("fir", "out"), ("sink", "in"), 4 * n)?;
    let input = x.to_vec();
    g.node("source", move || {
        src.write(&input)?;
        Ok(())
    })?;
    add_node(&mut g, "fir", fir, mode, fin, fout)?;
    let y = Arc::new(std::sync::Mutex::new(Vec::with_capacity(x.len())));
    let y2 = y.clone();
    g.node("sink", move || {
        let mut out = Vec::new();
        loop {
            let s = sin.peek(1)?;
            if s.is_empty() {
                break;
            }
            out.extend_from_slice(s);
            let k = s.len();
            sin.consume(k)?;
        }
        *y2.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = out;
        Ok(())
    })?;
    g.run()?;
    let out = std::mem::take(&mut *y.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    Ok(out)
}

/// Direct-form convolution, `y[n] = sum_k taps[k] x[n - k]` with zero initial state:
/// the reference the fast filters are checked against.
pub fn direct(taps: &[f32], x: &[f32]) -> Vec<f32> {
    (0..x.len())
        .map(|i| {
            let mut acc = 0f64;
            for (k, &t) in taps.iter().enumerate().take(i + 1) {
                acc += t as f64 * x[i - k] as f64;
            }
            acc as f32
        })
        .collect()
}

/// A direct-form (time-domain) FIR filter as a task node body
/// ([`graph::Graph::task`]), for short filters: `T` taps (a multiple of 8),
/// one output per whole window of `T` samples (the first `T - 1` samples in,
/// no zero initial state). Each call filters every whole window readable, at
/// most what is free downstream, the last `T - 1` samples staying in the
/// queue as the next call's history; it ends once fewer than `T` samples are
/// left at the end of the stream.
pub async fn run_direct<const T: usize>(
    mut input: Input<f32>,
    mut output: Output<f32>,
    taps: [f32; T],
) -> graph::NodeResult {
    const {
        assert!(
            T > 0 && T.is_multiple_of(8),
            "a direct-form stage takes a multiple of 8 taps"
        )
    };
    let rev: [f32; T] = std::array::from_fn(|k| taps[T - 1 - k]);
    loop {
        let s = input.peek_async(T).await?;
        if s.len() < T {
            return Ok(());
        }
        let d = output.reserve_up_to_async(s.len() - (T - 1)).await?;
        direct_block(&rev, s, d);
        let m = d.len();
        output.commit(m)?;
        input.consume(m)?;
    }
}

/// Outputs of a direct-form FIR computed together: each tap times `WIDE`
/// neighbouring inputs added to `WIDE` sums, eight vector registers of
/// independent sums (so that the adds of one tap never wait on the
/// previous tap's, as one register of sums would).
const WIDE: usize = 32;

/// Direct-form FIR outputs `y` from the window `x` (at least `y.len() + T -
/// 1` items), `rev` the taps reversed: [`WIDE`] at a time, then eight at a
/// time, the last few by [`dot`].
fn direct_block<const T: usize>(rev: &[f32; T], x: &[f32], y: &mut [f32]) {
    let mut i = 0;
    while i + WIDE <= y.len() {
        direct_outputs::<T, WIDE>(rev, &x[i..], &mut y[i..]);
        i += WIDE;
    }
    while i + 8 <= y.len() {
        direct_outputs::<T, 8>(rev, &x[i..], &mut y[i..]);
        i += 8;
    }
    for (j, y) in y[i..].iter_mut().enumerate() {
        *y = dot(rev, &x[i + j..]);
    }
}

/// `B` direct-form FIR outputs `out[..B]` from the window `w` (at least
/// `B + T - 1` items): tap by tap, no reduction per output.
fn direct_outputs<const T: usize, const B: usize>(rev: &[f32; T], w: &[f32], out: &mut [f32]) {
    let w = &w[..B + T - 1];
    let mut acc = [0f32; B];
    for (k, &t) in rev.iter().enumerate() {
        for (a, v) in acc.iter_mut().zip(&w[k..k + B]) {
            *a += t * v;
        }
    }
    out[..B].copy_from_slice(&acc);
}

/// Output `i` of a direct-form FIR: `sum_k taps[k] x[i + T - 1 - k]`, with
/// `rev` the taps reversed and `x` the window from `x[i]`. Eight partial
/// sums, so that the compiler keeps them in one vector register (as VOLK's
/// and futuredsp's dot products do).
fn dot<const T: usize>(rev: &[f32; T], x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    for (t, v) in rev.chunks_exact(8).zip(x[..T].chunks_exact(8)) {
        for j in 0..8 {
            acc[j] += t[j] * v[j];
        }
    }
    acc.iter().sum()
}

/// The filter's exact output at chosen positions, computed in f64 straight
/// from the definition (`y[i] = sum h[k] x[i - k]`, zero before the signal):
/// a long filtered stream is checked against it as it goes by, without the
/// cost of [`direct`] over all of it.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Output positions checked, ascending.
    pub positions: Vec<usize>,
    /// The output there.
    pub want: Vec<f64>,
    /// The sum of the taps' magnitudes (errors are divided by it).
    pub scale: f64,
}

impl Reference {
    /// The first 64 outputs (the filter's start) and `spread` more spread
    /// evenly over the signal, short of its last `tail` samples (where a
    /// filter may leave a last part-block out).
    pub fn new(taps: &[f32], signal: &[f32], spread: usize, tail: usize) -> Self {
        let end = signal.len().saturating_sub(tail).max(1);
        let mut positions: Vec<usize> = (0..64.min(end)).collect();
        let step = (end / spread.max(1)).max(1);
        // Past the first 64, ascending: no position twice.
        positions.extend((0..spread).map(|i| 64 + i * step).filter(|&p| p < end));
        let want = positions
            .iter()
            .map(|&i| {
                taps.iter()
                    .enumerate()
                    .take(i + 1)
                    .map(|(k, &h)| f64::from(h) * f64::from(signal[i - k]))
                    .sum()
            })
            .collect();
        let scale = taps.iter().map(|&h| f64::from(h.abs())).sum::<f64>();
        Reference {
            positions,
            want,
            scale: scale.max(1e-30),
        }
    }

    /// Checks the outputs `out`, which start at output position `at`,
    /// advancing `next` (the index of the next position to check); returns
    /// the largest error seen, over [`Reference::scale`].
    pub fn check(&self, at: usize, out: &[f32], next: &mut usize) -> f64 {
        let mut err = 0f64;
        while let Some(&p) = self.positions.get(*next) {
            if p >= at + out.len() {
                break;
            }
            let e = (f64::from(out[p - at]) - self.want[*next]).abs() / self.scale;
            // A NaN is the worst error there is.
            err = err.max(if e.is_nan() { f64::INFINITY } else { e });
            *next += 1;
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_filters_are_refused() {
        assert_eq!(OverlapSave::new(&[], None).err(), Some(Error::NoTaps));
        assert_eq!(
            OverlapSave::new(&[1.0], Some(24)).err(),
            Some(Error::NotPowerOfTwo(24))
        );
        assert_eq!(
            OverlapSave::new(&[1.0; 40], Some(32)).err(),
            Some(Error::TooShort {
                fft_len: 32,
                taps: 40
            })
        );
        assert_eq!(
            OverlapSave::new(&[1.0, f32::NAN], None).err(),
            Some(Error::NonFiniteTap(1))
        );
    }

    #[test]
    fn one_block_matches_direct_convolution() {
        let taps = [0.5f32, -0.25, 0.125];
        let mut f = OverlapSave::new(&taps, Some(16)).unwrap();
        let x: Vec<f32> = (0..16).map(|i| (i as f32 * 0.7).sin()).collect();
        let mut out = vec![0f32; f.hop()];
        f.process_block(&x, &mut out);
        let want = direct(&taps, &x);
        for (a, b) in out.iter().zip(&want[2..]) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn a_reference_catches_a_wrong_sample() {
        let x: Vec<f32> = (0..5000)
            .map(|i| ((i * 7919) % 2003) as f32 / 1001.5 - 1.0)
            .collect();
        let h = [0.3f32, -0.2, 0.5, 0.1, -0.4, 0.25, 0.05];
        let r = Reference::new(&h, &x, 100, 0);
        let y = direct(&h, &x);
        let mut next = 0;
        assert!(r.check(0, &y[..3000], &mut next) < 1e-6);
        assert!(r.check(3000, &y[3000..], &mut next) < 1e-6);
        assert_eq!(next, r.positions.len());
        let mut bad = y.clone();
        bad[r.positions[70]] += 0.5;
        let mut next = 0;
        assert!(r.check(0, &bad, &mut next) > 1e-3);
    }

    #[test]
    fn the_direct_form_stage_filters_as_the_reference_convolution() {
        let taps: [f32; 64] = std::array::from_fn(|k| ((k * 37) % 11) as f32 / 20.0 - 0.25);
        let x: Vec<f32> = (0..5000)
            .map(|i| ((i * 7919) % 2003) as f32 / 1001.5 - 1.0)
            .collect();
        let mut g = graph::Graph::new();
        let (mut o, i) = g.connect::<f32>(("source", "out"), ("fir", "in")).unwrap();
        let (f_out, mut sink) = g.connect::<f32>(("fir", "out"), ("sink", "in")).unwrap();
        let input = x.clone();
        g.node("source", move || Ok(o.write(&input)?)).unwrap();
        g.task("fir", run_direct(i, f_out, taps)).unwrap();
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let into = got.clone();
        g.node("sink", move || {
            loop {
                let s = sink.peek(1)?;
                if s.is_empty() {
                    return Ok(());
                }
                let n = s.len();
                into.lock().unwrap().extend_from_slice(s);
                sink.consume(n)?;
            }
        })
        .unwrap();
        g.run().unwrap();
        // Whole windows only: the reference from its first full window on.
        let want = &direct(&taps, &x)[63..];
        let got = got.lock().unwrap();
        assert_eq!(got.len(), want.len());
        for (k, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() < 1e-4, "output {k}: {a} against {b}");
        }
    }

    #[test]
    fn flop_count_is_the_papers() {
        assert_eq!(flops_per_block(1024), 10.0 * 1024.0 * 10.0 + 6.0 * 1024.0);
        assert_eq!(default_fft_len(1), 16);
        assert_eq!(default_fft_len(100), 512);
    }
}
