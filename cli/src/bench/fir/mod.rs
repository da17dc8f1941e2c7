//! `dmaflow bench fir`: paper 001's measurement (Figs. 3-6). A frequency-domain FIR
//! filter runs as a graph (source -> FIR -> sink) over a long stream, with the FIR
//! node reading its windows in place (zero-copy) or by manual overlap copy, for FFT
//! lengths 16 to 65536 and filter lengths (= overlap) from about 10 % to 90 % of the
//! FFT length. A "bare" loop of the same transforms over an in-memory signal, with
//! no queue and no graph, is the ceiling.
//!
//! MFLOPS use the paper's count, `10 N log2 N + 6 N` per block: `N log2 N` counts
//! complex-FFT flops, as the paper (and FFTW) do.
//!
//! Paper 001's experiment is here, on the frame: its points are a mode at an
//! FFT length and overlap, one measurement is one run's MFLOPS, and the
//! improvements are the frame's intervals ([`Row::gain_to`]: Student's t,
//! Bonferroni). GNU Radio's `fft_filter_fff` beside dmaflow's graph is
//! [`gnuradio`], measured by the frame too before paper 001's rounds.

mod gnuradio;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use dmaflow::dsp::fir::{Mode, OverlapSave, add_node, flops_per_block};
use dmaflow::graph::Graph;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point, Row};
use super::harness::{Setup, Tier};
use super::peers::{checksum, xorshift};
use super::plot::XAxis;
use super::spread::{FAMILY_CONFIDENCE, Interval};
use gnuradio::{GR, GrConfig, GrRow};

/// `dmaflow bench fir`.
pub static EXPERIMENT: Bench<Config, At, Sample> = Bench {
    name: "fir",
    emulator_only: "it measures process networks on this machine, not a DMA device",
    question: "Overlap-save FIR filter, zero-copy vs manual copy (paper 001).",
    conditions: Conditions {
        timed: "one thread's loop over the whole signal (bare, bare-copy), or the graph's \
                run from start to its last node's end (zerocopy, copy); against GNU Radio \
                both sides alike: filter and FFT plans made before, queues or buffers \
                made, threads started, run and joined inside",
        against: "the manual copy of the overlap (paper 001's standard method), \
                  interleaved round by round; GNU Radio's fft_filter_fff at each side's \
                  default FFT length and at the other's, outputs checked against one f64 \
                  reference",
        model: "none: MFLOPS is the paper's nominal count over measured time",
        paper: "paper 001 ran one thread on a PowerPC 970 and an Opteron; this x86 core has \
                1 MiB of L2, so the copy is cheaper next to the transforms",
    },
    prepare,
    beside: "flops (how MFLOPS count flops); improvement_single_thread (bare over\n\
             bare-copy) and improvement (zerocopy over copy): fft_len, overlap_pct,\n\
             pct, ci_low, ci_high (Bonferroni over `comparisons`, family_confidence),\n\
             pairs, measurable; gnuradio (with GNU Radio installed): rows of taps,\n\
             point (dmaflow|dmaflow@gr-fft|gnuradio|gnuradio-padded), does, fft_len,\n\
             msamples_per_s, msamples_per_s_spread, cpu_us_per_ksample, max_error\n\
             (against the f64 reference), items_out, samples, rounds; and\n\
             attribution per taps (default/default, FFT length, same FFT, the\n\
             FFT's share of the ratio's logarithm)",
    plots: &[THROUGHPUT_PLOT],
    heading,
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Samples streamed per measurement.
    pub samples: usize,
    /// Rounds: every point once per round, in turns.
    pub rounds: usize,
    /// FFT lengths (powers of two).
    pub fft_lens: Vec<usize>,
    /// Filter length as a percentage of the FFT length.
    pub overlaps: Vec<u32>,
    /// The signal every run filters (made before the first round).
    pub signal: Arc<Vec<f32>>,
    /// The first output checksum seen at each FFT length and overlap, which
    /// every mode's output must equal.
    pub sums: Arc<Mutex<Vec<(At, u32)>>>,
    /// GNU Radio's comparison, measured before paper 001's rounds, or why
    /// it was not.
    pub compared: Result<Vec<GrRow>, &'static str>,
}

