//! `dmaflow bench pipeline`: an accelerator inside a process network.
//! source -> coprocessor -> sink through the emulated fabric, for the FIR core
//! ([`fir`]) and the background-subtraction core ([`bgsub`]), two ways each:
//! `zerocopy`, the accelerator node ([`dmaflow::accel::stage`],
//! [`dmaflow::accel::bgsub`]) handing windows in DMA memory to the engines in
//! place; `copy`, the pipeline a user builds without it, copying each window
//! into a DMA buffer and each answer out with the library's standard-I/O
//! calls. At the board's HP-port clock and unlimited, interleaved run by run;
//! host CPU of every pipeline thread (never the emulated device's) and the
//! bytes the library copied on them ([`dmaflow::copies`]). Both pipelines'
//! outputs must agree exactly. Beside them in the same rounds, `device`: each
//! core's DMA channels driven bare with no graph ([`device`]), what the
//! emulated device itself delivers on this host, which the accelerator node
//! is measured against (`vs_device`).

mod bgsub;
mod device;
mod fir;

use fir::TAPS;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dmaflow::graph::{Graph, Input, Output};
use dmaflow::platform::cpu::thread_cpu_time;
use dmaflow::rig::{Rig, SimEngine};
use dmaflow::ring::Pod;
use dmaflow::sim::{Clock, Profile};

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::error::Error;
use super::harness::{
    OnBoard, Progress, Setup, Spec, Tier, bytes_label, clock_label, median, placement_here,
};
use super::peers::first_of_each;
use super::plot::{LinePlot, XAxis};
use super::report::{Report, Target, sentence, series_by};
use super::spread::{Ratio, Spread, in_turns};

/// The coprocessor in the middle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Core {
    /// The FIR core: f32 samples in windows overlapping by `TAPS - 1`.
    Fir,
    /// The background-subtraction core: square frames in, masks out.
    BgSub,
}

impl Core {
    /// Its name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Core::Fir => "fir",
            Core::BgSub => "bgsub",
        }
    }
}

/// `dmaflow bench pipeline`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "pipeline",
    board: OnBoard::EmulatorOnly("it sets the emulated link's clock and chains emulated engines"),
    question: "An accelerator inside a process network (FIR and background-subtraction cores): \
               the accelerator node on queues in DMA memory vs copying.",
    keys: "core (fir|bgsub), pipeline (zerocopy|copy), clock, window_bytes\n\
          (output bytes per window: FIR hop x 4, bgsub frame),\n\
          mb_per_s (delivered, 10^6 B/s, median of the runs),\n\
          mb_per_s_spread, model_mb_per_s (what the\n\
          modelled link allows; null unlimited), link_share,\n\
          core_mb_per_s (the emulated core's own compute rate on this\n\
          host), cpu_us_per_mb (host CPU of the source, node and sink\n\
          threads per MB delivered), node_cpu_us_per_mb (the node's\n\
          thread alone; device rows: the driving thread), copied_per_byte (payload bytes the\n\
          library copied on those threads per byte delivered, counted\n\
          where it copies; the largest of the runs), vs_copy (zerocopy\n\
          rows: delivered over the copying pipeline's, run by run, a\n\
          spread), vs_device (zerocopy rows: delivered over the\n\
          device-only run's, run by run, a spread), runs",
    conditions: Conditions {
        timed: "the graph's run from start to its last node's end",
        against: "a copying pipeline on the same footing (FIR: the same scatter-gather \
                  engine and windows in flight, through a packet ring's standard I/O; \
                  bgsub: one frame at a time in both, as its background requires), the \
                  same core's DMA channels driven bare with no graph (device), and the \
                  modelled link; copied bytes counted where the library copies",
        model: "link_share and model_mb_per_s are the modelled link's; core_mb_per_s is the \
                emulated core's own compute on this host",
        paper: USER_X86,
    },
    ..Spec::new(Config::at, run, report)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cores.
    pub cores: Vec<Core>,
    /// Output bytes per window (FIR: the hop in f32 samples x 4; bgsub: the
    /// frame, a square).
    pub windows: Vec<usize>,
    /// Input samples per FIR run.
    pub samples: usize,
    /// Frame bytes per bgsub run.
    pub frame_bytes: usize,
    /// Rounds per point (each pipeline, interleaved).
    pub rounds: usize,
    /// The board whose port clocks the link.
    pub profile: Profile,
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        let (samples, frame_bytes, rounds) = (setup.tier).pick(
            (16 << 20, 16 << 20, 9),
            (1 << 20, 2 << 20, 3),
            (50_000, 64 << 10, 1),
        );
        let windows = match setup.tier {
            Tier::Tiny => vec![4 << 10],
            _ => vec![4 << 10, 16 << 10, 64 << 10],
        };
        Config {
            cores: vec![Core::Fir, Core::BgSub],
            windows,
            samples,
            frame_bytes,
            rounds,
            profile: setup.profile,
        }
    }
}

