//! `dmaflow bench fir`: paper 001's measurement (Figs. 3-6). A frequency-domain FIR
//! filter runs as a graph (source -> FIR -> sink) over a long stream, with the FIR
//! node reading its windows in place (zero-copy) or by manual overlap copy, for FFT
//! lengths 16 to 65536 and filter lengths (= overlap) from about 10 % to 90 % of the
//! FFT length. A "bare" loop of the same transforms over an in-memory signal, with
//! no queue and no graph, is the ceiling.
//!
//! MFLOPS use the paper's count, `10 N log2 N + 6 N` per block: `N log2 N` counts
//! complex-FFT flops, as the paper (and FFTW) do.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use serde_json::json;

use super::plot::{LinePlot, Series, write_svg};
use super::report::sentence;
use super::spread::Spread;
use super::{Error, median, table};
use dmaflow::dsp::fir::{Mode, OverlapSave, add_node, flops_per_block};
use dmaflow::graph::Graph;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Samples streamed per measurement.
    pub samples: usize,
    /// Measurements per point; the median is reported.
    pub runs: usize,
    /// FFT lengths (powers of two).
    pub fft_lens: Vec<usize>,
    /// Filter length as a percentage of the FFT length.
    pub overlaps: Vec<u32>,
}

/// Overlap at which the bare ceiling is measured.
pub const BARE_OVERLAP: u32 = 50;

impl Config {
    /// The full experiment: 64 MiB of samples per point, more than the last-level
    /// cache holds (several minutes).
    pub fn full() -> Self {
        Config {
            samples: 1 << 24,
            runs: 5,
            fft_lens: (4..=16).map(|k| 1 << k).collect(),
            overlaps: vec![10, 50, 90],
        }
    }

    /// A shorter run (about a minute): 16 MiB of samples, three overlaps.
    pub fn quick() -> Self {
        Config {
            samples: 1 << 22,
            runs: 5,
            ..Self::full()
        }
    }

    /// A tiny run for tests.
    pub fn tiny() -> Self {
        Config {
            samples: 1 << 14,
            runs: 1,
            fft_lens: vec![16, 1024],
            overlaps: vec![10, 50],
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
    /// Median MFLOPS by the paper's count.
    pub mflops: f64,
    /// MFLOPS over the runs: median, quartiles, range, runs.
    pub spread: Spread,
    /// On `zerocopy` rows: zero-copy over copy MFLOPS, one ratio per
    /// interleaved pair of runs (empty on the others).
    pub ratios: Vec<f64>,
}

/// The improvement of zero-copy over copy at one FFT length and overlap (paper
/// 001's gain grows with the overlap, so overlaps are not pooled), with its
/// confidence interval: Student's t over the interleaved pairs of runs,
/// Bonferroni-corrected so that all the table's intervals hold together with
/// [`FAMILY_CONFIDENCE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Improvement {
    /// FFT length N.
    pub fft_len: usize,
    /// Filter length as a percentage of N.
    pub overlap_pct: u32,
    /// Mean improvement, in percent.
    pub pct: f64,
    /// Lower end of the interval, in percent.
    pub low: f64,
    /// Upper end of the interval, in percent.
    pub high: f64,
    /// Comparisons in the family the interval is corrected for.
    pub comparisons: usize,
    /// Interleaved pairs of runs the interval is made of.
    pub pairs: usize,
}

/// The confidence with which every interval of a run holds at once.
pub const FAMILY_CONFIDENCE: f64 = 0.95;

impl Improvement {
    /// Whether the interval excludes zero.
    pub fn measurable(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }

    /// As JSON: the point, the mean and its interval, the family it is
    /// corrected over and the pairs it is made of.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "fft_len": self.fft_len,
            "overlap_pct": self.overlap_pct,
            "pct": self.pct,
            "ci_low": self.low,
            "ci_high": self.high,
            "family_confidence": FAMILY_CONFIDENCE,
            "comparisons": self.comparisons,
            "pairs": self.pairs,
            "measurable": self.measurable(),
        })
    }
}

/// Student's t quantile: the `p` quantile with `df` degrees of freedom
/// (infinite with none).
pub fn t_quantile(p: f64, df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) if df > 0 => t.inverse_cdf(p),
        _ => f64::INFINITY,
    }
}