/// Overlap at which the bare ceiling is measured.
pub const BARE_OVERLAP: u32 = 50;

impl Config {
    /// The size `setup` asks for: the full experiment, 64 MiB of samples per
    /// point, more than the last-level cache holds (several minutes); the
    /// quick one, 16 MiB (about a minute); or the tiny one, for tests.
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            samples: 1 << 24,
            rounds: 5,
            fft_lens: (4..=16).map(|k| 1 << k).collect(),
            overlaps: vec![10, 50, 90],
            signal: Arc::default(),
            sums: Arc::default(),
            compared: Err("not run yet"),
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                samples: 1 << 22,
                ..full
            },
            Tier::Tiny => Config {
                samples: 1 << 14,
                rounds: 1,
                fft_lens: vec![16, 1024],
                overlaps: vec![10, 50],
                ..full
            },
        }
    }
}

/// Where a point is: an FFT length and an overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// FFT length N.
    pub fft_len: usize,
    /// Filter length as a percentage of N.
    pub overlap_pct: u32,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "N={} overlap {}%", self.fft_len, self.overlap_pct)
    }
}

/// What one run gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// MFLOPS by the paper's count over the run's time.
    pub mflops: f64,
}

/// The signal, and GNU Radio's comparison where it runs.
fn prepare(cfg: &mut Config, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
    // One signal for every run, larger than the last-level cache at full size.
    cfg.signal = Arc::new(noise(cfg.samples, 0x1234_5678));
    cfg.compared = if cfg.samples < 1 << 20 {
        Err("the run is too small (under 2^20 samples)")
    } else if !super::peers::gnuradio_here() {
        Err("GNU Radio not installed")
    } else {
        let mut gr = GrConfig::of(cfg);
        (GR.prepare)(&mut gr, progress)?;
        Ok(GR.rows(&gr, progress)?)
    };
    Ok(())
}

/// Every overlap measured, with [`BARE_OVERLAP`] (the ceiling's) among them.
fn overlaps(cfg: &Config) -> Vec<u32> {
    let mut overlaps = cfg.overlaps.clone();
    if !overlaps.contains(&BARE_OVERLAP) {
        overlaps.push(BARE_OVERLAP);
        overlaps.sort_unstable();
    }
    overlaps
}

/// Per FFT length and overlap, the one-thread pair (bare, bare-copy), and
/// the graph's pair (zerocopy, copy) at the overlaps asked for.
fn points(cfg: &Config) -> Vec<Point<At>> {
    let mut v = Vec::new();
    for &fft_len in &cfg.fft_lens {
        for overlap_pct in overlaps(cfg) {
            let at = At {
                fft_len,
                overlap_pct,
            };
            let graph = cfg.overlaps.contains(&overlap_pct);
            let modes: &[&'static str] = match graph {
                true => &["bare", "bare-copy", "zerocopy", "copy"],
                false => &["bare", "bare-copy"],
            };
            v.extend(modes.iter().map(|&series| Point { series, at }));
        }
    }
    v
}

/// One run of one mode; its output must be every other mode's at the point.
fn measure(cfg: &Config, p: &Point<At>) -> Result<Sample, Error> {
    let At {
        fft_len: n,
        overlap_pct: pct,
    } = p.at;
    let l = taps_for(n, pct);
    let taps = noise(l, 0xF1F1 + l as u64);
    let (t, sum) = match p.series {
        "bare" => single_thread_run(&taps, n, &cfg.signal, true)?,
        "bare-copy" => single_thread_run(&taps, n, &cfg.signal, false)?,
        "zerocopy" => graph_run(&taps, n, &cfg.signal, Mode::ZeroCopy)?,
        _ => graph_run(&taps, n, &cfg.signal, Mode::Copy)?,
    };
    let expected = {
        let mut sums = cfg.sums.lock().unwrap_or_else(PoisonError::into_inner);
        match sums.iter().find(|(at, _)| *at == p.at) {
            Some(&(_, s)) => s,
            None => {
                sums.push((p.at, sum));
                sum
            }
        }
    };
    if sum != expected {
        return Err(Error::Corrupted {
            what: format!("fir N={n} overlap {pct}% {} output", p.series),
            got: sum,
            expected,
        });
    }
    let flops = cfg.samples.div_ceil(n - l + 1) as f64 * flops_per_block(n);
    Ok(Sample {
        mflops: flops / t / 1e6,
    })
}

