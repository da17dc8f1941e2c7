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
//! Paper 001's experiment is here; GNU Radio's `fft_filter_fff` beside
//! dmaflow's graph is [`gnuradio`], and the improvements' intervals (Student's
//! t, Bonferroni) are [`stats`].

mod gnuradio;
mod stats;

pub use gnuradio::{Attribution, GrPoint, GrRow, MAX_ERROR, attribution, run_gnuradio};
pub use stats::{FAMILY_CONFIDENCE, Improvement, improvement, t_quantile};

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use dmaflow::dsp::fir::{Mode, OverlapSave, add_node, flops_per_block};
use dmaflow::graph::Graph;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::Plot;
use super::harness::{OnBoard, Progress, Setup, Spec, Tier, median};
use super::peers::{checksum, xorshift};
use super::plot::XAxis;
use super::report::{Report, sentence};
use super::spread::Spread;
use gnuradio::{gnuradio_json, gnuradio_text};

/// `dmaflow bench fir`.
pub static EXPERIMENT: Spec<Config, Measured> = Spec {
    name: "fir",
    board: OnBoard::EmulatorOnly("it measures process networks on this machine, not a DMA device"),
    question: "Overlap-save FIR filter, zero-copy vs manual copy (paper 001).",
    keys: "fft_len, overlap_pct, mode (bare|bare-copy: one thread;\n\
          zerocopy|copy: the graph), taps, mflops (median, nominal:\n\
          10 N log2 N + 6 N flops per block), mflops_spread;\n\
          improvement_single_thread (bare over bare-copy) and\n\
          improvement (zerocopy over copy): fft_len, overlap_pct, pct,\n\
          ci_low, ci_high (Bonferroni over `comparisons`), pairs,\n\
          measurable; gnuradio (with GNU Radio installed): rows of taps,\n\
          point (dmaflow|dmaflow@gr-fft|gnuradio|gnuradio-padded), does,\n\
          fft_len, msamples_per_s, its spread, cpu_us_per_ksample,\n\
          max_error (against the f64 reference), items_out; and\n\
          attribution per taps (default/default, FFT length, same FFT,\n\
          the FFT's share of the ratio's logarithm)",
    conditions: Conditions {
        timed: "one thread's loop over the whole signal (bare, bare-copy), or the graph's \
                run from start to its last node's end (zerocopy, copy); against GNU Radio \
                both sides alike: filter and FFT plans made before, queues or buffers \
                made, threads started, run and joined inside",
        against: "the manual copy of the overlap (paper 001's standard method), \
                  interleaved pair by pair; GNU Radio's fft_filter_fff at each side's \
                  default FFT length and at the other's, outputs checked against one f64 \
                  reference",
        model: "none: MFLOPS is the paper's nominal count over measured time",
        paper: "paper 001 ran one thread on a PowerPC 970 and an Opteron; this x86 core has \
                1 MiB of L2, so the copy is cheaper next to the transforms",
    },
    ..Spec::new(Config::at, run, report)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Samples streamed per measurement.
    pub samples: usize,
    /// Rounds per point; the median is reported.
    pub rounds: usize,
    /// FFT lengths (powers of two).
    pub fft_lens: Vec<usize>,
    /// Filter length as a percentage of the FFT length.
    pub overlaps: Vec<u32>,
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
            },
        }
    }
}

/// One measured point (median of the runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// FFT length N.
    pub fft_len: usize,
    /// Filter length as a percentage of N.
    pub overlap_pct: u32,
    /// `zerocopy`, `copy` or `bare`.
    pub mode: &'static str,
    /// Filter taps L.
    pub taps: usize,
    /// MFLOPS by the paper's count over the runs.
    pub spread: Spread,
    /// On the in-place rows (`zerocopy`, `bare`): their MFLOPS over the
    /// copying one's, one ratio per interleaved pair of runs.
    pub ratios: Vec<f64>,
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