/// One point: medians over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The coprocessor.
    pub core: Core,
    /// `zerocopy`, `copy` or `device` (the core's channels driven bare).
    pub pipeline: &'static str,
    /// The port's rate (e.g. "1200MB/s") or "unlimited".
    pub clock: String,
    /// Output bytes per window.
    pub window_bytes: usize,
    /// Delivered output over the runs, 10^6 B/s (the figure is the median).
    pub mb_per_s: Spread,
    /// Host CPU of the pipeline's threads per MB delivered, in us (median).
    pub cpu_us_per_mb: f64,
    /// Host CPU of the node's thread alone (device rows: the driving
    /// thread) per MB delivered, in us (median).
    pub node_cpu_us_per_mb: f64,
    /// Payload bytes the library copied on the pipeline's threads per byte
    /// delivered ([`dmaflow::copies`]), the largest of the runs.
    pub copied_per_byte: f64,
    /// What the modelled link allows, 10^6 B/s delivered (FIR: MM2S carries
    /// each window's overlap too; bgsub: the mask stream at the port's rate);
    /// `None` when unlimited.
    pub model_mb_per_s: Option<f64>,
    /// The emulated core's own compute rate on this host, 10^6 B/s of
    /// output: what the emulated device can deliver at most.
    pub core_mb_per_s: f64,
    /// For `zerocopy` rows: delivered MB/s over the copying pipeline's, run
    /// by run.
    pub vs_copy: Option<Ratio>,
    /// For `zerocopy` rows: delivered MB/s over the device-only run's, run
    /// by run.
    pub vs_device: Option<Ratio>,
    /// Rounds measured (the JSON key `runs`).
    pub rounds: usize,
}

impl Row {
    /// Delivered over what the modelled link allows.
    pub fn link_share(&self) -> Option<f64> {
        self.model_mb_per_s.map(|m| self.mb_per_s.median / m)
    }
}

/// What one run measures, filled in by its threads: their CPU (ns), the
/// node's alone, the payload bytes the library copied on them, the output's
/// digest and bytes.
#[derive(Default)]
struct Measured {
    cpu: AtomicU64,
    node_cpu: AtomicU64,
    copied: AtomicU64,
    digest: AtomicU64,
    out_bytes: AtomicU64,
}

/// A node body that adds its thread's CPU time and the payload bytes the
/// library copied on it to the run's totals when it ends (its CPU to the
/// node's too if it is the `middle` one).
fn timed(m: &Arc<Measured>, middle: bool, body: Body) -> Body {
    let m = m.clone();
    Box::new(move || {
        let (t0, c0) = (thread_cpu_time(), dmaflow::copies::on_this_thread());
        let r = body();
        let cpu = (thread_cpu_time() - t0).as_nanos() as u64;
        m.cpu.fetch_add(cpu, Ordering::Relaxed);
        if middle {
            m.node_cpu.fetch_add(cpu, Ordering::Relaxed);
        }
        let copied = dmaflow::copies::on_this_thread() - c0;
        m.copied.fetch_add(copied, Ordering::Relaxed);
        r
    })
}

/// `sum` with the 64-bit little-endian words of `bytes` added, the first
/// being word `first` of the stream and the last zero-padded, word `i`
/// weighted by `2i + 1`: a stream's digest does not depend on how it is cut
/// into whole words, but on order (one multiply-add per word).
fn digest(sum: u64, first: u64, bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    let weigh =
        |(i, w): (usize, [u8; 8])| u64::from_le_bytes(w).wrapping_mul(2 * (first + i as u64) + 1);
    let body = (words.map(|w| w.try_into().unwrap_or_default()).enumerate())
        .map(weigh)
        .fold(sum, u64::wrapping_add);
    body.wrapping_add(weigh((bytes.len() / 8, tail)))
}