/// Filter length for an overlap percentage: at least 1, at most N.
pub fn taps_for(fft_len: usize, pct: u32) -> usize {
    ((fft_len as f64 * pct as f64 / 100.0).round() as usize).clamp(1, fft_len)
}

/// A repeatable pseudo-random signal in [-1, 1).
fn noise(n: usize, mut seed: u64) -> Vec<f32> {
    let mut next = || (xorshift(&mut seed) >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    (0..n).map(|_| next()).collect()
}

/// Runs the filter as a graph over `signal` (all of it, streamed from memory
/// larger than the last-level cache); returns seconds and the output's bit sum.
fn graph_run(
    taps: &[f32],
    n: usize,
    signal: &Arc<Vec<f32>>,
    mode: Mode,
) -> Result<(f64, u32), Error> {
    let (g, sum) = fir_graph(taps, n, signal, mode, 0u32, |acc, s| {
        *acc = acc.wrapping_add(checksum(s));
    })?;
    let t0 = Instant::now();
    g.run()?;
    Ok((t0.elapsed().as_secs_f64(), sum()))
}

/// The graph `source -> fir -> sink` over `signal` (FFT length `n`), its sink
/// handing `look` its state (`state` at first) and every window it reads; with
/// what gives that state once the graph has run.
fn fir_graph<S: Copy + Send + 'static>(
    taps: &[f32],
    n: usize,
    signal: &Arc<Vec<f32>>,
    mode: Mode,
    mut state: S,
    look: impl Fn(&mut S, &[f32]) + Send + 'static,
) -> Result<(Graph, impl Fn() -> S), Error> {
    let fir = OverlapSave::new(taps, Some(n)).map_err(Error::peer("fir"))?;
    let chunk = n.max(16 << 10);
    let mut g = Graph::new();
    let (mut src, f_in) =
        g.connect_with_capacity::<f32>(("source", "out"), ("fir", "in"), 2 * chunk + n)?;
    let (f_out, mut sink) =
        g.connect_with_capacity::<f32>(("fir", "out"), ("sink", "in"), 2 * chunk)?;
    let input = signal.clone();
    g.node("source", move || {
        for part in input.chunks(chunk) {
            let slots = src.reserve(part.len())?;
            slots.copy_from_slice(part);
            src.commit(part.len())?;
        }
        Ok(())
    })?;
    add_node(&mut g, "fir", fir, mode, f_in, f_out)?;
    let end = Arc::new(Mutex::new(state));
    let put = end.clone();
    g.node("sink", move || {
        loop {
            let s = sink.peek(chunk)?;
            if s.is_empty() {
                *put.lock().unwrap_or_else(PoisonError::into_inner) = state;
                return Ok(());
            }
            look(&mut state, s);
            let k = s.len();
            sink.consume(k)?;
        }
    })?;
    Ok((g, move || {
        *end.lock().unwrap_or_else(PoisonError::into_inner)
    }))
}

