//! GNU Radio's `fft_filter_fff` beside dmaflow's graph, on the same samples and
//! taps: each at its default FFT length and at the other's, measured by the
//! frame (rounds in turns), every output checked against one f64 reference;
//! and where dmaflow's win comes from (the FFT length's factor times the
//! same-FFT factor).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use dmaflow::dsp::fir::{Mode, Reference};

use super::super::columns::Columns;
use super::super::error::Error;
use super::super::frame::{Bench, Point, Row};
use super::super::harness::Setup;
use super::super::peers::ScratchDir;
use super::super::report::Target;
use super::super::spread::Ratio;
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

    /// The point named `name` (dmaflow's default for a name not known).
    fn named(name: &str) -> GrPoint {
        let known = GrPoint::ALL.into_iter().find(|p| p.name() == name);
        known.unwrap_or_default()
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
/// GNU Radio's comparison on the frame: its points are a way of filtering
/// at a tap count; `dmaflow bench fir` runs it before paper 001's rounds
/// and reports it under them.
pub(super) static GR: Bench<GrConfig, usize, GrSample> = Bench {
    name: "fir",
    prepare: gr_prepare,
    ..Bench::new(
        GrConfig::at,
        |c| c.rounds,
        gr_points,
        gr_measure,
        gr_columns,
    )
};

/// One point of the GNU Radio comparison, round by round.
pub type GrRow = Row<usize, GrSample>;

/// What one run of a point gives.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GrSample {
    /// M input samples per second.
    pub msps: f64,
    /// Process CPU microseconds per 1000 input samples.
    pub cpu_us_per_ksample: f64,
    /// Largest error of the checked output samples against the reference,
    /// over the sum of the taps' magnitudes (GNU Radio's: of its checked
    /// run).
    pub max_error: f64,
    /// Output samples.
    pub items_out: usize,
    /// The FFT length it ran at (GNU Radio's read from its block).
    pub fft_len: usize,
    /// Input samples.
    pub samples: usize,
}

/// One tap count's filter, files and reference.
struct Taps {
    /// The taps.
    taps: Vec<f32>,
    /// Their file, and the file of the taps padded to twice their number.
    files: [PathBuf; 2],
    /// The reference outputs.
    reference: Arc<Reference>,
}

/// GNU Radio's output at one point, checked once before the rounds.
#[derive(Debug, Clone, Copy)]
struct Checked {
    taps: usize,
    point: GrPoint,
    items: usize,
    max_error: f64,
}

/// What the comparison measures, and what it made before its rounds.
pub struct GrConfig {
    /// Input samples per run.
    samples: usize,
    /// Rounds.
    rounds: usize,
    /// The signal.
    signal: Arc<Vec<f32>>,
    /// The scratch directory of the files GNU Radio reads.
    dir: Option<ScratchDir>,
    /// Per tap count of [`GR_TAPS`], its taps, files and reference.
    taps: Vec<Taps>,
    /// GNU Radio's outputs checked.
    checked: Vec<Checked>,
}

impl GrConfig {
    /// The comparison beside paper 001's configuration, on its signal.
    pub fn of(cfg: &Config) -> Self {
        GrConfig {
            samples: cfg.samples,
            rounds: cfg.rounds,
            signal: cfg.signal.clone(),
            dir: None,
            taps: Vec::new(),
            checked: Vec::new(),
        }
    }

    /// At the size `setup` asks for.
    fn at(setup: &Setup) -> Self {
        let cfg = Config::at(setup);
        GrConfig {
            signal: Arc::new(noise(cfg.samples, 0x1234_5678)),
            ..GrConfig::of(&cfg)
        }
    }

    /// The scratch directory (made by [`gr_prepare`]).
    fn dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new("."), |d| d.path())
    }

    /// The signal's file.
    fn signal_path(&self) -> PathBuf {
        self.dir().join("signal.f32")
    }

    /// The tap count `l`'s filter.
    fn taps(&self, l: usize) -> Result<&Taps, Error> {
        let i = GR_TAPS.iter().position(|&t| t == l);
        let found = i.and_then(|i| self.taps.get(i));
        found.ok_or_else(|| Error::peer("fir")(format!("{l} taps not prepared")))
    }

    /// The checked run of GNU Radio's `point` at `l` taps.
    fn checked(&self, l: usize, point: GrPoint) -> Option<Checked> {
        let c = self
            .checked
            .iter()
            .find(|c| c.taps == l && c.point == point);
        c.copied()
    }
}