/// The sink: reads everything, digests its bytes (with their count).
fn sink<T: Pod + Send>(mut input: Input<T>, m: &Arc<Measured>) -> Body {
    let m = m.clone();
    Box::new(move || {
        let (mut sum, mut len) = (0u64, 0u64);
        loop {
            // Eight items are whole words; fewer come only at the end.
            let s = input.peek(8)?;
            if s.is_empty() {
                break;
            }
            let k = if s.len() < 8 {
                s.len()
            } else {
                s.len() / 8 * 8
            };
            let bytes: &[u8] = bytemuck::cast_slice(&s[..k]);
            sum = digest(sum, len / 8, bytes);
            len += bytes.len() as u64;
            input.consume(k)?;
        }
        m.out_bytes.store(len, Ordering::Relaxed);
        m.digest.store(sum ^ len, Ordering::Relaxed);
        Ok(())
    })
}

/// A node's body.
type Body = Box<dyn FnOnce() -> dmaflow::graph::NodeResult + Send>;

/// What one run gave: its time, the host CPU of its threads and of the node's
/// (or driving) thread alone, what it delivered and copied, its digest.
struct Run {
    wall: Duration,
    cpu: Duration,
    node_cpu: Duration,
    out_bytes: u64,
    copied: u64,
    digest: u64,
}

/// Runs source -> `node` -> sink, the bodies made by `source` and `middle`,
/// over two queues of `queue` items in `memory` (a board's DMA memory) or
/// ordinary memory; times the graph's run.
fn run_pipeline<T: Pod + Send>(
    node: &str,
    queue: usize,
    memory: Option<Arc<dyn dmaflow::ring::RegionSource>>,
    source: impl FnOnce(Output<T>) -> Body,
    middle: impl FnOnce(Input<T>, Output<T>) -> Body,
) -> Result<Run, Error> {
    let mut g = Graph::new();
    let mut edge = |from, to| match &memory {
        Some(m) => g.connect_in::<T>(from, to, queue, m.clone()),
        None => g.connect_with_capacity::<T>(from, to, queue),
    };
    let (s, a) = edge(("source", "out"), (node, "in"))?;
    let (b, k) = edge((node, "out"), ("sink", "in"))?;
    let m = Arc::new(Measured::default());
    g.node("source", timed(&m, false, source(s)))?;
    g.node(node, timed(&m, true, middle(a, b)))?;
    g.node("sink", timed(&m, false, sink(k, &m)))?;
    let t0 = Instant::now();
    g.run()?;
    let wall = t0.elapsed();
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Ok(Run {
        wall,
        cpu: Duration::from_nanos(get(&m.cpu)),
        node_cpu: Duration::from_nanos(get(&m.node_cpu)),
        out_bytes: get(&m.out_bytes),
        copied: get(&m.copied),
        digest: get(&m.digest),
    })
}

/// Output bytes per second of `step` (which appends its output to the
/// vector it is given), called until 20 ms have passed: the median of
/// three such rounds.
fn rate_of(mut step: impl FnMut(&mut Vec<u8>)) -> f64 {
    let mut out = Vec::new();
    let rates: Vec<f64> = (0..3)
        .map(|_| {
            let (t0, mut bytes) = (Instant::now(), 0usize);
            while t0.elapsed() < Duration::from_millis(20) {
                out.clear();
                step(&mut out);
                bytes += out.len();
            }
            bytes as f64 / t0.elapsed().as_secs_f64()
        })
        .collect();
    median(&rates)
}