/// The filter in a plain loop over the same in-memory signal, on one thread
/// (paper 001's condition). `in_place`: each window read where it lies in the
/// signal (the ceiling, `bare`); else paper 001's manual copy (`bare-copy`):
/// per block the overlap moved to the front of a private buffer and the hop's
/// new samples copied after it. Only the loop is timed.
fn single_thread_run(
    taps: &[f32],
    n: usize,
    input: &[f32],
    in_place: bool,
) -> Result<(f64, u32), Error> {
    let samples = input.len();
    let mut fir = OverlapSave::new(taps, Some(n)).map_err(Error::peer("fir"))?;
    let (l, hop) = (fir.taps(), fir.hop());
    let nb = samples.div_ceil(hop);
    // Zero initial state before, zero padding after, the same samples as the graph.
    let mut signal = vec![0f32; l - 1 + nb * hop + n];
    signal[l - 1..l - 1 + samples].copy_from_slice(input);
    // Non-zero fill: the pages are touched now, not inside the timed loop.
    let mut out = vec![1f32; nb * hop];
    // The copying reader's private window, starting in the zero initial state.
    let mut buf = vec![0f32; n];
    let t0 = Instant::now();
    for (k, o) in out.chunks_exact_mut(hop).enumerate() {
        if in_place {
            fir.process_block(&signal[k * hop..k * hop + n], o);
        } else {
            buf.copy_within(hop.., 0);
            buf[l - 1..].copy_from_slice(&signal[l - 1 + k * hop..l - 1 + (k + 1) * hop]);
            fir.process_block(&buf, o);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok((secs, checksum(&out[..samples])))
}

/// The columns of a point: its FFT length and overlap.
fn point_columns<'a, R: 'a>(n: fn(&R) -> usize, pct: fn(&R) -> u32) -> Columns<'a, R> {
    Columns::new()
        .plain("N", "fft_len", n)
        .doc("FFT length N")
        .shown_as("overlap", "overlap_pct", pct, |p| format!("{p}%"))
        .doc("filter length as a percentage of N")
}

/// The measured points' columns.
fn columns() -> Columns<'static, Row<At, Sample>> {
    point_columns(
        |r: &Row<At, Sample>| r.point.at.fft_len,
        |r| r.point.at.overlap_pct,
    )
    .plain("taps", "taps", |r| {
        taps_for(r.point.at.fft_len, r.point.at.overlap_pct)
    })
    .doc("filter taps L")
    .series(
        "mode",
        "mode",
        "bare|bare-copy: one thread, windows in place or copied out; zerocopy|copy: the \
             graph",
    )
    .summary(
        ("MFLOPS", "mflops", "mflops_spread"),
        "nominal MFLOPS: 10 N log2 N + 6 N flops per block over the measured time",
        (1.0, 0, ""),
        |s| s.mflops,
    )
}

/// The improvement at one FFT length and overlap (paper 001's gain grows with
/// the overlap, so overlaps are not pooled): the mean gain in percent with
/// its interval, corrected over its family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Improvement {
    /// Where.
    pub at: At,
    /// The mean gain and its interval, in percent.
    pub gain: Interval,
}

/// The improvement of reading windows in place over the manual copy per FFT
/// length and overlap measured in the graph, in the graph (`mode`
/// `zerocopy` over `copy`) or on one thread (`bare` over `bare-copy`): the
/// mean of the rounds' ratios, with an interval corrected for every
/// comparison of that family (Bonferroni).
pub fn improvement(rows: &[Row<At, Sample>], mode: &str) -> Vec<Improvement> {
    let over = if mode == "bare" { "bare-copy" } else { "copy" };
    let has = |r: &Row<At, Sample>, s: &str| r.others.iter().any(|(o, _)| *o == s);
    // Only where the graph's pair ran too: bare alone at BARE_OVERLAP is
    // the ceiling's reference, not a comparison.
    let family: Vec<&Row<At, Sample>> = rows
        .iter()
        .filter(|r| r.point.series == mode && has(r, over) && has(r, "copy"))
        .collect();
    let m = family.len();
    family
        .into_iter()
        .filter_map(|r| {
            Some(Improvement {
                at: r.point.at,
                gain: r.gain_to(over, |s| s.mflops, m)?,
            })
        })
        .collect()
}

