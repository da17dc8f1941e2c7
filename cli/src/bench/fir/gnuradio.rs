//! GNU Radio's `fft_filter_fff` beside dmaflow's graph, on the same samples and
//! taps: each at its default FFT length and at the other's, rounds in turns,
//! every output checked against one f64 reference; and where dmaflow's win
//! comes from (the FFT length's factor times the same-FFT factor).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use dmaflow::dsp::fir::{Mode, Reference};

use super::super::columns::Columns;
use super::super::error::Error;
use super::super::harness::median;
use super::super::report::Target;
use super::super::spread::{Ratio, Spread, Timed};
use super::{Config, fir_graph, noise};

/// A way of filtering in the comparison with GNU Radio's `fft_filter_fff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrPoint {
    /// dmaflow's graph at its default FFT length (four times the taps).
    #[default]
    Dmaflow,
    /// dmaflow's graph at GNU Radio's FFT length.
    DmaflowAtGr,
    /// GNU Radio's flowgraph as it comes (its own FFT length).
    Gnuradio,
    /// GNU Radio's flowgraph with the taps zero-padded to twice their number
    /// (the same output at dmaflow's default FFT length).
    GnuradioPadded,
}

impl GrPoint {
    /// Every point, in the order the rounds take them.
    pub const ALL: [GrPoint; 4] = [
        GrPoint::Dmaflow,
        GrPoint::DmaflowAtGr,
        GrPoint::Gnuradio,
        GrPoint::GnuradioPadded,
    ];

    /// The point's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            GrPoint::Dmaflow => "dmaflow",
            GrPoint::DmaflowAtGr => "dmaflow@gr-fft",
            GrPoint::Gnuradio => "gnuradio",
            GrPoint::GnuradioPadded => "gnuradio-padded",
        }
    }

    /// Whether GNU Radio runs it.
    fn is_gnuradio(self) -> bool {
        matches!(self, GrPoint::Gnuradio | GrPoint::GnuradioPadded)
    }

    /// The FFT length it runs at for `l` taps (GNU Radio's from its rule:
    /// twice the taps it is given, rounded up to a power of two; the run
    /// checks it against the block's own).
    pub fn fft_len(self, l: usize) -> usize {
        match self {
            GrPoint::Dmaflow => dmaflow::dsp::fir::default_fft_len(l),
            GrPoint::DmaflowAtGr | GrPoint::Gnuradio => 2 * l.next_power_of_two(),
            GrPoint::GnuradioPadded => 2 * (2 * l).next_power_of_two(),
        }
    }

    /// What it does, in its own words (the report's and the JSON's `does`).
    pub fn does(self, l: usize) -> String {
        let n = self.fft_len(l);
        // Taps handed to the filter: the padded point's are twice as many.
        let hop = n + 1 - l * (1 + usize::from(self == GrPoint::GnuradioPadded));
        let dmaflow = "dmaflow graph, three threads: a memory source copies the signal into a \
                       queue; overlap-save reads its windows in place (zero-copy); a sink \
                       consumes every output sample and reads only the checked ones";
        let gnuradio = "GNU Radio 3.10 flowgraph, three threads: file_source reads the signal \
                        file from the page cache (read() into its buffer); fft_filter_fff, one \
                        thread, overlap-add; null_sink consumes and reads no sample";
        match self {
            GrPoint::Dmaflow => format!("{dmaflow}; FFT {n} (dmaflow's default), hop {hop}"),
            GrPoint::DmaflowAtGr => {
                format!("{dmaflow}; FFT {n} (GNU Radio's length for {l} taps), hop {hop}")
            }
            GrPoint::Gnuradio => format!("{gnuradio}; FFT {n} (its own), hop {hop}"),
            GrPoint::GnuradioPadded => format!(
                "{gnuradio}; taps padded with {l} zeros, so FFT {n} (dmaflow's default) but hop \
                 {hop}, not dmaflow's {}: more transforms per sample than dmaflow at that length",
                dmaflow::dsp::fir::default_fft_len(l) + 1 - l
            ),
        }
    }
}