/// One point: both pipelines, interleaved run by run, their outputs checked
/// against each other; a row each.
fn point(
    cfg: &Config,
    core: Core,
    clock: Clock,
    window_bytes: usize,
    progress: Progress,
) -> Result<Vec<Row>, Error> {
    let clock_name = clock_label(clock);
    let what = format!(
        "pipeline {} {clock_name} {}",
        core.name(),
        bytes_label(window_bytes)
    );
    // Point 0 is the accelerator node, point 1 the copying pipeline, point 2
    // the device-only baseline.
    let pipelines = ["zerocopy", "copy", "device"];
    let mut runs: [Vec<Run>; 3] = Default::default();
    in_turns(3, cfg.rounds, |p, r| {
        progress(&format!("{what} {} run {}", pipelines[p], r + 1));
        let run = match (core, p) {
            (Core::Fir, 2) => fir::device_once(clock, window_bytes, cfg.samples)?,
            (Core::Fir, _) => fir::run_once(clock, window_bytes, cfg.samples, p == 0)?,
            (Core::BgSub, 2) => bgsub::device_once(clock, window_bytes, cfg.frame_bytes)?,
            (Core::BgSub, _) => bgsub::run_once(clock, window_bytes, cfg.frame_bytes, p == 0)?,
        };
        let secs = run.wall.as_secs_f64();
        runs[p].push(run);
        Ok::<f64, Error>(secs)
    })?;
    // What a run delivers, what the modelled link allows of it (bgsub: each
    // frame's mask leaves on S2MM as the frame arrives on MM2S), and the
    // emulated core's own rate.
    let (want_bytes, model, core_rate) = match core {
        Core::Fir => (
            4 * cfg.samples as u64,
            clock.bytes_per_s().map(|b| fir::model(b, window_bytes)),
            fir::core_rate(window_bytes),
        ),
        Core::BgSub => (
            bgsub::delivered(window_bytes, cfg.frame_bytes)?,
            clock.bytes_per_s(),
            bgsub::core_rate(window_bytes)?,
        ),
    };
    // The pipelines' outputs agree; the device-only runs (which nothing
    // reads) delivered as much.
    let reference = runs[0][0].digest;
    if let Some(bad) = (runs[..2].iter().flatten())
        .find(|r| r.digest != reference)
        .or_else(|| (runs.iter().flatten()).find(|r| r.out_bytes != want_bytes))
    {
        return Err(Error::Corrupted {
            what,
            got: bad.digest as u32,
            expected: reference as u32,
        });
    }
    let mb = |rs: &[Run]| -> Vec<f64> {
        rs.iter()
            .map(|r| r.out_bytes as f64 / r.wall.as_secs_f64() / 1e6)
            .collect()
    };
    let vs_copy = Ratio::of(&mb(&runs[0]), &mb(&runs[1]));
    let vs_device = Ratio::of(&mb(&runs[0]), &mb(&runs[2]));
    let rows = runs.iter().zip(pipelines).map(|(rs, pipeline)| {
        let per_mb = |cpu: fn(&Run) -> Duration| {
            let v: Vec<f64> = (rs.iter())
                .map(|r| cpu(r).as_secs_f64() * 1e6 / (r.out_bytes as f64 / 1e6))
                .collect();
            median(&v)
        };
        Row {
            core,
            pipeline,
            clock: clock_name.clone(),
            window_bytes,
            mb_per_s: Spread::of(&mb(rs)),
            cpu_us_per_mb: per_mb(|r| r.cpu),
            node_cpu_us_per_mb: per_mb(|r| r.node_cpu),
            copied_per_byte: (rs.iter())
                .map(|r| r.copied as f64 / r.out_bytes as f64)
                .fold(0.0, f64::max),
            model_mb_per_s: model.map(|m| m / 1e6),
            core_mb_per_s: core_rate / 1e6,
            vs_copy: (pipeline == "zerocopy").then_some(vs_copy),
            vs_device: (pipeline == "zerocopy").then_some(vs_device),
            rounds: rs.len(),
        }
    });
    Ok(rows.collect())
}

/// Runs every point, the two pipelines interleaved run by run; the outputs of
/// every run must agree.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for clock in [cfg.profile.port, Clock::Unlimited] {
        for &core in &cfg.cores {
            for &window_bytes in &cfg.windows {
                rows.extend(point(cfg, core, clock, window_bytes, &mut *progress)?);
            }
        }
    }
    Ok(rows)
}