/// The improvements' columns: the point, the mean and its interval, the
/// family it is corrected over and the rounds it is made of.
fn improvement_columns<'a>() -> Columns<'a, Improvement> {
    point_columns(|i: &Improvement| i.at.fft_len, |i| i.at.overlap_pct)
        .shown_as(
            "improvement",
            "pct",
            |i| i.gain.mean,
            |p| format!("{p:+.1}%"),
        )
        .doc("mean gain of reading in place over copying, percent")
        .shown("interval", |i| {
            format!("{:+.1}% .. {:+.1}%", i.gain.low, i.gain.high)
        })
        .shown("verdict", |i| {
            match (i.gain.measurable(), i.gain.mean > 0.0) {
                (false, _) => "no measurable difference",
                (true, true) => "zero-copy faster",
                (true, false) => "copy faster",
            }
            .into()
        })
        .kept("ci_low", |i| i.gain.low)
        .kept("ci_high", |i| i.gain.high)
        .kept("family_confidence", |_| FAMILY_CONFIDENCE)
        .kept("comparisons", |i| i.gain.comparisons)
        .kept("pairs", |i| i.gain.n)
        .kept("measurable", |i| i.gain.measurable())
}

/// The graph's zero-copy MFLOPS at FFT length `n` as a percentage of the
/// one-thread loop's, at [`BARE_OVERLAP`], round by round.
fn bare_share(rows: &[Row<At, Sample>], n: usize) -> Option<f64> {
    let at = |mode| {
        let here = At {
            fft_len: n,
            overlap_pct: BARE_OVERLAP,
        };
        rows.iter()
            .find(|r| r.point.at == here && r.point.series == mode)
    };
    let q = at("zerocopy")?.against(at("bare")?, |s| s.mflops);
    Some(q.typical() * 100.0)
}

/// The family's note: how many intervals, corrected to hold together.
fn family(imp: &[Improvement]) -> String {
    let confidence = FAMILY_CONFIDENCE * 100.0;
    let n = imp.len();
    format!(
        "({n} intervals, Bonferroni-corrected to hold together with {confidence:.0} % confidence)"
    )
}

/// The improvement tables: on one thread and in the graph, the latter with
/// the queue's cost against the bare loop.
pub fn render(rows: &[Row<At, Sample>]) -> String {
    let mut out = String::new();
    let single = improvement(rows, "bare");
    if !single.is_empty() {
        out += &format!(
            "\non one thread (paper 001's condition): windows in place (bare) over the manual copy \
             (bare-copy), per FFT length and overlap {}:\n",
            family(&single)
        );
        out += &improvement_columns().table(&single);
    }
    let imp = improvement(rows, "zerocopy");
    out += &format!(
        "\nin the three-thread graph (source, filter, sink): zero-copy over manual copy per FFT \
         length and overlap {}, and the graph's zero-copy against the one-thread loop at \
         {BARE_OVERLAP} % overlap (their ratio round by round):\n",
        family(&imp)
    );
    let ratio = |i: &Improvement| match bare_share(rows, i.at.fft_len) {
        Some(share) if i.at.overlap_pct == BARE_OVERLAP => format!("{share:.0}%"),
        _ => "-".into(),
    };
    out + &improvement_columns()
        .shown("zero-copy / bare", ratio)
        .table(&imp)
}

/// The answer's clauses: at how many (FFT length, overlap) points zero-copy
/// is measurably faster or slower than copying (corrected intervals), the
/// range of the improvement, and how close zero-copy comes to the bare loop.
pub fn clauses(rows: &[Row<At, Sample>]) -> Vec<String> {
    let imp = improvement(rows, "zerocopy");
    let single = improvement(rows, "bare");
    let clause = |what: &str, imp: &[Improvement]| {
        let faster: Vec<String> = imp
            .iter()
            .filter(|i| i.gain.measurable() && i.gain.mean > 0.0)
            .map(|i| format!("{} at {} %", i.at.fft_len, i.at.overlap_pct))
            .collect();
        let slower = imp
            .iter()
            .filter(|i| i.gain.measurable() && i.gain.mean < 0.0)
            .count();
        let same = imp.len() - faster.len() - slower;
        let lens = match faster.is_empty() {
            true => String::new(),
            false => format!(" (N = {})", faster.join(", ")),
        };
        let (lo, hi) = extremes(imp.iter().map(|i| i.gain.mean));
        format!(
            "{what} reading windows in place is measurably faster than copying them out at {} of {} \
             points (FFT length and overlap){}, measurably slower at {slower}, and shows no \
             measurable difference at {same} (intervals Bonferroni-corrected to 95 % together; \
             means from {lo:+.1} % to {hi:+.1} %)",
            faster.len(),
            imp.len(),
            lens,
        )
    };
    let families = [
        ("on one thread (paper 001's condition)", &single),
        ("in the three-thread graph", &imp),
    ];
    let mut clauses: Vec<String> = families
        .into_iter()
        .filter(|(_, imp)| !imp.is_empty())
        .map(|(what, imp)| clause(what, imp))
        .collect();
    let shares: Vec<f64> = imp
        .iter()
        .filter(|i| i.at.overlap_pct == BARE_OVERLAP)
        .filter_map(|i| bare_share(rows, i.at.fft_len))
        .collect();
    if !shares.is_empty() {
        let (lo, hi) = extremes(shares.into_iter());
        clauses.push(format!(
            "at {BARE_OVERLAP} % overlap the three-thread zero-copy graph runs at {lo:.0} % to \
             {hi:.0} % of the single-thread bare loop over the same signal (by FFT length)"
        ));
    }
    clauses
}