/// The signal and taps in files, the references, and GNU Radio's output
/// checked once per point (its timed runs end in a null sink, as dmaflow's
/// read only the checked samples).
fn gr_prepare(cfg: &mut GrConfig, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
    cfg.dir = Some(ScratchDir::new("dmaflow-fir-gr")?);
    super::super::peers::write_f32(&cfg.signal_path(), &cfg.signal)?;
    for &l in &GR_TAPS {
        let taps = noise(l, 0xF1F1 + l as u64);
        let mut padded = taps.clone();
        padded.resize(2 * l, 0.0);
        let files = [
            cfg.dir().join(format!("taps-{l}.f32")),
            cfg.dir().join(format!("taps-{l}-padded.f32")),
        ];
        super::super::peers::write_f32(&files[0], &taps)?;
        super::super::peers::write_f32(&files[1], &padded)?;
        let longest = GrPoint::ALL.iter().map(|p| p.fft_len(l)).max().unwrap_or(l);
        progress(&format!("fir: {l} taps, the reference outputs"));
        let reference = Arc::new(Reference::new(&taps, &cfg.signal, 4096, 2 * longest));
        cfg.taps.push(Taps {
            taps,
            files,
            reference,
        });
        for point in GrPoint::ALL.into_iter().filter(|p| p.is_gnuradio()) {
            progress(&format!("fir: {l} taps, {} output checked", point.name()));
            let c = check_gnuradio(cfg, l, point)?;
            cfg.checked.push(c);
        }
    }
    Ok(())
}

/// GNU Radio's output at `point` and `l` taps against the reference.
fn check_gnuradio(cfg: &GrConfig, l: usize, point: GrPoint) -> Result<Checked, Error> {
    let t = cfg.taps(l)?;
    let out_path = cfg.dir().join("out.f32");
    let given = &t.files[usize::from(point == GrPoint::GnuradioPadded)];
    let (_, _, items, fft) = gnuradio_run(&cfg.signal_path(), given, Some(&out_path))?;
    let y = crate::files::fir::read_f32_file(&out_path).map_err(Error::peer("gnuradio"));
    let _ = std::fs::remove_file(&out_path);
    let y = y?;
    let mut next = 0;
    let err = t.reference.check(0, &y, &mut next);
    let positions = t.reference.positions.len();
    if fft != point.fft_len(l)
        || items != y.len()
        || y.len() > cfg.samples
        || next != positions
        || err > MAX_ERROR
    {
        return Err(Error::peer("gnuradio")(format!(
            "{} at {l} taps: FFT {fft} (expected {}), {} output samples of {} ({items} \
             counted), {next} of {positions} checked positions, error {err:.2e} (at most \
             {MAX_ERROR:.0e})",
            point.name(),
            point.fft_len(l),
            y.len(),
            cfg.samples,
        )));
    }
    Ok(Checked {
        taps: l,
        point,
        items: y.len(),
        max_error: err,
    })
}

/// The four points at every tap count.
fn gr_points(_: &GrConfig) -> Vec<Point<usize>> {
    let each = |at| {
        GrPoint::ALL.map(|p| Point {
            series: p.name(),
            at,
        })
    };
    GR_TAPS.into_iter().flat_map(each).collect()
}