/// Paper 001's rows: in place and copying runs alternate (ABAB...) so that
/// drift falls on both, on one thread (`bare`, `bare-copy`) and in the
/// three-thread graph (`zerocopy`, `copy`).
pub fn run_rows(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    // One signal for every run, larger than the last-level cache at full size.
    let signal = Arc::new(noise(cfg.samples, 0x1234_5678));
    // The rows' modes; each pair's first reads windows in place.
    const MODES: [&str; 4] = ["bare", "bare-copy", "zerocopy", "copy"];
    let mut overlaps = cfg.overlaps.clone();
    if !overlaps.contains(&BARE_OVERLAP) {
        overlaps.push(BARE_OVERLAP);
        overlaps.sort_unstable();
    }
    let mut rows = Vec::new();
    for &n in &cfg.fft_lens {
        for &pct in &overlaps {
            let l = taps_for(n, pct);
            let taps = noise(l, 0xF1F1 + l as u64);
            let flops = cfg.samples.div_ceil(n - l + 1) as f64 * flops_per_block(n);
            // The graph's pair where measured, then the one-thread pair (at
            // BARE_OVERLAP always).
            let measured = cfg.overlaps.contains(&pct);
            let pairs = &[[2, 3], [0, 1]][usize::from(!measured)..];
            let mut mflops: [Vec<f64>; 4] = Default::default();
            let mut first = None;
            for run in 0..cfg.rounds {
                progress(&format!(
                    "fir N={n} overlap {pct}% run {}/{}",
                    run + 1,
                    cfg.rounds
                ));
                for &[a, b] in pairs {
                    // Alternate which goes first, so neither always follows
                    // the other's cache state.
                    for k in if run % 2 == 0 { [a, b] } else { [b, a] } {
                        let (t, sum) = match k {
                            0 | 1 => single_thread_run(&taps, n, &signal, k == 0)?,
                            2 => graph_run(&taps, n, &signal, Mode::ZeroCopy)?,
                            _ => graph_run(&taps, n, &signal, Mode::Copy)?,
                        };
                        let expected = *first.get_or_insert(sum);
                        if sum != expected {
                            return Err(Error::Corrupted {
                                what: format!("fir N={n} overlap {pct}% {} output", MODES[k]),
                                got: sum,
                                expected,
                            });
                        }
                        mflops[k].push(flops / t / 1e6);
                    }
                }
            }
            for (k, v) in mflops.iter().enumerate().filter(|(_, v)| !v.is_empty()) {
                // The in-place rows carry the pairs' ratios.
                let copying = mflops.get(k + 1).filter(|_| k % 2 == 0 && measured);
                let ratios = copying.map_or(Vec::new(), |c| {
                    v.iter().zip(c).map(|(x, y)| x / y).collect()
                });
                rows.push(Row {
                    fft_len: n,
                    overlap_pct: pct,
                    mode: MODES[k],
                    taps: l,
                    spread: Spread::of(v),
                    ratios,
                });
            }
        }
    }
    Ok(rows)
}

/// The graph's zero-copy MFLOPS at FFT length `n` as a percentage of the
/// one-thread loop's, at [`BARE_OVERLAP`].
fn bare_share(rows: &[Row], n: usize) -> Option<f64> {
    let at = |mode| {
        let r = rows
            .iter()
            .find(|r| (r.fft_len, r.overlap_pct, r.mode) == (n, BARE_OVERLAP, mode));
        r.map(|r| r.spread.median)
    };
    Some(at("zerocopy")? / at("bare")? * 100.0)
}
/// The columns of a point: its FFT length and overlap.
fn point_columns<'a, R: 'a>(n: fn(&R) -> usize, pct: fn(&R) -> u32) -> Columns<'a, R> {
    Columns::new()
        .plain("N", "fft_len", n)
        .shown_as("overlap", "overlap_pct", pct, |p| format!("{p}%"))
}

/// The measured points' columns.
fn row_columns<'a>() -> Columns<'a, Row> {
    point_columns(|r: &Row| r.fft_len, |r| r.overlap_pct)
        .plain("taps", "taps", |r| r.taps)
        .plain("mode", "mode", |r| r.mode)
        .fixed("MFLOPS", "mflops", 0, |r| r.spread.median)
        .kept("mflops_spread", |r| r.spread)
}

/// The improvements' columns: the point, the mean and its interval, the
/// family it is corrected over and the pairs it is made of.
fn improvement_columns<'a>() -> Columns<'a, Improvement> {
    point_columns(|i: &Improvement| i.fft_len, |i| i.overlap_pct)
        .shown_as("improvement", "pct", |i| i.pct, |p| format!("{p:+.1}%"))
        .shown("interval", |i| format!("{:+.1}% .. {:+.1}%", i.low, i.high))
        .shown("verdict", |i| {
            match (i.measurable(), i.pct > 0.0) {
                (false, _) => "no measurable difference",
                (true, true) => "zero-copy faster",
                (true, false) => "copy faster",
            }
            .into()
        })
        .kept("ci_low", |i| i.low)
        .kept("ci_high", |i| i.high)
        .kept("family_confidence", |_| FAMILY_CONFIDENCE)
        .kept("comparisons", |i| i.comparisons)
        .kept("pairs", |i| i.pairs)
        .kept("measurable", Improvement::measurable)
}