/// Filter length for an overlap percentage: at least 1, at most N.
pub fn taps_for(fft_len: usize, pct: u32) -> usize {
    ((fft_len as f64 * pct as f64 / 100.0).round() as usize).clamp(1, fft_len)
}

/// A repeatable pseudo-random signal in [-1, 1).
fn noise(n: usize, mut seed: u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Wrapping sum of the bits of the samples: identical outputs give identical sums.
fn bits_sum(s: &[f32]) -> u32 {
    s.iter().fold(0u32, |a, x| a.wrapping_add(x.to_bits()))
}

/// Number of blocks the filter runs for `samples` samples.
fn blocks(samples: usize, hop: usize) -> usize {
    samples.div_ceil(hop)
}

/// Runs the filter as a graph over `signal` (all of it, streamed from memory
/// larger than the last-level cache); returns seconds and the output's bit sum.
fn graph_run(
    taps: &[f32],
    n: usize,
    signal: &Arc<Vec<f32>>,
    mode: Mode,
) -> Result<(f64, u32), Error> {
    let fir = OverlapSave::new(taps, Some(n)).map_err(|e| Error::Peer {
        peer: "fir",
        reason: e.to_string(),
    })?;
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
    let sum = Arc::new(AtomicU32::new(0));
    let s2 = sum.clone();
    g.node("sink", move || {
        let mut acc = 0u32;
        loop {
            let s = sink.peek(chunk)?;
            if s.is_empty() {
                break;
            }
            acc = acc.wrapping_add(bits_sum(s));
            let k = s.len();
            sink.consume(k)?;
        }
        s2.store(acc, Ordering::Relaxed);
        Ok(())
    })?;
    let t0 = Instant::now();
    g.run()?;
    Ok((t0.elapsed().as_secs_f64(), sum.load(Ordering::Relaxed)))
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
    let mut fir = OverlapSave::new(taps, Some(n)).map_err(|e| Error::Peer {
        peer: "fir",
        reason: e.to_string(),
    })?;
    let (l, hop) = (fir.taps(), fir.hop());
    let nb = blocks(samples, hop);
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
    Ok((secs, bits_sum(&out[..samples])))
}

/// Runs the experiment; `progress` hears about each measurement. Zero-copy and
/// copy runs alternate (ABAB...), so drift of the machine falls on both: on one
/// thread (paper 001's condition: `bare` reads windows in place, `bare-copy`
/// copies them out) and in the three-thread graph (`zerocopy`, `copy`).
pub fn run_rows(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    // One signal for every run, larger than the last-level cache at full size.
    let signal = Arc::new(noise(cfg.samples, 0x1234_5678));
    let mut rows = Vec::new();
    for &n in &cfg.fft_lens {
        let mut overlaps = cfg.overlaps.clone();
        if !overlaps.contains(&BARE_OVERLAP) {
            overlaps.push(BARE_OVERLAP);
            overlaps.sort_unstable();
        }
        for &pct in &overlaps {
            let l = taps_for(n, pct);
            let taps = noise(l, 0xF1F1 + l as u64);
            let hop = n - l + 1;
            let flops = blocks(cfg.samples, hop) as f64 * flops_per_block(n);
            let measured = cfg.overlaps.contains(&pct);
            let mut zc = Vec::new();
            let mut cp = Vec::new();
            let mut bare = Vec::new();
            let mut bare_cp = Vec::new();
            let mut sums = Vec::new();
            for run in 0..cfg.runs {
                progress(&format!(
                    "fir N={n} overlap {pct}% run {}/{}",
                    run + 1,
                    cfg.runs
                ));
                if measured {
                    // Alternate which goes first, so neither always follows
                    // the other's cache state.
                    let order = if run % 2 == 0 {
                        [Mode::ZeroCopy, Mode::Copy]
                    } else {
                        [Mode::Copy, Mode::ZeroCopy]
                    };
                    for mode in order {
                        let (t, s) = graph_run(&taps, n, &signal, mode)?;
                        if mode == Mode::ZeroCopy {
                            zc.push(flops / t / 1e6);
                            sums.push(("zerocopy", s));
                        } else {
                            cp.push(flops / t / 1e6);
                            sums.push(("copy", s));
                        }
                    }
                }
                if measured || pct == BARE_OVERLAP {
                    let order = if run % 2 == 0 {
                        [true, false]
                    } else {
                        [false, true]
                    };
                    for in_place in order {
                        if in_place {
                            let (t, s) = single_thread_run(&taps, n, &signal, true)?;
                            bare.push(flops / t / 1e6);
                            sums.push(("bare", s));
                        } else {
                            let (t, s) = single_thread_run(&taps, n, &signal, false)?;
                            bare_cp.push(flops / t / 1e6);
                            sums.push(("bare-copy", s));
                        }
                    }
                }
            }
            let first = sums.first().map(|&(_, s)| s);
            if let Some(&(mode, bad)) = sums.iter().find(|&&(_, s)| Some(s) != first) {
                return Err(Error::Corrupted {
                    what: format!("fir N={n} overlap {pct}% {mode} output"),
                    got: bad,
                    expected: first.unwrap_or_default(),
                });
            }
            let ratios: Vec<f64> = zc.iter().zip(&cp).map(|(z, c)| z / c).collect();
            let bare_ratios: Vec<f64> = bare.iter().zip(&bare_cp).map(|(z, c)| z / c).collect();
            for (mode, v) in [
                ("bare", &bare),
                ("bare-copy", &bare_cp),
                ("zerocopy", &zc),
                ("copy", &cp),
            ] {
                if !v.is_empty() {
                    rows.push(Row {
                        fft_len: n,
                        overlap_pct: pct,
                        mode,
                        taps: l,
                        mflops: median(v),
                        spread: Spread::of(v),
                        ratios: match mode {
                            "zerocopy" => ratios.clone(),
                            "bare" if measured => bare_ratios.clone(),
                            _ => Vec::new(),
                        },
                    });
                }
            }
        }
    }
    Ok(rows)
}

fn find(rows: &[Row], n: usize, pct: u32, mode: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.fft_len == n && r.overlap_pct == pct && r.mode == mode)
        .map(|r| r.mflops)
}