/// One point of the GNU Radio comparison at one tap count.
#[derive(Debug, Clone, Default)]
pub struct GrRow {
    /// Taps.
    pub taps: usize,
    /// Which way of filtering.
    pub point: GrPoint,
    /// The FFT length it ran at (GNU Radio's read from its block).
    pub fft_len: usize,
    /// Seconds and process CPU seconds per round.
    pub timed: Timed,
    /// Largest error of the checked output samples against the reference,
    /// over the sum of the taps' magnitudes.
    pub max_error: f64,
    /// Output samples the check saw.
    pub items_out: usize,
    /// Input samples per round.
    pub samples: usize,
}

impl GrRow {
    /// M samples/s per round.
    pub fn msps(&self) -> Vec<f64> {
        self.timed.rates(self.samples as f64 / 1e6)
    }

    /// CPU microseconds per 1000 samples, median of the rounds.
    pub fn cpu_us_per_ksample(&self) -> f64 {
        median(&self.timed.cpu) * 1e9 / self.samples as f64
    }
}
/// Tap counts of the GNU Radio comparison.
const GR_TAPS: [usize; 4] = [16, 64, 256, 1024];

/// The script that runs GNU Radio's filter.
const GR_SCRIPT: &str = include_str!("../../../peers/gnuradio_fir_bench.py");

/// The longest one GNU Radio flowgraph may take before it is stopped and
/// the run fails.
const GR_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Largest error allowed against the reference, over the sum of the taps'
/// magnitudes (single-precision FFTs of these lengths stay near 1e-7).
pub const MAX_ERROR: f64 = 1e-5;

/// dmaflow's graph for the GNU Radio comparison: [`super::graph_run`]'s, its sink
/// reading only the checked samples (GNU Radio's null sink reads none), timed
/// as `tb.run()` is; seconds, CPU seconds, largest error, output samples.
fn peer_graph_run(
    taps: &[f32],
    n: usize,
    signal: &Arc<Vec<f32>>,
    reference: &Arc<Reference>,
) -> Result<(f64, f64, f64, usize), Error> {
    use dmaflow::platform::cpu::process_cpu_time;
    let (c0, t0) = (process_cpu_time(), Instant::now());
    let refs = reference.clone();
    let start = (0f64, 0usize, 0usize);
    let (g, found) = fir_graph(taps, n, signal, Mode::ZeroCopy, start, move |f, s| {
        let (err, at, next) = f;
        *err = err.max(refs.check(*at, s, next));
        *at += s.len();
    })?;
    g.run()?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = (process_cpu_time().saturating_sub(c0)).as_secs_f64();
    let (err, items, seen) = found();
    if seen != reference.positions.len() {
        return Err(Error::peer("fir")(format!(
            "dmaflow's graph gave {items} output samples; {seen} of the {} checked positions",
            reference.positions.len()
        )));
    }
    Ok((secs, cpu, err, items))
}