/// One timed run; it must give what the checked one gave (dmaflow's sink
/// checks its output in every run).
fn gr_measure(cfg: &GrConfig, p: &Point<usize>) -> Result<GrSample, Error> {
    let (l, point) = (p.at, GrPoint::named(p.series));
    let t = cfg.taps(l)?;
    let expected = point.fft_len(l);
    let (secs, cpu, items, fft, err, peer) = match cfg.checked(l, point) {
        Some(c) => {
            let given = &t.files[usize::from(point == GrPoint::GnuradioPadded)];
            let (secs, cpu, items, fft) = gnuradio_run(&cfg.signal_path(), given, None)?;
            if items != c.items {
                return Err(Error::peer("gnuradio")(format!(
                    "{} at {l} taps: {items} output samples; the checked run gave {}",
                    p.series, c.items
                )));
            }
            (secs, cpu, items, fft, c.max_error, "gnuradio")
        }
        None => {
            let (secs, cpu, err, items) =
                peer_graph_run(&t.taps, expected, &cfg.signal, &t.reference)?;
            (secs, cpu, items, expected, err, "fir")
        }
    };
    if fft != expected || err > MAX_ERROR {
        return Err(Error::peer(peer)(format!(
            "{} at {l} taps: FFT {fft}, error {err:.2e}; expected FFT {expected}, error at \
             most {MAX_ERROR:.0e}",
            p.series
        )));
    }
    let n = cfg.samples as f64;
    Ok(GrSample {
        msps: n / secs / 1e6,
        cpu_us_per_ksample: cpu * 1e9 / n,
        max_error: err,
        items_out: items,
        fft_len: fft,
        samples: cfg.samples,
    })
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
    let mut taps: Vec<usize> = g.iter().map(|r| r.point.at).collect();
    taps.dedup();
    taps.into_iter()
        .filter_map(|t| {
            // The throughput of `a` over `b`, round by round.
            let ratio = |a: GrPoint, b: GrPoint| {
                let find = |p: GrPoint| {
                    g.iter()
                        .find(|r| r.point.at == t && r.point.series == p.name())
                };
                Some(find(a)?.against(find(b)?, |s| s.msps))
            };
            let (fft, rest) = (ratio(Dmaflow, DmaflowAtGr)?, ratio(DmaflowAtGr, Gnuradio)?);
            let (f, r) = (fft.typical().ln(), rest.typical().ln());
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
/// report prints under all the tables); or why it was skipped.
pub(super) fn text(compared: &Result<Vec<GrRow>, &'static str>) -> (String, Vec<Target>) {
    let g = match compared {
        Ok(g) => g,
        Err(why) => {
            return (
                format!("against GNU Radio's fft_filter_fff: skipped: {why}\n"),
                Vec::new(),
            );
        }
    };
    let mut text = String::from(
        "\nagainst GNU Radio's fft_filter_fff: the same samples and taps, the four points \
         taking turns round by round (order reversed every other round); M samples/s and its \
         range over the rounds, process CPU us per 1000 samples, every output checked against \
         the same f64 reference (largest error over the sum of |taps|); timed alike: filter \
         and FFT plans made before, queues or buffers made, threads started, run and joined \
         inside:\n",
    );
    text += &gr_columns().table(g);
    text += "what each point does:\n";
    for r in super::super::peers::first_of_each(g, |r| r.point.series) {
        let generic = GrPoint::named(r.point.series).does(r.point.at);
        // The description without the FFT figures, which vary by taps.
        let head = generic.split("; FFT").next().unwrap_or(&generic);
        text += &format!("  {}: {head}\n", r.point.series);
    }
    let attr = attribution(g);
    text += "\nwhere dmaflow's win comes from (ratios of the rounds' throughputs, the typical \
             ratio and min..max; default/default = FFT length x same-FFT, round by round; the \
             FFT's share is of the logarithm):\n";
    text += &attribution_columns().table(&attr);
    let target = |t, what, r: Ratio, found| {
        let what = format!("{t} taps: dmaflow >= 1.2x GNU Radio's fft_filter_fff{what}");
        Target::new(what, found, r.typical() >= 1.2)
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
fn gr_columns() -> Columns<'static, GrRow> {
    let first = |r: &GrRow| r.samples.first().copied().unwrap_or_default();
    Columns::new()
        .plain("taps", "taps", |r: &GrRow| r.point.at)
        .doc("filter taps")
        .series(
            "point",
            "point",
            "dmaflow|dmaflow@gr-fft|gnuradio|gnuradio-padded",
        )
        .kept("does", |r| GrPoint::named(r.point.series).does(r.point.at))
        .doc("what the point does, in its own words")
        .plain("fft", "fft_len", move |r| first(r).fft_len)
        .doc("the FFT length it ran at (GNU Radio's read from its block)")
        .summary(
            ("Msamples/s", "msamples_per_s", "msamples_per_s_spread"),
            "M input samples per second",
            (1.0, 1, ""),
            |s| s.msps,
        )
        .typical(
            "cpu_us/ksample",
            "cpu_us_per_ksample",
            "process CPU microseconds per 1000 input samples",
            (1.0, 2),
            |s| s.cpu_us_per_ksample,
        )
        .shown_as(
            "max_error",
            "max_error",
            |r| r.spread(|s| s.max_error).max,
            |e| format!("{e:.1e}"),
        )
        .doc("largest error of the checked outputs against the f64 reference, over the sum of |taps|")
        .kept("items_out", move |r| first(r).items_out)
        .doc("output samples")
        .kept("samples", move |r| first(r).samples)
        .doc("input samples per run")
        .rounds()
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
pub(super) fn json(g: &[GrRow]) -> serde_json::Value {
    json!({
        "rows": gr_columns().json(g),
        "attribution": attribution_columns().json(&attribution(g)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut gr = GrConfig {
            signal: Arc::new(noise(cfg.samples, 0x1234_5678)),
            ..GrConfig::of(&cfg)
        };
        gr_prepare(&mut gr, &mut |_| {}).unwrap();
        let g = GR.rows(&gr, &mut |_| {}).unwrap();
        assert_eq!(g.len(), GR_TAPS.len() * GrPoint::ALL.len());
        for r in &g {
            assert_eq!(r.rounds(), 2, "{r:?}");
            assert!(r.every(|s| s.max_error <= MAX_ERROR), "{r:?}");
        }
        let gr16 = g
            .iter()
            .find(|r| r.point.at == 16 && r.point.series == "gnuradio")
            .unwrap();
        assert!(gr16.every(|s| s.fft_len == 32), "{gr16:?}");
        let (text, targets) = text(&Ok(g.clone()));
        assert!(text.contains("dmaflow@gr-fft"), "{text}");
        assert!(
            text.contains("null_sink consumes and reads no sample"),
            "{text}"
        );
        assert_eq!(targets.len(), 2 * GR_TAPS.len());
        let j = json(&g);
        assert_eq!(j["attribution"].as_array().unwrap().len(), GR_TAPS.len());
        assert!(j["rows"][0]["does"].as_str().unwrap().contains("FFT 64"));
        assert!(j["rows"][0]["msamples_per_s_spread"]["n"] == 2);
    }
}