/// The improvement of zero-copy over manual copy per FFT length and overlap:
/// the mean of the interleaved pairs' ratios, with an interval corrected for
/// every comparison the run makes (Bonferroni: each at 1 - 0.05 / m).
pub fn improvement(rows: &[Row]) -> Vec<Improvement> {
    improvement_of(rows, "zerocopy")
}

/// The same on one thread (paper 001's condition): `bare` over `bare-copy`.
pub fn improvement_single(rows: &[Row]) -> Vec<Improvement> {
    improvement_of(rows, "bare")
}

/// The improvement of the rows of `mode` (those carrying pair ratios), with
/// intervals corrected over that family.
fn improvement_of(rows: &[Row], mode: &str) -> Vec<Improvement> {
    let points: Vec<&Row> = rows
        .iter()
        .filter(|r| r.mode == mode && !r.ratios.is_empty())
        .collect();
    let m = points.len();
    let p = 1.0 - (1.0 - FAMILY_CONFIDENCE) / 2.0 / m.max(1) as f64;
    points
        .into_iter()
        .map(|r| {
            let gains: Vec<f64> = r.ratios.iter().map(|q| (q - 1.0) * 100.0).collect();
            let k = gains.len() as f64;
            let mean = gains.iter().sum::<f64>() / k;
            let half = if gains.len() > 1 {
                let var = gains.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (k - 1.0);
                t_quantile(p, gains.len() - 1) * (var / k).sqrt()
            } else {
                f64::INFINITY
            };
            Improvement {
                fft_len: r.fft_len,
                overlap_pct: r.overlap_pct,
                pct: mean,
                low: mean - half,
                high: mean + half,
                comparisons: m,
                pairs: gains.len(),
            }
        })
        .collect()
}