/// The smallest and largest of `v`.
fn extremes(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// The improvement of zero-copy over manual copy against the FFT length (the
/// shape of paper 001 Figs. 4, 6), a line per overlap with its corrected
/// interval, from the improvements' rows.
const IMPROVEMENT_PLOT: Plot = Plot {
    title: "FIR filter: zero-copy queue improvement over manual copy (%, mean, corrected 95 % \
            interval)",
    x: "fft_len",
    y: "pct",
    interval: Some(("ci_low", "ci_high")),
    y_scale: 1.0,
    lines: &["overlap_pct"],
    axis: XAxis::PowersOfTwo,
    log_y: false,
};

/// MFLOPS against the FFT length, a line per mode and overlap.
const THROUGHPUT_PLOT: Plot = Plot {
    title: "FIR filter throughput",
    x: "fft_len",
    y: "mflops",
    interval: None,
    y_scale: 1.0,
    lines: &["mode", "overlap_pct"],
    axis: XAxis::PowersOfTwo,
    log_y: false,
};

/// What was measured, one line.
fn heading(cfg: &Config) -> String {
    format!(
        "{} samples ({} MiB, streamed from memory larger than the last-level cache) per \
         point; improvement = mean of the rounds' in-place/copy ratios per FFT length and \
         overlap, intervals Bonferroni-corrected; on one thread (paper 001's condition) bare \
         reads windows in place and bare-copy copies them out; in the graph source, filter and \
         sink each on a thread; nominal MFLOPS = (10 N log2 N + 6 N) per block / time (paper \
         001's count for a complex N-point FFT; the code runs an N/2-point complex FFT and a \
         real inverse)",
        cfg.samples,
        (cfg.samples * 4) >> 20,
    )
}

/// How the MFLOPS count flops, in the JSON document.
const FLOPS: &str =
    "10 N log2 N + 6 N per block; N log2 N counts complex-FFT flops, as paper 001 does";

/// The improvements (tables, JSON, plot), the answer, and GNU Radio's
/// comparison with its targets.
fn findings(cfg: &Config, rows: &[Row<At, Sample>]) -> Findings {
    let (gr_text, targets) = gnuradio::text(&cfg.compared);
    let improvements = improvement_columns().json(&improvement(rows, "zerocopy"));
    Findings {
        clauses: clauses(rows),
        notes: render(rows) + &gr_text,
        targets,
        plots: vec![IMPROVEMENT_PLOT.draw(&improvement_columns(), &improvements)],
        kept: vec![
            ("flops", FLOPS.into()),
            (
                "improvement_single_thread",
                improvement_columns()
                    .json(&improvement(rows, "bare"))
                    .into(),
            ),
            ("improvement", improvements.into()),
            (
                "gnuradio",
                gnuradio::json(cfg.compared.as_deref().unwrap_or(&[])),
            ),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::harness::Experiment;

    #[test]
    fn taps_follow_the_overlap() {
        assert_eq!(taps_for(16, 10), 2);
        assert_eq!(taps_for(1024, 50), 512);
        assert_eq!(taps_for(16, 0), 1);
        assert_eq!(taps_for(16, 100), 16);
    }

    /// A zerocopy row at `at` whose rounds ran at `ratios` times copy's.
    fn row(at: At, ratios: &[f64]) -> Row<At, Sample> {
        let mflops = |v: f64| Sample { mflops: v };
        Row {
            point: Point {
                series: "zerocopy",
                at,
            },
            samples: ratios.iter().map(|&q| mflops(100.0 * q)).collect(),
            baseline: None,
            others: vec![("copy", ratios.iter().map(|_| mflops(100.0)).collect())],
        }
    }

    const AT: At = At {
        fft_len: 64,
        overlap_pct: 50,
    };

    #[test]
    fn an_interval_around_zero_is_no_measurable_difference() {
        // Ratios 0.99 and 1.01: mean 0 %, interval about +-12.7 %.
        let same = improvement(&[row(AT, &[0.99, 1.01])], "zerocopy");
        assert!(same[0].gain.mean.abs() < 1e-9);
        assert!(!same[0].gain.measurable(), "{same:?}");
        // Five ratios near 1.10: measurably faster.
        let faster = improvement(&[row(AT, &[1.09, 1.10, 1.11, 1.10, 1.10])], "zerocopy");
        assert!((faster[0].gain.mean - 10.0).abs() < 1e-6);
        assert!(faster[0].gain.measurable() && faster[0].gain.low > 9.0);
        let said = clauses(&[row(AT, &[0.99, 1.01])]).join(" ");
        assert!(said.contains("no measurable difference at 1"), "{said}");
        // The same ratios among 39 comparisons get a wider interval
        // (Bonferroni), and a gain that is clear alone may not be then.
        let edge = [1.02, 1.03, 1.01, 1.02, 1.02];
        let alone = improvement(&[row(AT, &edge)], "zerocopy");
        let family: Vec<Row<At, Sample>> = (0..39)
            .map(|i| {
                let at = At {
                    fft_len: 16 << (i / 3),
                    overlap_pct: [10, 50, 90][i % 3],
                };
                row(at, &edge)
            })
            .collect();
        let among = improvement(&family, "zerocopy");
        assert_eq!((among.len(), among[0].gain.comparisons), (39, 39));
        assert!(alone[0].gain.measurable(), "{alone:?}");
        let width = |i: &Improvement| i.gain.high - i.gain.low;
        assert!(width(&among[0]) > 2.0 * width(&alone[0]));
        assert!(!among[0].gain.measurable(), "{:?}", among[0]);
    }

    #[test]
    fn tiny_run_is_consistent() {
        let cfg = Config::at(&Setup::TINY);
        let rep = EXPERIMENT.run(&Setup::TINY, &mut |_| {}).unwrap();
        let rows = rep.json["rows"].as_array().unwrap();
        // bare, bare-copy, zerocopy and copy per (N, overlap).
        assert_eq!(rows.len(), 2 * 2 * 4);
        for r in rows {
            assert!(r["mflops"].as_f64().is_some_and(|m| m > 0.0), "{r}");
            assert_eq!(r["mflops_spread"]["n"], cfg.rounds, "{r}");
        }
        assert_eq!(rows.iter().filter(|r| r["mode"] == "bare").count(), 4);
        // One per (N, overlap) and family, each corrected over all four (no
        // GNU Radio rows at this size).
        for key in ["improvement", "improvement_single_thread"] {
            assert_eq!(rep.json[key].as_array().unwrap().len(), 4, "{key}");
            assert_eq!(rep.json[key][0]["comparisons"], 4, "{key}");
        }
        assert!(rep.json["gnuradio"]["rows"].as_array().unwrap().is_empty());
        let help = EXPERIMENT.keys();
        assert!(
            help.contains("mflops_spread") && help.contains("ci_low"),
            "{help}"
        );
        assert!(rep.text.contains("Bonferroni"), "{}", rep.text);
        assert_eq!(rep.plots.len(), 2);
        assert_eq!(rep.plots[0].y_label, "improvement");
    }
}