/// The table of every point, then the improvement per FFT length and the queue's
/// cost against the bare loop.
pub fn render(rows: &[Row]) -> String {
    let family = |imp: &[Improvement]| {
        let confidence = FAMILY_CONFIDENCE * 100.0;
        let n = imp.len();
        format!(
            "({n} intervals, Bonferroni-corrected to hold together with {confidence:.0} % confidence)"
        )
    };
    let mut out = row_columns().table(rows);
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
         {BARE_OVERLAP} % overlap:\n",
        family(&imp)
    );
    let ratio = |i: &Improvement| match bare_share(rows, i.fft_len) {
        Some(share) if i.overlap_pct == BARE_OVERLAP => format!("{share:.0}%"),
        _ => "-".into(),
    };
    out + &improvement_columns()
        .shown("zero-copy / bare", ratio)
        .table(&imp)
}

/// One sentence: at how many (FFT length, overlap) points zero-copy is
/// measurably faster or slower than copying (corrected intervals), the range
/// of the improvement, and how close zero-copy comes to the bare loop.
pub fn answer(rows: &[Row]) -> String {
    let imp = improvement(rows, "zerocopy");
    let single = improvement(rows, "bare");
    let clause = |what: &str, imp: &[Improvement]| {
        let faster: Vec<String> = imp
            .iter()
            .filter(|i| i.measurable() && i.pct > 0.0)
            .map(|i| format!("{} at {} %", i.fft_len, i.overlap_pct))
            .collect();
        let slower = imp.iter().filter(|i| i.measurable() && i.pct < 0.0).count();
        let same = imp.len() - faster.len() - slower;
        let lens = match faster.is_empty() {
            true => String::new(),
            false => format!(" (N = {})", faster.join(", ")),
        };
        let pcts = imp.iter().map(|i| i.pct);
        format!(
            "{what} reading windows in place is measurably faster than copying them out at {} of {} \
             points (FFT length and overlap){}, measurably slower at {slower}, and shows no \
             measurable difference at {same} (intervals Bonferroni-corrected to 95 % together; \
             means from {:+.1} % to {:+.1} %)",
            faster.len(),
            imp.len(),
            lens,
            pcts.clone().fold(f64::INFINITY, f64::min),
            pcts.fold(f64::NEG_INFINITY, f64::max),
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
        .filter_map(|i| bare_share(rows, i.fft_len))
        .collect();
    if !shares.is_empty() {
        clauses.push(format!(
            "at {BARE_OVERLAP} % overlap the three-thread zero-copy graph runs at {:.0} % of the \
             single-thread bare loop over the same signal (median)",
            median(&shares)
        ));
    }
    sentence(&clauses)
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

/// The run as a report: table, improvement against FFT length, MFLOPS.
pub fn report(cfg: &Config, m: &Measured) -> Report {
    let rows = &m.rows;
    let (gr_text, targets) = gnuradio_text(&m.gnuradio);
    let heading = format!(
        "fir: {} samples ({} MiB, streamed from memory larger than the last-level cache) per \
         point, {} interleaved zero-copy/copy pairs per point (median MFLOPS; improvement = mean \
         of the pairs' ratios per FFT length and overlap, intervals Bonferroni-corrected); \
         on one thread (paper 001's condition) bare reads windows in place and bare-copy copies \
         them out; in the graph source, filter and sink each on a thread; nominal MFLOPS = \
         (10 N log2 N + 6 N) per block / time (paper 001's count for a complex N-point FFT; \
         the code runs an N/2-point complex FFT and a real inverse)",
        cfg.samples,
        (cfg.samples * 4) >> 20,
        cfg.rounds
    );
    let improvements = improvement_columns().json(&improvement(rows, "zerocopy"));
    Report::of("fir", heading, &row_columns(), rows)
        .text(render(rows) + &gr_text)
        .answer(answer(rows))
        .targets(targets)
        .kept("flops", FLOPS)
        .kept(
            "improvement_single_thread",
            improvement_columns().json(&improvement(rows, "bare")),
        )
        .kept("improvement", improvements.clone())
        .kept("gnuradio", gnuradio_json(&m.gnuradio))
        .plots([IMPROVEMENT_PLOT.draw(&improvement_columns(), &improvements)])
        .drawn(&row_columns(), &[THROUGHPUT_PLOT])
}

/// How the MFLOPS count flops, in the JSON document.
const FLOPS: &str =
    "10 N log2 N + 6 N per block; N log2 N counts complex-FFT flops, as paper 001 does";
/// What `dmaflow bench fir` measured: paper 001's rows and, where GNU Radio
/// is installed, GNU Radio's filter beside dmaflow's.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Zero-copy, copy and bare rows.
    pub rows: Vec<Row>,
    /// GNU Radio's comparison (empty without GNU Radio).
    pub gnuradio: Vec<GrRow>,
}
/// Runs the experiment: paper 001's rows, then, where GNU Radio is
/// installed, its `fft_filter_fff` beside dmaflow's graph at the four
/// [`GrPoint`]s, every output checked against one [`dmaflow::dsp::fir::Reference`].
pub fn run(cfg: &Config, progress: Progress) -> Result<Measured, Error> {
    let rows = run_rows(cfg, &mut *progress)?;
    let gnuradio = match cfg.samples >= 1 << 20 && super::peers::gnuradio_here() {
        true => run_gnuradio(cfg, progress)?,
        false => Vec::new(),
    };
    Ok(Measured { rows, gnuradio })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_follow_the_overlap_and_t_quantiles_are_students() {
        assert_eq!(taps_for(16, 10), 2);
        assert_eq!(taps_for(1024, 50), 512);
        assert_eq!(taps_for(16, 0), 1);
        assert_eq!(taps_for(16, 100), 16);
        // Printed tables: t(0.975) with 1, 10 and 1000 degrees of freedom.
        assert!((t_quantile(0.975, 1) - 12.706).abs() < 1e-3);
        assert!((t_quantile(0.975, 10) - 2.228).abs() < 1e-3);
        assert!((t_quantile(0.975, 1000) - 1.962).abs() < 1e-3);
        assert!(t_quantile(0.975, 0).is_infinite());
    }

    #[test]
    fn an_interval_around_zero_is_no_measurable_difference() {
        let row = |ratios: Vec<f64>| Row {
            fft_len: 64,
            overlap_pct: 50,
            mode: "zerocopy",
            taps: 32,
            spread: Spread::of(&[1.0]),
            ratios,
        };
        // Ratios 0.99 and 1.01: mean 0 %, interval about +-12.7 %.
        let same = improvement(&[row(vec![0.99, 1.01])], "zerocopy");
        assert!(same[0].pct.abs() < 1e-9);
        assert!(!same[0].measurable(), "{same:?}");
        // Five ratios near 1.10: measurably faster.
        let faster = improvement(&[row(vec![1.09, 1.10, 1.11, 1.10, 1.10])], "zerocopy");
        assert!((faster[0].pct - 10.0).abs() < 1e-6);
        assert!(faster[0].measurable() && faster[0].low > 9.0, "{faster:?}");
        assert!(answer(&[row(vec![0.99, 1.01])]).contains("no measurable difference at 1"));
        // The same ratios among 39 comparisons get a wider interval
        // (Bonferroni), and a gain that is clear alone may not be then.
        let edge = vec![1.02, 1.03, 1.01, 1.02, 1.02];
        let alone = improvement(&[row(edge.clone())], "zerocopy");
        let family: Vec<Row> = (0..39)
            .map(|i| Row {
                fft_len: 16 << (i / 3),
                overlap_pct: [10, 50, 90][i % 3],
                ..row(edge.clone())
            })
            .collect();
        let among = improvement(&family, "zerocopy");
        assert_eq!((among.len(), among[0].comparisons), (39, 39));
        assert!(alone[0].measurable(), "{alone:?}");
        assert!(among[0].high - among[0].low > 2.0 * (alone[0].high - alone[0].low));
        assert!(!among[0].measurable(), "{:?}", among[0]);
    }

    #[test]
    fn tiny_run_is_consistent() {
        let cfg = Config::at(&Setup::TINY);
        let m = run(&cfg, &mut |_| {}).unwrap();
        let rows = &m.rows;
        // bare, bare-copy, zerocopy and copy per (N, overlap).
        assert_eq!(rows.len(), 2 * 2 * 4);
        for r in rows {
            assert!(
                r.spread.median.is_finite() && r.spread.median > 0.0,
                "{r:?}"
            );
            // One ratio per run on the in-place rows, none elsewhere.
            let with = matches!(r.mode, "zerocopy" | "bare");
            assert_eq!(r.ratios.len(), usize::from(with), "{r:?}");
        }
        assert_eq!(rows.iter().filter(|r| r.mode == "bare").count(), 4);
        assert_eq!(improvement(rows, "bare").len(), 4);
        // One per (N, overlap), in the JSON too, each corrected over all four
        // (no GNU Radio rows at this size).
        assert_eq!(improvement(rows, "zerocopy").len(), 4);
        assert!(m.gnuradio.is_empty());
        let j = report(&cfg, &m).json;
        assert_eq!(j["improvement"].as_array().unwrap().len(), 4);
        assert_eq!(j["improvement"][0]["comparisons"], 4);
        assert!(render(rows).contains("Bonferroni"));
    }
}