/// The table of every point, then the improvement per FFT length and the queue's
/// cost against the bare loop.
pub fn render(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.fft_len.to_string(),
                format!("{}%", r.overlap_pct),
                r.taps.to_string(),
                r.mode.to_string(),
                format!("{:.0}", r.mflops),
            ]
        })
        .collect();
    let mut out = table(&["N", "overlap", "taps", "mode", "MFLOPS"], &cells);
    let verdict = |i: &Improvement| {
        if i.measurable() {
            if i.pct > 0.0 {
                "zero-copy faster"
            } else {
                "copy faster"
            }
        } else {
            "no measurable difference"
        }
        .to_string()
    };
    let single = improvement_single(rows);
    if !single.is_empty() {
        out += &format!(
            "\non one thread (paper 001's condition): windows in place (bare) over the manual copy \
             (bare-copy), per FFT length and overlap ({} intervals, Bonferroni-corrected to hold \
             together with {:.0} % confidence):\n",
            single.len(),
            FAMILY_CONFIDENCE * 100.0
        );
        let cells: Vec<Vec<String>> = single
            .iter()
            .map(|i| {
                vec![
                    i.fft_len.to_string(),
                    format!("{}%", i.overlap_pct),
                    format!("{:+.1}%", i.pct),
                    format!("{:+.1}% .. {:+.1}%", i.low, i.high),
                    verdict(i),
                ]
            })
            .collect();
        out += &table(
            &["N", "overlap", "improvement", "interval", "verdict"],
            &cells,
        );
    }
    let imp = improvement(rows);
    out += &format!(
        "\nin the three-thread graph (source, filter, sink): zero-copy over manual copy per FFT \
         length and overlap ({} intervals, Bonferroni-corrected to hold together with {:.0} % \
         confidence), and the graph's zero-copy against the one-thread loop at {BARE_OVERLAP} % \
         overlap:\n",
        imp.len(),
        FAMILY_CONFIDENCE * 100.0
    );
    let imp: Vec<Vec<String>> = imp
        .iter()
        .map(|i| {
            let n = i.fft_len;
            let ratio = match (
                find(rows, n, BARE_OVERLAP, "zerocopy"),
                find(rows, n, BARE_OVERLAP, "bare"),
            ) {
                (Some(z), Some(b)) if i.overlap_pct == BARE_OVERLAP => {
                    format!("{:.0}%", z / b * 100.0)
                }
                _ => "-".into(),
            };
            vec![
                n.to_string(),
                format!("{}%", i.overlap_pct),
                format!("{:+.1}%", i.pct),
                format!("{:+.1}% .. {:+.1}%", i.low, i.high),
                verdict(i),
                ratio,
            ]
        })
        .collect();
    out += &table(
        &[
            "N",
            "overlap",
            "improvement",
            "interval",
            "verdict",
            "zero-copy / bare",
        ],
        &imp,
    );
    out
}

/// One sentence: at how many (FFT length, overlap) points zero-copy is
/// measurably faster or slower than copying (corrected intervals), the range
/// of the improvement, and how close zero-copy comes to the bare loop.
pub fn answer(rows: &[Row]) -> String {
    let imp = improvement(rows);
    let single = improvement_single(rows);
    if imp.is_empty() && single.is_empty() {
        return sentence(&[]);
    }
    let clause = |what: &str, imp: &[Improvement]| {
        let faster: Vec<&Improvement> = imp
            .iter()
            .filter(|i| i.measurable() && i.pct > 0.0)
            .collect();
        let slower = imp.iter().filter(|i| i.measurable() && i.pct < 0.0).count();
        let same = imp.len() - faster.len() - slower;
        let lens = faster
            .iter()
            .map(|i| format!("{} at {} %", i.fft_len, i.overlap_pct))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{what} reading windows in place is measurably faster than copying them out at {} of {} \
             points (FFT length and overlap){}, measurably slower at {slower}, and shows no \
             measurable difference at {same} (intervals Bonferroni-corrected to 95 % together; \
             means from {:+.1} % to {:+.1} %)",
            faster.len(),
            imp.len(),
            if faster.is_empty() {
                String::new()
            } else {
                format!(" (N = {lens})")
            },
            imp.iter().map(|i| i.pct).fold(f64::INFINITY, f64::min),
            imp.iter().map(|i| i.pct).fold(f64::NEG_INFINITY, f64::max),
        )
    };
    let mut clauses = Vec::new();
    if !single.is_empty() {
        clauses.push(clause("on one thread (paper 001's condition)", &single));
    }
    if !imp.is_empty() {
        clauses.push(clause("in the three-thread graph", &imp));
    }
    let shares: Vec<f64> = imp
        .iter()
        .filter_map(|i| {
            find(rows, i.fft_len, BARE_OVERLAP, "zerocopy")
                .zip(find(rows, i.fft_len, BARE_OVERLAP, "bare"))
                .map(|(z, b)| z / b * 100.0)
        })
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

/// The result as `{"experiment":"fir","rows":[...]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "fir",
        "flops": "10 N log2 N + 6 N per block; N log2 N counts complex-FFT flops, as paper 001 does",
        "rows": rows.iter().map(|r| json!({
            "fft_len": r.fft_len,
            "overlap_pct": r.overlap_pct,
            "mode": r.mode,
            "taps": r.taps,
            "mflops": r.mflops,
            "mflops_spread": r.spread.json(),
        })).collect::<Vec<_>>(),
        "improvement_single_thread": improvement_single(rows).iter().map(Improvement::json).collect::<Vec<_>>(),
        "improvement": improvement(rows).iter().map(Improvement::json).collect::<Vec<_>>(),
    })
}