/// GNU Radio's flowgraph once: seconds, CPU seconds, items its sink took,
/// its FFT length; with `out`, its output goes to that file.
fn gnuradio_run(
    sig: &Path,
    taps: &Path,
    out: Option<&Path>,
) -> Result<(f64, f64, usize, usize), Error> {
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.args(["-c", GR_SCRIPT]).arg(sig).arg(taps);
    if let Some(o) = out {
        cmd.arg(o);
    }
    super::super::peers::said("gnuradio", &mut cmd, GR_LIMIT, |said| {
        let [t, c, i, n] = said.split_whitespace().collect::<Vec<_>>()[..] else {
            return None;
        };
        Some((
            t.parse().ok()?,
            c.parse().ok()?,
            i.parse().ok()?,
            n.parse().ok()?,
        ))
    })
}
/// The GNU Radio comparison alone (GNU Radio must be installed).
pub fn run_gnuradio(cfg: &Config, progress: &mut dyn FnMut(&str)) -> Result<Vec<GrRow>, Error> {
    let signal = Arc::new(noise(cfg.samples, 0x1234_5678));
    let dir = super::super::peers::ScratchDir::new("dmaflow-fir-gr")?;
    let path = |name: String| dir.path().join(name);
    let sig_path = path("signal.f32".into());
    super::super::peers::write_f32(&sig_path, &signal)?;
    let mut out = Vec::new();
    for &l in &GR_TAPS {
        let taps = noise(l, 0xF1F1 + l as u64);
        let mut padded = taps.clone();
        padded.resize(2 * l, 0.0);
        let files = [
            path(format!("taps-{l}.f32")),
            path(format!("taps-{l}-padded.f32")),
        ];
        super::super::peers::write_f32(&files[0], &taps)?;
        super::super::peers::write_f32(&files[1], &padded)?;
        // The taps file GNU Radio's point is given.
        let given = |p: GrPoint| &files[usize::from(p == GrPoint::GnuradioPadded)];
        let longest = GrPoint::ALL.iter().map(|p| p.fft_len(l)).max().unwrap_or(l);
        progress(&format!("fir: {l} taps, the reference outputs"));
        let reference = Arc::new(Reference::new(&taps, &signal, 4096, 2 * longest));
        let mut rows: Vec<GrRow> = GrPoint::ALL
            .iter()
            .map(|&point| GrRow {
                taps: l,
                point,
                fft_len: point.fft_len(l),
                samples: cfg.samples,
                items_out: cfg.samples,
                ..GrRow::default()
            })
            .collect();
        // GNU Radio's output, checked once per point outside the timed runs
        // (its timed runs end in a null sink, as dmaflow's read no sample).
        for row in rows.iter_mut().filter(|r| r.point.is_gnuradio()) {
            progress(&format!(
                "fir: {l} taps, {} output checked",
                row.point.name()
            ));
            let out_path = path("out.f32".into());
            let (_, _, items, fft) = gnuradio_run(&sig_path, given(row.point), Some(&out_path))?;
            let y = crate::files::fir::read_f32_file(&out_path).map_err(Error::peer("gnuradio"));
            let _ = std::fs::remove_file(&out_path);
            let y = y?;
            let mut next = 0;
            let err = reference.check(0, &y, &mut next);
            if fft != row.fft_len
                || items != y.len()
                || y.len() > cfg.samples
                || next != reference.positions.len()
                || err > MAX_ERROR
            {
                return Err(Error::peer("gnuradio")(format!(
                    "{} at {l} taps: FFT {fft} (expected {}), {} output samples of {} ({items} \
                     counted), {next} of {} checked positions, error {err:.2e} (at most \
                     {MAX_ERROR:.0e})",
                    row.point.name(),
                    row.fft_len,
                    y.len(),
                    cfg.samples,
                    reference.positions.len()
                )));
            }
            row.max_error = err;
            row.items_out = y.len();
        }
        // Every timed run must give what the checked one gave (dmaflow's
        // sink checks its output in every run).
        super::super::spread::in_turns(rows.len(), cfg.rounds, |i, round| {
            let row = &mut rows[i];
            let name = row.point.name();
            progress(&format!(
                "fir: {l} taps, {name} round {}/{}",
                round + 1,
                cfg.rounds
            ));
            let (t, cpu, items, fft, err, peer) = if row.point.is_gnuradio() {
                let (t, cpu, items, fft) = gnuradio_run(&sig_path, given(row.point), None)?;
                (t, cpu, items, fft, 0.0, "gnuradio")
            } else {
                let (t, cpu, err, items) = peer_graph_run(&taps, row.fft_len, &signal, &reference)?;
                (t, cpu, items, row.fft_len, err, "fir")
            };
            if items != row.items_out || fft != row.fft_len || err > MAX_ERROR {
                return Err(Error::peer(peer)(format!(
                    "{name} at {l} taps: {items} output samples at FFT {fft}, error {err:.2e}; \
                     expected {} at FFT {}, error at most {MAX_ERROR:.0e}",
                    row.items_out, row.fft_len
                )));
            }
            row.max_error = row.max_error.max(err);
            row.timed.seconds.push(t);
            row.timed.cpu.push(cpu);
            Ok(t)
        })?;
        out.extend(rows);
    }
    Ok(out)
}