/// The rows' columns.
fn columns<'a>() -> Columns<'a, Row> {
    Columns::new()
        .plain("core", "core", |r: &Row| r.core.name())
        .plain("clock", "clock", |r| r.clock.clone())
        .col(
            "window",
            "window_bytes",
            |r| bytes_label(r.window_bytes),
            |r| r.window_bytes,
        )
        .plain("pipeline", "pipeline", |r| r.pipeline)
        .fixed("MB/s", "mb_per_s", 0, |r| r.mb_per_s.median)
        .range("runs' range", "mb_per_s_spread", 0, |r| r.mb_per_s)
        .optional("model MB/s", "model_mb_per_s", 0, |r| r.model_mb_per_s)
        .col(
            "link share",
            "link_share",
            |r| {
                r.link_share()
                    .map_or("-".into(), |s| format!("{:.1} %", 100.0 * s))
            },
            Row::link_share,
        )
        .fixed("core MB/s", "core_mb_per_s", 0, |r| r.core_mb_per_s)
        .fixed("CPU us/MB", "cpu_us_per_mb", 0, |r| r.cpu_us_per_mb)
        .fixed("node us/MB", "node_cpu_us_per_mb", 0, |r| {
            r.node_cpu_us_per_mb
        })
        .fixed("copied B/B", "copied_per_byte", 2, |r| r.copied_per_byte)
        .shown("of device", |r| {
            r.vs_device.map_or("-".into(), |Ratio(v)| {
                format!(
                    "{:.1} % ({:.1}..{:.1})",
                    100.0 * v.median,
                    100.0 * v.min,
                    100.0 * v.max
                )
            })
        })
        .kept("vs_copy", |r| r.vs_copy.map(|Ratio(v)| v.json()))
        .kept("vs_device", |r| r.vs_device.map(|Ratio(v)| v.json()))
        .kept("runs", |r| r.rounds)
}