/// Writes the improvement-vs-FFT-length plot (the shape of paper 001 Figs. 4, 6).
pub fn plot(rows: &[Row], path: &Path) -> Result<(), super::plot::PlotError> {
    write_svg(path, &line_plot(rows))
}

/// The improvement of zero-copy over manual copy against the FFT length.
pub fn line_plot(rows: &[Row]) -> LinePlot {
    LinePlot {
        title: "FIR filter: zero-copy queue improvement over manual copy".into(),
        x_label: "FFT length N (samples)".into(),
        y_label: "zero-copy over copy (% faster)".into(),
        x: super::plot::XAxis::PowersOfTwo,
        log_y: false,
        series: {
            let imp = improvement(rows);
            let mut overlaps: Vec<u32> = imp.iter().map(|i| i.overlap_pct).collect();
            overlaps.sort_unstable();
            overlaps.dedup();
            overlaps
                .into_iter()
                .map(|o| {
                    let at: Vec<&Improvement> = imp.iter().filter(|i| i.overlap_pct == o).collect();
                    Series {
                        label: format!("{o} % overlap (mean, corrected 95 % interval)"),
                        points: at.iter().map(|i| (i.fft_len as f64, i.pct)).collect(),
                        interval: at
                            .iter()
                            .filter(|i| i.low.is_finite() && i.high.is_finite())
                            .map(|i| (i.low, i.high))
                            .collect(),
                    }
                })
                .collect()
        },
    }
}

/// The run as a report: table, improvement against FFT length, MFLOPS.
pub fn report(cfg: &Config, m: &Measured) -> super::report::Report {
    let rows = &m.rows;
    let (gr_text, targets) = gnuradio_text(&m.gnuradio);
    super::report::Report {
        experiment: "fir",
        heading: format!(
            "fir: {} samples ({} MiB, streamed from memory larger than the last-level cache) per \
             point, {} interleaved zero-copy/copy pairs per point (median MFLOPS; improvement = mean \
             of the pairs' ratios per FFT length and overlap, intervals Bonferroni-corrected); \
             on one thread (paper 001's condition) bare reads windows in place and bare-copy copies \
             them out; in the graph source, filter and sink each on a thread; nominal MFLOPS = \
             (10 N log2 N + 6 N) per block / time (paper 001's count for a complex N-point FFT; \
             the code runs an N/2-point complex FFT and a real inverse)",
            cfg.samples,
            (cfg.samples * 4) >> 20,
            cfg.runs
        ),
        answer: answer(rows),
        targets,
        text: render(rows) + &gr_text,
        json: {
            let mut j = json(rows);
            j["gnuradio"] = json!(
                m.gnuradio
                    .iter()
                    .map(|g| json!({
                        "taps": g.taps,
                        "fft_len": g.fft_len,
                        "dmaflow_msamples_per_s": median(&g.dmaflow) ,
                        "gnuradio_msamples_per_s": median(&g.gnuradio),
                        "ratio": g.ratio().0,
                        "ratio_min": g.ratio().1,
                        "ratio_max": g.ratio().2,
                        "rounds": g.dmaflow.len(),
                    }))
                    .collect::<Vec<_>>()
            );
            j
        },
        plots: vec![
            line_plot(rows),
            LinePlot {
                title: "FIR filter throughput".into(),
                x_label: "FFT length N (samples)".into(),
                y_label: "throughput (MFLOPS)".into(),
                x: super::plot::XAxis::PowersOfTwo,
                log_y: false,
                series: super::report::series_by(
                    rows,
                    |r| {
                        if r.mode == "bare" {
                            "bare loop".into()
                        } else {
                            format!("{} {} %", r.mode, r.overlap_pct)
                        }
                    },
                    |r| r.fft_len as f64,
                    |r| r.mflops,
                ),
            },
        ],
    }
}