/// What explains the default-against-default ratio at one tap count: the
/// FFT length (dmaflow at its length over dmaflow at GNU Radio's) and
/// everything else (dmaflow over GNU Radio at the same length); their
/// product is the whole ratio round by round. Shares are of the ratio's
/// logarithm; `None` where the whole ratio is within 2 % of 1.
#[derive(Debug, Clone, Copy)]
pub struct Attribution {
    /// Taps.
    pub taps: usize,
    /// dmaflow (default FFT) over GNU Radio (default FFT).
    pub whole: Ratio,
    /// dmaflow at its FFT length over dmaflow at GNU Radio's.
    pub fft: Ratio,
    /// dmaflow over GNU Radio, both at GNU Radio's FFT length.
    pub rest: Ratio,
    /// GNU Radio at dmaflow's FFT length (taps padded) over GNU Radio at
    /// its own.
    pub gnuradio_longer: Ratio,
    /// Share of the whole ratio's logarithm the FFT length explains.
    pub fft_share: Option<f64>,
}

/// The attribution at every tap count measured.
pub fn attribution(g: &[GrRow]) -> Vec<Attribution> {
    use GrPoint::{Dmaflow, DmaflowAtGr, Gnuradio, GnuradioPadded};
    let mut taps: Vec<usize> = g.iter().map(|r| r.taps).collect();
    taps.dedup();
    taps.into_iter()
        .filter_map(|t| {
            // The throughput of `a` over `b`, round by round.
            let ratio = |a: GrPoint, b: GrPoint| {
                let find = |p| g.iter().find(|r| r.taps == t && r.point == p);
                Some(Ratio::of(&find(a)?.msps(), &find(b)?.msps()))
            };
            let (fft, rest) = (ratio(Dmaflow, DmaflowAtGr)?, ratio(DmaflowAtGr, Gnuradio)?);
            let (f, r) = (fft.0.median.ln(), rest.0.median.ln());
            Some(Attribution {
                taps: t,
                whole: ratio(Dmaflow, Gnuradio)?,
                fft,
                rest,
                gnuradio_longer: ratio(GnuradioPadded, Gnuradio)?,
                fft_share: ((f + r).abs() > 0.02f64.ln_1p()).then(|| f / (f + r)),
            })
        })
        .collect()
}

/// The GNU Radio comparison as text, and its targets (whose lines the
/// report prints under all the tables).
pub(super) fn gnuradio_text(g: &[GrRow]) -> (String, Vec<Target>) {
    if g.is_empty() {
        return (
            "against GNU Radio's fft_filter_fff: skipped: GNU Radio not installed\n".into(),
            Vec::new(),
        );
    }
    let mut text = String::from(
        "\nagainst GNU Radio's fft_filter_fff: the same samples and taps, the four points \
         taking turns round by round (order reversed every other round); M samples/s (median, \
         min..max), process CPU us per 1000 samples (median), every output checked against \
         the same f64 reference (largest error over the sum of |taps|); timed alike: filter \
         and FFT plans made before, queues or buffers made, threads started, run and joined \
         inside:\n",
    );
    text += &gr_columns().table(g);
    text += "what each point does:\n";
    for r in super::super::peers::first_of_each(g, |r| r.point) {
        let generic = r.point.does(r.taps);
        // The description without the FFT figures, which vary by taps.
        let head = generic.split("; FFT").next().unwrap_or(&generic);
        text += &format!("  {}: {head}\n", r.point.name());
    }
    let attr = attribution(g);
    text += "\nwhere dmaflow's win comes from (ratios of the rounds' throughputs, median and \
             min..max; default/default = FFT length x same-FFT, round by round; the FFT's share \
             is of the logarithm):\n";
    text += &attribution_columns().table(&attr);
    let target = |t, what, r: Ratio, found| {
        let what = format!("{t} taps: dmaflow >= 1.2x GNU Radio's fft_filter_fff{what}");
        Target::new(what, found, r.0.median >= 1.2)
    };
    let same = attr.iter().map(|a| {
        let found = format!("{} ({})", a.rest.text(), a.rest.verdict());
        target(a.taps, " at the same FFT length", a.rest, found)
    });
    let default = attr.iter().map(|a| {
        let what = ", each at its default FFT length";
        target(a.taps, what, a.whole, a.whole.text())
    });
    (text, same.chain(default).collect())
}