/// The run as a report: per core, the largest windows with the link
/// unlimited against the copying pipeline, the share of the modelled link
/// kept, and the targets.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let zc = || rows.iter().filter(|r| r.pipeline == "zerocopy");
    let mut targets = Vec::new();
    if zc().next().is_some() {
        let worst = zc().map(|r| r.copied_per_byte).fold(0.0, f64::max);
        targets.push(Target::new(
            "the zero-copy pipelines copy 0 bytes per byte delivered",
            format!("{worst:.3} at most"),
            worst == 0.0,
        ));
    }
    let (mut clauses, mut plots) = (Vec::new(), Vec::new());
    for core in first_of_each(rows, |r| r.core).into_iter().map(|r| r.core) {
        let name = core.name();
        let mine: Vec<Row> = rows.iter().filter(|r| r.core == core).cloned().collect();
        let unlimited = |pipeline: &'static str| {
            (mine.iter()).filter(move |r| r.pipeline == pipeline && r.clock == "unlimited")
        };
        let largest = |pipeline| unlimited(pipeline).max_by_key(|r| r.window_bytes);
        if let (Some(z), Some(c)) = (largest("zerocopy"), largest("copy")) {
            clauses.push(format!(
                "with the link unlimited, the {name} accelerator node delivers {:.0} MB/s at {} \
                 windows against {:.0} MB/s for the copying pipeline ({:.2}x), for {:.0} \
                 against {:.0} us of host CPU per MB and {:.2} against {:.2} bytes copied \
                 per byte",
                z.mb_per_s.median,
                bytes_label(z.window_bytes),
                c.mb_per_s.median,
                z.mb_per_s.median / c.mb_per_s.median,
                z.cpu_us_per_mb,
                c.cpu_us_per_mb,
                z.copied_per_byte,
                c.copied_per_byte
            ));
        }
        let modelled = zc().filter(|r| r.core == core && r.model_mb_per_s.is_some());
        if let Some(z) = modelled.min_by_key(|r| r.window_bytes) {
            clauses.push(format!(
                "at the {} port it keeps {:.1} % of the modelled link from {} windows",
                z.clock,
                100.0 * z.link_share().unwrap_or(0.0),
                bytes_label(z.window_bytes)
            ));
        }
        if let Some((share, worst)) = zc()
            .filter(|r| r.core == core && r.window_bytes >= 4096)
            .filter_map(|r| r.link_share().map(|s| (s, r)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
        {
            targets.push(Target::new(
                format!(
                    "{name}: zero-copy at the {} port from 4 KiB windows up >= 95 % of the \
                     modelled link",
                    worst.clock
                ),
                format!(
                    "at least {:.1} % ({:.0} MB/s, worst at {}; the emulated core itself \
                     computes {:.0} MB/s there on this host, the pipeline's threads take {:.0} \
                     us of CPU per MB on their one core)",
                    100.0 * share,
                    worst.mb_per_s.median,
                    bytes_label(worst.window_bytes),
                    worst.core_mb_per_s,
                    worst.cpu_us_per_mb
                ),
                share >= 0.95,
            ));
        }
        let at_64k = |pipeline| unlimited(pipeline).find(|r| r.window_bytes == 64 << 10);
        if let (Some(z), Some(c)) = (at_64k("zerocopy"), at_64k("copy"))
            && let Some(Ratio(v)) = z.vs_copy
        {
            let (ratio, lo, hi) = (v.median, v.min, v.max);
            let spread = v.straddle_note(1.5);
            targets.push(Target::new(
                format!(
                    "{name}: unlimited clock, 64 KiB windows: zero-copy >= 1.5x the copying \
                     pipeline"
                ),
                format!(
                    "{ratio:.2}x, runs {lo:.2}x to {hi:.2}x ({:.0} against {:.0} MB/s){spread}",
                    z.mb_per_s.median, c.mb_per_s.median
                ),
                ratio >= 1.5,
            ));
        }
        // Against the device-only baseline: every window size, both clocks.
        if let Some((worst, Ratio(v))) = zc()
            .filter(|r| r.core == core)
            .filter_map(|r| r.vs_device.map(|q| (r, q)))
            .min_by(|a, b| a.1.0.median.total_cmp(&b.1.0.median))
        {
            targets.push(Target::new(
                format!(
                    "{name}: the accelerator node >= 95 % of the device-only baseline at every \
                     window size"
                ),
                format!(
                    "at least {:.1} % (worst at {} {}, runs {:.1} to {:.1} %){}",
                    100.0 * v.median,
                    bytes_label(worst.window_bytes),
                    worst.clock,
                    100.0 * v.min,
                    100.0 * v.max,
                    v.straddle_note(0.95)
                ),
                v.median >= 0.95,
            ));
        }
        if let (Some(z), Some(c)) = (at_64k("zerocopy"), at_64k("copy")) {
            let ratio = c.cpu_us_per_mb / z.cpu_us_per_mb;
            targets.push(Target::new(
                format!(
                    "{name}: unlimited clock, 64 KiB windows: the copying pipeline's host CPU \
                     per MB >= 2x the accelerator node's"
                ),
                format!(
                    "{ratio:.2}x ({:.0} against {:.0} us per MB; the nodes' threads alone {:.0} \
                     against {:.0}, the device-only run's {:.0})",
                    c.cpu_us_per_mb,
                    z.cpu_us_per_mb,
                    c.node_cpu_us_per_mb,
                    z.node_cpu_us_per_mb,
                    unlimited("device")
                        .find(|r| r.window_bytes == 64 << 10)
                        .map_or(f64::NAN, |d| d.node_cpu_us_per_mb)
                ),
                ratio >= 2.0,
            ));
        }
        // bgsub: one frame in flight, so each frame's time beyond the
        // device-only run's is the node's software round trip.
        let at_port = |pipeline: &'static str| {
            (mine.iter()).find(move |r| {
                r.pipeline == pipeline && r.window_bytes == 4 << 10 && r.clock != "unlimited"
            })
        };
        if core == Core::BgSub
            && let (Some(z), Some(d)) = (at_port("zerocopy"), at_port("device"))
        {
            let frame_us = |r: &Row| r.window_bytes as f64 / r.mb_per_s.median;
            let round_trip = frame_us(z) - frame_us(d);
            targets.push(Target::new(
                format!(
                    "bgsub: 4 KiB frames at the {} port: the node's software round trip per \
                     frame <= 25 us (half of the ~50 us before)",
                    z.clock
                ),
                format!(
                    "{round_trip:.1} us ({:.1} us per frame against {:.1} us device-only)",
                    frame_us(z),
                    frame_us(d)
                ),
                round_trip <= 25.0,
            ));
            clauses.push(format!(
                "a 4 KiB bgsub frame at the {} port takes {:.1} us through the node, {:.1} us \
                 of them software round trip beyond the device-only run",
                z.clock,
                frame_us(z),
                round_trip
            ));
        }
        plots.push(LinePlot::new(
            format!("{name} coprocessor in a process network: delivered throughput"),
            XAxis::Bytes,
            "window (output bytes)",
            "delivered MB/s",
            series_by(
                &mine,
                |r| format!("{} {}", r.pipeline, r.clock),
                |r| r.window_bytes as f64,
                |r| r.mb_per_s.median,
            ),
        ));
    }
    let heading = format!(
        "pipeline: source -> coprocessor -> sink on the emulated fabric, for the \
         {TAPS}-tap FIR core ({} samples per run; windows of hop + {} samples) and the \
         background-subtraction core (square frames, {} bytes of them per run); median \
         of {} runs each, interleaved: the accelerator node on queues in DMA memory \
         (zerocopy) against copying through DMA buffers with as many windows in flight \
         (copy); device thread on {}",
        cfg.samples,
        TAPS - 1,
        cfg.frame_bytes,
        cfg.rounds,
        placement_here()
    );
    Report::of("pipeline", heading, &columns(), rows)
        .answer(sentence(&clauses))
        .targets(targets)
        .plots(plots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_does_not_depend_on_slicing_but_on_order() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let of = |data: &[u8], cut: usize| {
            let (mut sum, mut len) = (0, 0);
            for piece in data.chunks(cut) {
                sum = digest(sum, len / 8, piece);
                len += piece.len() as u64;
            }
            sum ^ len
        };
        let whole = of(&data, data.len());
        for cut in [8usize, 16, 248, 992] {
            assert_eq!(of(&data, cut), whole, "pieces of {cut}");
        }
        let mut swapped = data.clone();
        swapped.swap(10, 500);
        assert_ne!(of(&swapped, 1000), whole, "order matters");
        assert_ne!(of(&data[..999], 1000), whole, "length matters");
    }

    #[test]
    fn both_pipelines_deliver_the_same_filtered_stream() {
        let t0 = Instant::now();
        let cfg = Config::at(&Setup::TINY);
        let rows = run(&cfg, &mut |_| {}).unwrap();
        let wall = t0.elapsed().as_secs_f64();
        // Two clocks, two cores, one window, three pipelines.
        assert_eq!(rows.len(), 12);
        for r in &rows {
            assert!(r.mb_per_s.median > 0.0 && r.cpu_us_per_mb > 0.0, "{r:?}");
            // The node's thread is one of the pipeline's (the device-only
            // run's driving thread its only one).
            assert!(r.node_cpu_us_per_mb > 0.0, "{r:?}");
            assert!(r.node_cpu_us_per_mb <= r.cpu_us_per_mb, "{r:?}");
            if r.pipeline == "device" {
                assert_eq!(r.node_cpu_us_per_mb, r.cpu_us_per_mb, "{r:?}");
            }
            // The whole output went through in less than the test's time.
            let out = match r.core {
                Core::Fir => 4 * cfg.samples,
                Core::BgSub => cfg.frame_bytes,
            };
            assert!(out as f64 / (r.mb_per_s.median * 1e6) < wall, "{r:?}");
        }
        for r in rows.iter().filter(|r| r.pipeline == "zerocopy") {
            assert_eq!(r.copied_per_byte, 0.0, "{r:?}");
            // Set against the device-only run of the same core, window
            // and clock, which is there.
            assert!(r.vs_device.is_some_and(|Ratio(v)| v.median > 0.0), "{r:?}");
            assert!(rows.iter().any(|d| d.pipeline == "device"
                && (d.core, d.window_bytes, &d.clock) == (r.core, r.window_bytes, &r.clock)));
        }
        for r in rows.iter().filter(|r| r.pipeline != "zerocopy") {
            assert!(r.vs_device.is_none() && r.vs_copy.is_none(), "{r:?}");
        }
        // The copying pipeline copies each window in and each answer out: at
        // least two bytes per byte delivered.
        for r in rows.iter().filter(|r| r.pipeline == "copy") {
            assert!(r.copied_per_byte >= 2.0, "{r:?}");
        }
        let report = report(&cfg, &rows);
        assert_eq!(report.json["rows"][0]["core"], "fir");
        assert!(rows.iter().any(|r| r.core == Core::BgSub));
        assert!(report.text.contains("copied B/B"));
        // Both cores set against their device-only runs; bgsub's round trip.
        let aimed = |what: &str| {
            (report.targets.iter())
                .filter(|t| t.what.contains(what))
                .count()
        };
        assert_eq!(
            aimed("of the device-only baseline"),
            2,
            "{:?}",
            report.targets
        );
        assert_eq!(
            aimed("software round trip per frame"),
            1,
            "{:?}",
            report.targets
        );
    }
}