/// GNU Radio's `fft_filter_fff` beside dmaflow's filter at one tap count.
#[derive(Debug, Clone)]
pub struct GrRow {
    /// Taps.
    pub taps: usize,
    /// dmaflow's FFT length for them (its default).
    pub fft_len: usize,
    /// dmaflow's graph, M samples/s per round.
    pub dmaflow: Vec<f64>,
    /// GNU Radio's flowgraph, M samples/s per round.
    pub gnuradio: Vec<f64>,
}

impl GrRow {
    /// dmaflow over GNU Radio: the median of the rounds' ratios, min, max.
    pub fn ratio(&self) -> (f64, f64, f64) {
        let super::spread::Ratio(s) = super::spread::Ratio::of(&self.dmaflow, &self.gnuradio);
        (s.median, s.min, s.max)
    }
}

/// What `dmaflow bench fir` measured: paper 001's rows and, where GNU Radio
/// is installed, GNU Radio's filter beside dmaflow's.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Zero-copy, copy and bare rows.
    pub rows: Vec<Row>,
    /// GNU Radio's comparison (empty without GNU Radio).
    pub gnuradio: Vec<GrRow>,
}

/// Tap counts of the GNU Radio comparison.
const GR_TAPS: [usize; 4] = [16, 64, 256, 1024];

/// The script that runs GNU Radio's filter.
const GR_SCRIPT: &str = include_str!("../../../scripts/gnuradio_fir_bench.py");

