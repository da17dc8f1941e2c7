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
            runs: 3,
            fft_lens: (4..=16).map(|k| 1 << k).collect(),
            overlaps: vec![10, 25, 50, 75, 90],
        }
    }

    /// A shorter run (under a minute): 4 MiB of samples, three overlaps.
    pub fn quick() -> Self {
        Config {
            samples: 1 << 20,
            runs: 5,
            overlaps: vec![10, 50, 90],
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

/// Runs the filter as a graph; returns seconds and the output's bit sum.
fn graph_run(taps: &[f32], n: usize, samples: usize, mode: Mode) -> Result<(f64, u32), Error> {
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
    let pattern = Arc::new(noise(1 << 16, 0x1234_5678));
    g.node("source", move || {
        let mut left = samples;
        let mut at = 0;
        while left > 0 {
            let k = left.min(chunk);
            let slots = src.reserve(k)?;
            let mut filled = 0;
            while filled < k {
                let m = (k - filled).min(pattern.len() - at);
                slots[filled..filled + m].copy_from_slice(&pattern[at..at + m]);
                filled += m;
                at = (at + m) % pattern.len();
            }
            src.commit(k)?;
            left -= k;
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

/// The same transforms in a plain loop over an in-memory signal.
fn bare_run(taps: &[f32], n: usize, samples: usize) -> Result<(f64, u32), Error> {
    let mut fir = OverlapSave::new(taps, Some(n)).map_err(|e| Error::Peer {
        peer: "fir",
        reason: e.to_string(),
    })?;
    let (l, hop) = (fir.taps(), fir.hop());
    let nb = blocks(samples, hop);
    // Zero initial state before, zero padding after, the same samples as the graph.
    let pattern = noise(1 << 16, 0x1234_5678);
    let mut signal = vec![0f32; l - 1 + nb * hop + n];
    for (i, x) in signal[l - 1..l - 1 + samples].iter_mut().enumerate() {
        *x = pattern[i % pattern.len()];
    }
    // Non-zero fill: the pages are touched now, not inside the timed loop.
    let mut out = vec![1f32; nb * hop];
    let t0 = Instant::now();
    for (k, o) in out.chunks_exact_mut(hop).enumerate() {
        fir.process_block(&signal[k * hop..k * hop + n], o);
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok((secs, bits_sum(&out[..samples])))
}

/// Runs the experiment; `progress` hears about each measurement.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
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
            let mut sums = Vec::new();
            for run in 0..cfg.runs {
                progress(&format!(
                    "fir N={n} overlap {pct}% run {}/{}",
                    run + 1,
                    cfg.runs
                ));
                if measured {
                    let (t, s) = graph_run(&taps, n, cfg.samples, Mode::ZeroCopy)?;
                    zc.push(flops / t / 1e6);
                    sums.push(("zerocopy", s));
                    let (t, s) = graph_run(&taps, n, cfg.samples, Mode::Copy)?;
                    cp.push(flops / t / 1e6);
                    sums.push(("copy", s));
                }
                if pct == BARE_OVERLAP {
                    let (t, s) = bare_run(&taps, n, cfg.samples)?;
                    bare.push(flops / t / 1e6);
                    sums.push(("bare", s));
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
            for (mode, v) in [("zerocopy", &zc), ("copy", &cp), ("bare", &bare)] {
                if !v.is_empty() {
                    rows.push(Row {
                        fft_len: n,
                        overlap_pct: pct,
                        mode,
                        taps: l,
                        mflops: median(v),
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

/// Percentage improvement of zero-copy over manual copy per FFT length (mean over
/// the overlaps measured).
pub fn improvement(rows: &[Row]) -> Vec<(usize, f64)> {
    let mut lens: Vec<usize> = rows.iter().map(|r| r.fft_len).collect();
    lens.dedup();
    lens.into_iter()
        .filter_map(|n| {
            let gains: Vec<f64> = rows
                .iter()
                .filter(|r| r.fft_len == n && r.mode == "zerocopy")
                .filter_map(|r| {
                    find(rows, n, r.overlap_pct, "copy").map(|c| (r.mflops / c - 1.0) * 100.0)
                })
                .collect();
            (!gains.is_empty()).then(|| (n, gains.iter().sum::<f64>() / gains.len() as f64))
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
    out += "\nzero-copy over manual copy, and zero-copy against the bare loop (at 50 % overlap):\n";
    let imp: Vec<Vec<String>> = improvement(rows)
        .into_iter()
        .map(|(n, g)| {
            let ratio = match (
                find(rows, n, BARE_OVERLAP, "zerocopy"),
                find(rows, n, BARE_OVERLAP, "bare"),
            ) {
                (Some(z), Some(b)) => format!("{:.0}%", z / b * 100.0),
                _ => "-".into(),
            };
            vec![n.to_string(), format!("{g:+.1}%"), ratio]
        })
        .collect();
    out += &table(&["N", "improvement", "zero-copy / bare"], &imp);
    out
}

/// One sentence: the zero-copy queue's improvement over copying across FFT
/// lengths, and how close zero-copy comes to the bare loop.
pub fn answer(rows: &[Row]) -> String {
    let imp = improvement(rows);
    if imp.is_empty() {
        return sentence(&[]);
    }
    let gains: Vec<f64> = imp.iter().map(|&(_, g)| g).collect();
    let (lo, hi) = gains
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &g| {
            (a.min(g), b.max(g))
        });
    let mut clauses = vec![format!(
        "zero-copy queues run the filter {:+.1} % faster than copying windows out \
         (median over {} FFT lengths, from {lo:+.1} % to {hi:+.1} %)",
        median(&gains),
        gains.len()
    )];
    let shares: Vec<f64> = imp
        .iter()
        .filter_map(|&(n, _)| {
            find(rows, n, BARE_OVERLAP, "zerocopy")
                .zip(find(rows, n, BARE_OVERLAP, "bare"))
                .map(|(z, b)| z / b * 100.0)
        })
        .collect();
    if !shares.is_empty() {
        clauses.push(format!(
            "at {BARE_OVERLAP} % overlap zero-copy runs at {:.0} % of the bare loop (median)",
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
        })).collect::<Vec<_>>(),
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
        series: vec![Series::new(
            "zero-copy over manual copy",
            improvement(rows)
                .into_iter()
                .map(|(n, g)| (n as f64, g))
                .collect(),
        )],
    }
}

/// The run as a report: table, improvement against FFT length, MFLOPS.
pub fn report(cfg: &Config, rows: &[Row]) -> super::report::Report {
    super::report::Report {
        experiment: "fir",
        heading: format!(
            "fir: {} samples per point, median of {} runs; MFLOPS = (10 N log2 N + 6 N) per block / time \
             (N log2 N counts complex-FFT flops, as paper 001 does)",
            cfg.samples, cfg.runs
        ),
        answer: answer(rows),
        targets: Vec::new(),
        text: render(rows),
        json: json(rows),
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
    fn tiny_run_is_consistent() {
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        // zerocopy + copy per (N, overlap), one bare per N.
        assert_eq!(rows.len(), 2 * 2 * 2 + 2);
        for r in &rows {
            assert!(r.mflops.is_finite() && r.mflops > 0.0, "{r:?}");
        }
        assert_eq!(rows.iter().filter(|r| r.mode == "bare").count(), 2);
        let imp = improvement(&rows);
        assert_eq!(imp.len(), 2);
        // The improvement is what the table's own numbers say.
        let z = find(&rows, 16, 10, "zerocopy").unwrap();
        let c = find(&rows, 16, 10, "copy").unwrap();
        let z50 = find(&rows, 16, 50, "zerocopy").unwrap();
        let c50 = find(&rows, 16, 50, "copy").unwrap();
        let want = ((z / c - 1.0) + (z50 / c50 - 1.0)) * 50.0;
        assert!((imp[0].1 - want).abs() < 1e-9);
        let j = json(&rows);
        assert_eq!(j["experiment"], "fir");
        assert_eq!(j["rows"].as_array().unwrap().len(), rows.len());
        assert!(render(&rows).contains("improvement"));
        let dir = tempfile::tempdir().unwrap();
        plot(&rows, &dir.path().join("fir.svg")).unwrap();
    }
}