/// The GNU Radio comparison's columns.
fn gr_columns<'a>() -> Columns<'a, GrRow> {
    let msps = |r: &GrRow| Spread::of(&r.msps());
    Columns::new()
        .plain("taps", "taps", |r: &GrRow| r.taps)
        .plain("point", "point", |r| r.point.name())
        .kept("does", |r| r.point.does(r.taps))
        .plain("fft", "fft_len", |r| r.fft_len)
        .fixed("Msamples/s", "msamples_per_s", 1, move |r| msps(r).median)
        .range("range", "msamples_per_s_spread", 1, msps)
        .fixed(
            "cpu_us/ksample",
            "cpu_us_per_ksample",
            2,
            GrRow::cpu_us_per_ksample,
        )
        .shown_as(
            "max_error",
            "max_error",
            |r| r.max_error,
            |e| format!("{e:.1e}"),
        )
        .kept("items_out", |r| r.items_out)
        .kept("samples", |r| r.samples)
        .kept("rounds", |r| r.timed.seconds.len())
}

/// Where dmaflow's win over GNU Radio comes from: the attribution's columns.
fn attribution_columns<'a>() -> Columns<'a, Attribution> {
    let text = |s| Ratio(s).text();
    Columns::new()
        .plain("taps", "taps", |a: &Attribution| a.taps)
        .shown_as(
            "default/default",
            "default_over_default",
            |a| a.whole.0,
            text,
        )
        .shown_as("dmaflow 4L/2L FFT", "fft_length", |a| a.fft.0, text)
        .shown_as("same FFT (2L)", "same_fft", |a| a.rest.0, text)
        .shown("same-FFT verdict", |a| a.rest.verdict().to_string())
        .kept("same_fft_measurable", |a| a.rest.measurable())
        .shown_as(
            "FFT share",
            "fft_share_of_log",
            |a| a.fft_share,
            |s| s.map_or("-".into(), |s| format!("{:.0} %", s * 100.0)),
        )
        .shown_as(
            "gnuradio padded/own",
            "gnuradio_padded_over_own",
            |a| a.gnuradio_longer.0,
            text,
        )
}

/// The GNU Radio comparison as JSON rows and attribution.
pub(super) fn gnuradio_json(g: &[GrRow]) -> serde_json::Value {
    json!({
        "rows": gr_columns().json(g),
        "attribution": attribution_columns().json(&attribution(g)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::harness::Setup;

    /// Where GNU Radio is installed: every point's output matches the
    /// reference, the FFT lengths are the ones claimed, and the report
    /// attributes the ratio and says what each point does.
    #[test]
    fn gnuradio_comparison_checks_every_output() {
        if !crate::bench::peers::gnuradio_here() {
            eprintln!("GNU Radio not installed: skipped");
            return;
        }
        let cfg = Config {
            samples: 1 << 17,
            rounds: 2,
            ..Config::at(&Setup::TINY)
        };
        let g = run_gnuradio(&cfg, &mut |_| {}).unwrap();
        assert_eq!(g.len(), GR_TAPS.len() * GrPoint::ALL.len());
        for r in &g {
            assert_eq!(r.timed.seconds.len(), 2, "{r:?}");
            assert!(r.max_error <= MAX_ERROR, "{r:?}");
        }
        let gr16 = g
            .iter()
            .find(|r| r.taps == 16 && r.point == GrPoint::Gnuradio)
            .unwrap();
        assert_eq!(gr16.fft_len, 32);
        let (text, targets) = gnuradio_text(&g);
        assert!(text.contains("dmaflow@gr-fft"), "{text}");
        assert!(
            text.contains("null_sink consumes and reads no sample"),
            "{text}"
        );
        assert_eq!(targets.len(), 2 * GR_TAPS.len());
        let j = gnuradio_json(&g);
        assert_eq!(j["attribution"].as_array().unwrap().len(), GR_TAPS.len());
        assert!(j["rows"][0]["does"].as_str().unwrap().contains("FFT 64"));
    }
}