/// Runs the experiment: paper 001's rows, then GNU Radio's `fft_filter_fff`
/// (file source -> filter on one thread -> null sink, the same samples and
/// taps, the file in the page cache) against dmaflow's graph (memory source ->
/// overlap-save zero-copy -> checksum sink, the filter's default FFT length),
/// rounds alternating, where GNU Radio is installed.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Measured, Error> {
    let rows = run_rows(cfg, &mut progress)?;
    let mut gnuradio = Vec::new();
    if cfg.samples >= 1 << 20 && super::net::gnuradio_here() {
        let signal = Arc::new(noise(cfg.samples, 0x1234_5678));
        let dir = std::env::temp_dir().join(format!("dmaflow-fir-gr-{}", std::process::id()));
        let io = |e: std::io::Error| Error::Io {
            path: dir.display().to_string(),
            source: e,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let sig_path = dir.join("signal.f32");
        std::fs::write(&sig_path, f32s(&signal)).map_err(io)?;
        for &l in &GR_TAPS {
            let taps = noise(l, 0xF1F1 + l as u64);
            let taps_path = dir.join("taps.f32");
            std::fs::write(&taps_path, f32s(&taps)).map_err(io)?;
            let n = OverlapSave::new(&taps, None)
                .map_err(|e| Error::Peer {
                    peer: "fir",
                    reason: e.to_string(),
                })?
                .fft_len();
            let mut g = GrRow {
                taps: l,
                fft_len: n,
                dmaflow: Vec::new(),
                gnuradio: Vec::new(),
            };
            for round in 0..cfg.runs {
                progress(&format!(
                    "fir: {l} taps against GNU Radio, round {}",
                    round + 1
                ));
                for first in [round % 2 == 0, round % 2 == 1] {
                    if first {
                        let (t, _) = graph_run(&taps, n, &signal, Mode::ZeroCopy)?;
                        g.dmaflow.push(cfg.samples as f64 / t / 1e6);
                    } else {
                        let out = std::process::Command::new("/usr/bin/python3")
                            .args(["-c", GR_SCRIPT])
                            .arg(&sig_path)
                            .arg(&taps_path)
                            .output()
                            .map_err(io)?;
                        let t: f64 = String::from_utf8_lossy(&out.stdout)
                            .trim()
                            .parse()
                            .map_err(|_| Error::Peer {
                                peer: "gnuradio",
                                reason: String::from_utf8_lossy(&out.stderr).into_owned(),
                            })?;
                        g.gnuradio.push(cfg.samples as f64 / t / 1e6);
                    }
                }
            }
            gnuradio.push(g);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(Measured { rows, gnuradio })
}

/// The GNU Radio comparison as text, with its targets.
fn gnuradio_text(g: &[GrRow]) -> (String, Vec<super::report::Target>) {
    if g.is_empty() {
        return (
            "against GNU Radio's fft_filter_fff: skipped: GNU Radio not installed\n".into(),
            Vec::new(),
        );
    }
    let cells: Vec<Vec<String>> = g
        .iter()
        .map(|r| {
            let (m, lo, hi) = r.ratio();
            vec![
                r.taps.to_string(),
                r.fft_len.to_string(),
                format!("{:.1}", median(&r.dmaflow)),
                format!("{:.1}", median(&r.gnuradio)),
                format!("{m:.2}x ({lo:.2}..{hi:.2})"),
            ]
        })
        .collect();
    let mut text = String::from(
        "\nagainst GNU Radio's fft_filter_fff (file source -> filter, one thread -> null \
         sink; dmaflow: memory source -> overlap-save zero-copy -> checksum sink), M samples/s, \
         medians, rounds alternating:\n",
    );
    text += &table(
        &[
            "taps",
            "dmaflow_fft",
            "dmaflow",
            "gnuradio",
            "dmaflow/gnuradio",
        ],
        &cells,
    );
    let targets: Vec<super::report::Target> = g
        .iter()
        .map(|r| {
            let (m, _, _) = r.ratio();
            super::report::Target::new(
                format!("{} taps: dmaflow >= 1.2x GNU Radio", r.taps),
                format!("{m:.2}x"),
                m >= 1.2,
            )
        })
        .collect();
    text += &super::report::Target::lines(&targets);
    (text, targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_follow_the_overlap() {
        assert_eq!(taps_for(16, 10), 2);
        assert_eq!(taps_for(1024, 50), 512);
        assert_eq!(taps_for(16, 0), 1);
        assert_eq!(taps_for(16, 100), 16);
    }

    #[test]
    fn t_quantiles_are_students() {
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
            mflops: 1.0,
            spread: Spread::of(&[1.0]),
            ratios,
        };
        // Ratios 0.99 and 1.01: mean 0 %, interval about +-12.7 %.
        let same = improvement(&[row(vec![0.99, 1.01])]);
        assert!(same[0].pct.abs() < 1e-9);
        assert!(!same[0].measurable(), "{same:?}");
        // Five ratios near 1.10: measurably faster.
        let faster = improvement(&[row(vec![1.09, 1.10, 1.11, 1.10, 1.10])]);
        assert!((faster[0].pct - 10.0).abs() < 1e-6);
        assert!(faster[0].measurable() && faster[0].low > 9.0, "{faster:?}");
        assert!(answer(&[row(vec![0.99, 1.01])]).contains("no measurable difference at 1"));
        // The same ratios among 39 comparisons get a wider interval
        // (Bonferroni), and a gain that is clear alone may not be then.
        let edge = vec![1.02, 1.03, 1.01, 1.02, 1.02];
        let alone = improvement(&[row(edge.clone())]);
        let family: Vec<Row> = (0..39)
            .map(|i| Row {
                fft_len: 16 << (i / 3),
                overlap_pct: [10, 50, 90][i % 3],
                ..row(edge.clone())
            })
            .collect();
        let among = improvement(&family);
        assert_eq!((among.len(), among[0].comparisons), (39, 39));
        assert!(alone[0].measurable(), "{alone:?}");
        assert!(among[0].high - among[0].low > 2.0 * (alone[0].high - alone[0].low));
        assert!(!among[0].measurable(), "{:?}", among[0]);
    }

    #[test]
    fn tiny_run_is_consistent() {
        let rows = run_rows(&Config::tiny(), |_| {}).unwrap();
        // bare, bare-copy, zerocopy and copy per (N, overlap).
        assert_eq!(rows.len(), 2 * 2 * 4);
        for r in &rows {
            assert!(r.mflops.is_finite() && r.mflops > 0.0, "{r:?}");
            // One ratio per run on the in-place rows, none elsewhere.
            let with = matches!(r.mode, "zerocopy" | "bare");
            assert_eq!(r.ratios.len(), usize::from(with), "{r:?}");
        }
        assert_eq!(rows.iter().filter(|r| r.mode == "bare").count(), 4);
        assert_eq!(improvement_single(&rows).len(), 4);
        let imp = improvement(&rows);
        // One per (N, overlap).
        assert_eq!(imp.len(), 4);
        let j = json(&rows);
        assert_eq!(j["experiment"], "fir");
        assert_eq!(j["rows"].as_array().unwrap().len(), rows.len());
        assert_eq!(j["improvement"].as_array().unwrap().len(), 4);
        assert_eq!(j["improvement"][0]["comparisons"], 4);
        assert!(render(&rows).contains("Bonferroni"));
        let dir = tempfile::tempdir().unwrap();
        plot(&rows, &dir.path().join("fir.svg")).unwrap();
    }
}
