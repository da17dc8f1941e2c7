//! `dmaflow bench pipeline`: an accelerator inside a process network.
//! source -> coprocessor -> sink through the emulated fabric, for the FIR core
//! ([`fir`]) and the background-subtraction core ([`bgsub`]), two ways each:
//! `zerocopy`, the accelerator node ([`dmaflow::accel::stage`],
//! [`dmaflow::accel::bgsub`]) handing windows in DMA memory to the engines in
//! place; `copy`, the pipeline a user builds without it, copying each window
//! into a DMA buffer and each answer out with the library's standard-I/O
//! calls. At the board's HP-port clock and unlimited, in turns run by run;
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

use std::fmt::{self, Display};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dmaflow::graph::{Graph, Input, Output};
use dmaflow::platform::cpu::thread_cpu_time;
use dmaflow::rig::{Rig, SimEngine};
use dmaflow::ring::Pod;
use dmaflow::sim::WorkMeter;
use dmaflow::sim::{Clock, Profile};

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point, Row, range_text};
use super::harness::{Setup, Tier, bytes_label, clock_label, placement_here};
use super::peers::first_of_each;
use super::plot::XAxis;
use super::report::Target;
use super::spread::{Ratio, typical};

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

/// The accelerator node's pipeline.
const ZEROCOPY: &str = "zerocopy";
/// The pipeline that copies each window in and each answer out.
const COPY: &str = "copy";
/// The core's DMA channels driven bare, with no graph.
const DEVICE: &str = "device";

/// `dmaflow bench pipeline`.
pub static EXPERIMENT: Bench<Config, At, Sample> = Bench {
    name: "pipeline",
    emulator_only: "it sets the emulated link's clock and chains emulated engines",
    question: "An accelerator inside a process network (FIR and background-subtraction cores): \
               the accelerator node on queues in DMA memory vs copying.",
    conditions: Conditions {
        timed: "from the first answer delivered to the output's end, the first answer's \
                bytes left out (the sink's looks; the device-only run's landings), so \
                that no run's start-up (threads, rings, memory first touched) counts \
                against its rate",
        against: "a copying pipeline on the same footing (FIR: the same scatter-gather \
                  engine and windows in flight, through a packet ring's standard I/O; \
                  bgsub: one frame at a time in both, as its background requires), the \
                  same core's DMA channels driven bare with no graph (device), and the \
                  modelled link; copied bytes counted where the library copies",
        model: "link_share and model_mb_per_s are the modelled link's; core_mb_per_s is the \
                emulated core's own compute on this host",
        paper: USER_X86,
    },
    prepare,
    heading,
    findings,
    check: Some(same_output),
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
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
    /// Rounds: in each, every pipeline at every point runs once in turn.
    pub rounds: usize,
    /// The board whose port clocks the link.
    pub profile: Profile,
    /// Every point's parameter with the emulated core's own rate there,
    /// measured before the first round.
    at: Vec<At>,
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
            at: Vec::new(),
        }
    }

    /// Output bytes a run of `core` at `window_bytes` delivers.
    fn delivered(&self, core: Core, window_bytes: usize) -> Result<u64, Error> {
        match core {
            Core::Fir => Ok(4 * self.samples as u64),
            Core::BgSub => bgsub::delivered(window_bytes, self.frame_bytes),
        }
    }
}

/// Where a point is: the core, the link's clock and the window, with what
/// the modelled link allows there and what the emulated core computes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct At {
    /// The coprocessor.
    pub core: Core,
    /// The link's clock: the board's port, or unlimited.
    pub clock: Clock,
    /// Output bytes per window.
    pub window_bytes: usize,
    /// What the modelled link allows, 10^6 B/s delivered (FIR: MM2S carries
    /// each window's overlap too; bgsub: the mask stream at the port's
    /// rate); `None` when unlimited.
    pub model_mb_per_s: Option<f64>,
    /// The emulated core's own compute rate on this host, 10^6 B/s of
    /// output: what the emulated device can deliver at most.
    pub core_mb_per_s: f64,
}

impl Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.core.name(),
            clock_label(self.clock),
            bytes_label(self.window_bytes)
        )
    }
}

/// What one run of one pipeline gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Delivered output, 10^6 B/s.
    pub mb_per_s: f64,
    /// Host CPU of the pipeline's threads per MB delivered, us.
    pub cpu_us_per_mb: f64,
    /// Host CPU of the node's thread alone (device runs: the driving
    /// thread) per MB delivered, us.
    pub node_cpu_us_per_mb: f64,
    /// Payload bytes the library copied on the pipeline's threads per byte
    /// delivered ([`dmaflow::copies`]).
    pub copied_per_byte: f64,
    /// The emulated device's own work ([`dmaflow::sim::DeviceWork`]: its
    /// thread moving payload and computing) per MB delivered, us of host
    /// time.
    pub device_us_per_mb: f64,
    /// The output's digest (device runs: 0, nothing reads their output).
    digest: u64,
}

/// Delivered MB/s of a run.
fn mb(s: &Sample) -> f64 {
    s.mb_per_s
}

/// A point's row: its runs, beside the other pipelines' at the same point.
type PipelineRow = Row<At, Sample>;

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
    /// The sink's [`Span::rate`], as f64 bits.
    rate: AtomicU64,
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
        let mut span = Span::new();
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
            span.answer(bytes.len() as u64);
            sum = digest(sum, len / 8, bytes);
            len += bytes.len() as u64;
            input.consume(k)?;
        }
        m.rate.store(span.rate(len).to_bits(), Ordering::Relaxed);
        m.out_bytes.store(len, Ordering::Relaxed);
        m.digest.store(sum ^ len, Ordering::Relaxed);
        Ok(())
    })
}

/// A node's body.
type Body = Box<dyn FnOnce() -> dmaflow::graph::NodeResult + Send>;

/// The span a run's rate is timed over ([`Span::rate`]): from the first
/// answer delivered to the end of the output, that answer's bytes left out.
/// The pipelines' sinks and the device-only runs' driving threads time it
/// alike, so that neither side's start-up (threads started, rings and
/// descriptors set up, queue memory first touched, the first answer's
/// latency) counts against its rate.
struct Span {
    /// When the whole run began.
    began: Instant,
    /// When the first answer was found, and its bytes.
    first: Option<(Instant, u64)>,
}

impl Span {
    /// A span whose run begins now.
    fn new() -> Self {
        Span {
            began: Instant::now(),
            first: None,
        }
    }

    /// Notes an answer of `bytes` found now: the first one starts the span.
    fn answer(&mut self, bytes: u64) {
        self.first.get_or_insert((Instant::now(), bytes));
    }

    /// Delivered bytes per second at the output's end, now, `total` bytes
    /// delivered in all: after the first answer, over the time since it;
    /// over the whole run where the first answer held everything.
    fn rate(&self, total: u64) -> f64 {
        let end = Instant::now();
        match self.first {
            Some((at, bytes)) if bytes < total && end > at => {
                (total - bytes) as f64 / (end - at).as_secs_f64()
            }
            _ => total as f64 / (end - self.began).as_secs_f64(),
        }
    }
}

/// The bytes a device-only run's result says it delivered (none on an
/// error).
fn delivered_of(result: &Result<(u64, u64), Error>) -> u64 {
    result.as_ref().map_or(0, |(bytes, _)| *bytes)
}

/// What one run gave: its rate ([`Span`]), the host CPU of its threads and
/// of the node's (or driving) thread alone, what it delivered and copied,
/// its digest.
struct Run {
    /// Delivered bytes per second over the run's [`Span`].
    rate: f64,
    cpu: Duration,
    node_cpu: Duration,
    out_bytes: u64,
    copied: u64,
    digest: u64,
    /// The emulated device's own work over the run
    /// ([`dmaflow::sim::DeviceWork::total`]).
    device: Duration,
}

impl Run {
    /// The run with the emulated device's own work `meter` read at its end
    /// (the fabric timed its work from the run's start).
    fn with_device(self, meter: &WorkMeter) -> Self {
        Run {
            device: meter.read().total(),
            ..self
        }
    }
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
    g.run()?;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Ok(Run {
        rate: f64::from_bits(get(&m.rate)),
        cpu: Duration::from_nanos(get(&m.cpu)),
        node_cpu: Duration::from_nanos(get(&m.node_cpu)),
        out_bytes: get(&m.out_bytes),
        copied: get(&m.copied),
        digest: get(&m.digest),
        device: Duration::ZERO,
    })
}

/// Output bytes per second of `step` (which appends its output to the
/// vector it is given), called until 20 ms have passed: the typical of
/// three such repeats ([`typical`]).
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
    typical(&rates)
}

/// Every point's parameter, with the emulated core's own rate measured
/// there: at the board's port clock and unlimited, every core at every
/// window.
fn prepare(cfg: &mut Config, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
    let mut at = Vec::new();
    for clock in [cfg.profile.port, Clock::Unlimited] {
        for &core in &cfg.cores {
            for &window_bytes in &cfg.windows {
                progress(&format!(
                    "pipeline: the {} core's own rate at {} windows",
                    core.name(),
                    bytes_label(window_bytes)
                ));
                // What the modelled link allows (bgsub: each frame's mask
                // leaves on S2MM as the frame arrives on MM2S), and the
                // emulated core's own rate.
                let (model, core_rate) = match core {
                    Core::Fir => (
                        clock.bytes_per_s().map(|b| fir::model(b, window_bytes)),
                        fir::core_rate(window_bytes),
                    ),
                    Core::BgSub => (clock.bytes_per_s(), bgsub::core_rate(window_bytes)?),
                };
                at.push(At {
                    core,
                    clock,
                    window_bytes,
                    model_mb_per_s: model.map(|m| m / 1e6),
                    core_mb_per_s: core_rate / 1e6,
                });
            }
        }
    }
    cfg.at = at;
    Ok(())
}

/// The three pipelines at every point, in the table's order.
fn points(cfg: &Config) -> Vec<Point<At>> {
    let mut v = Vec::new();
    for &at in &cfg.at {
        for series in [ZEROCOPY, COPY, DEVICE] {
            v.push(Point { series, at });
        }
    }
    v
}

/// One run of one pipeline; it must deliver the whole output.
fn measure(cfg: &Config, p: &Point<At>) -> Result<Sample, Error> {
    let At {
        core,
        clock,
        window_bytes,
        ..
    } = p.at;
    let zero_copy = p.series == ZEROCOPY;
    let run = match (core, p.series == DEVICE) {
        (Core::Fir, true) => fir::device_once(clock, window_bytes, cfg.samples)?,
        (Core::Fir, false) => fir::run_once(clock, window_bytes, cfg.samples, zero_copy)?,
        (Core::BgSub, true) => bgsub::device_once(clock, window_bytes, cfg.frame_bytes)?,
        (Core::BgSub, false) => bgsub::run_once(clock, window_bytes, cfg.frame_bytes, zero_copy)?,
    };
    let want = cfg.delivered(core, window_bytes)?;
    if run.out_bytes != want {
        return Err(Error::Peer {
            peer: "pipeline",
            reason: format!(
                "{} at {}: {} bytes delivered, {want} expected",
                p.series, p.at, run.out_bytes
            ),
        });
    }
    let bytes = run.out_bytes as f64;
    let per_mb = |cpu: Duration| cpu.as_secs_f64() * 1e6 / (bytes / 1e6);
    Ok(Sample {
        mb_per_s: run.rate / 1e6,
        cpu_us_per_mb: per_mb(run.cpu),
        node_cpu_us_per_mb: per_mb(run.node_cpu),
        copied_per_byte: run.copied as f64 / bytes,
        device_us_per_mb: per_mb(run.device),
        digest: run.digest,
    })
}

/// The pipelines' outputs agree at every point: every run of both (and of
/// the FIR device-only baseline, which digests its answers as the sink
/// does) has the digest of the accelerator node's first.
fn same_output(_: &Config, rows: &[PipelineRow]) -> Result<(), Error> {
    for r in rows.iter().filter(|r| r.point.series == ZEROCOPY) {
        let Some(first) = r.samples.first() else {
            continue;
        };
        let read =
            |series: &str| series == COPY || (series == DEVICE && r.point.at.core == Core::Fir);
        let copies = (r.others.iter())
            .filter(|(series, _)| read(series))
            .flat_map(|(_, s)| s);
        if let Some(bad) = (r.samples.iter().chain(copies)).find(|s| s.digest != first.digest) {
            return Err(Error::Corrupted {
                what: format!("pipeline {}", r.point.at),
                got: bad.digest as u32,
                expected: first.digest as u32,
            });
        }
    }
    Ok(())
}

/// For the accelerator node's rows: delivered MB/s over `series`' at the
/// same point, run by run (none for the other pipelines).
fn vs(r: &PipelineRow, series: &str) -> Option<Ratio> {
    match r.point.series {
        ZEROCOPY => r.ratio_to(series, mb),
        _ => None,
    }
}

/// Delivered MB/s over the runs.
fn delivered(r: &PipelineRow) -> f64 {
    r.typical(mb)
}

/// Delivered over what the modelled link allows.
fn link_share(r: &PipelineRow) -> Option<f64> {
    (r.point.at.model_mb_per_s).map(|m| delivered(r) / m)
}

/// Host CPU of the pipeline's threads per MB delivered, us.
fn cpu(r: &PipelineRow) -> f64 {
    r.typical(|s| s.cpu_us_per_mb)
}

/// Host CPU of the node's (or driving) thread per MB delivered, us.
fn node_cpu(r: &PipelineRow) -> f64 {
    r.typical(|s| s.node_cpu_us_per_mb)
}

/// Payload bytes copied per byte delivered, the largest of the runs.
fn copied(r: &PipelineRow) -> f64 {
    r.spread(|s| s.copied_per_byte).max
}

/// Where a window's time went at the accelerator node's point `r`: per
/// window, the run's time and the emulated device's own work in it, for the
/// node and for the device-only run, and the time beyond that work, so that
/// a loss the device's own work accounts for is told apart from the node's.
fn device_share(r: &PipelineRow) -> String {
    let window = r.point.at.window_bytes as f64;
    let device = |s: &Sample| s.device_us_per_mb;
    let (node, base) = (
        window / delivered(r),
        window / r.typical_of(DEVICE, mb).unwrap_or(f64::NAN),
    );
    let (node_work, base_work) = (
        window / 1e6 * r.typical(device),
        window / 1e6 * r.typical_of(DEVICE, device).unwrap_or(f64::NAN),
    );
    format!(
        "there a window took {node:.1} us through the node ({node_work:.1} of them the \
         emulated device's own work) against {base:.1} us device-only ({base_work:.1}); \
         beyond the device's own work {:.1} against {:.1} us ({:.1} %)",
        node - node_work,
        base - base_work,
        100.0 * (base - base_work) / (node - node_work)
    )
}

/// Whether the link was unlimited.
fn unlimited(r: &PipelineRow) -> bool {
    r.point.at.clock.bytes_per_s().is_none()
}

/// The rows' columns.
fn columns() -> Columns<'static, PipelineRow> {
    Columns::new()
        .plain("core", "core", |r: &PipelineRow| r.point.at.core.name())
        .doc("fir or bgsub")
        .plain("clock", "clock", |r| clock_label(r.point.at.clock))
        .doc("the link's rate, e.g. 1200MB/s, or unlimited")
        .bytes("window", "window_bytes", |r| r.point.at.window_bytes)
        .doc("output bytes per window: FIR hop x 4, bgsub frame")
        .series(
            "pipeline",
            "pipeline",
            "zerocopy: the accelerator node; copy: the copying pipeline; device: the \
             core's DMA channels driven bare",
        )
        .typical("MB/s", "mb_per_s", "delivered, 10^6 B/s", (1.0, 0), mb)
        .rounds_range("runs' range", "mb_per_s_spread", "delivered MB/s", 0, mb)
        .optional("model MB/s", "model_mb_per_s", 0, |r| {
            r.point.at.model_mb_per_s
        })
        .doc("what the modelled link allows; null unlimited")
        .col(
            "link share",
            "link_share",
            |r| link_share(r).map_or("-".into(), |s| format!("{:.1} %", 100.0 * s)),
            link_share,
        )
        .doc("mb_per_s over model_mb_per_s")
        .fixed("core MB/s", "core_mb_per_s", 0, |r| {
            r.point.at.core_mb_per_s
        })
        .doc("the emulated core's own compute rate on this host")
        .typical(
            "CPU us/MB",
            "cpu_us_per_mb",
            "host CPU of the source, node and sink threads per MB delivered",
            (1.0, 0),
            |s| s.cpu_us_per_mb,
        )
        .typical(
            "node us/MB",
            "node_cpu_us_per_mb",
            "the node's thread alone, on device rows the driving thread",
            (1.0, 0),
            |s| s.node_cpu_us_per_mb,
        )
        .typical(
            "device us/MB",
            "device_us_per_mb",
            "the emulated device's own work per MB delivered: host time its thread spent \
             moving payload to and from DMA memory and computing the core's packets, beside \
             the run's time (1e6 / mb_per_s us per MB); a board's device works beside the CPU",
            (1.0, 0),
            |s| s.device_us_per_mb,
        )
        .fixed("copied B/B", "copied_per_byte", 2, copied)
        .doc(
            "payload bytes the library copied on those threads per byte delivered, counted \
             where it copies; the largest of the runs",
        )
        .shown("of device", |r| {
            vs(r, DEVICE).map_or("-".into(), |q| {
                range_text(&q.0.scaled(100.0), 1, " %", false)
            })
        })
        .kept("vs_copy", |r| vs(r, COPY).map(|q| q.0.json()))
        .doc(
            "zerocopy rows: delivered over the copying pipeline's, run by run, a spread \
             as mb_per_s_spread's",
        )
        .kept("vs_device", |r| vs(r, DEVICE).map(|q| q.0.json()))
        .doc(
            "zerocopy rows: delivered over the device-only run's, run by run, a spread; in \
             the table as a percentage",
        )
        .kept("runs", |r| r.rounds())
        .doc("rounds measured")
}

/// Delivered MB/s against the window, a line per pipeline and clock: one
/// plot per core, of its rows.
const FIR_PLOT: Plot = Plot {
    title: "fir coprocessor in a process network: delivered throughput",
    x: "window_bytes",
    y: "mb_per_s",
    interval: None,
    y_scale: 1.0,
    lines: &["pipeline", "clock"],
    axis: XAxis::Bytes,
    log_y: false,
};

/// [`FIR_PLOT`] for the background-subtraction core.
const BGSUB_PLOT: Plot = Plot {
    title: "bgsub coprocessor in a process network: delivered throughput",
    ..FIR_PLOT
};

/// What was measured, one line.
fn heading(cfg: &Config) -> String {
    format!(
        "source -> coprocessor -> sink on the emulated fabric, for the {TAPS}-tap FIR core \
         ({} samples per run; windows of hop + {} samples) and the background-subtraction \
         core (square frames, {} bytes of them per run): the accelerator node on queues in \
         DMA memory (zerocopy) against copying through DMA buffers with as many windows in \
         flight (copy) and the core's DMA channels driven bare (device); device thread on {}",
        cfg.samples,
        TAPS - 1,
        cfg.frame_bytes,
        placement_here()
    )
}

/// Per core, the largest windows with the link unlimited against the
/// copying pipeline, the share of the modelled link kept, the issue's
/// targets, and the plot.
fn findings(_: &Config, rows: &[PipelineRow]) -> Findings {
    let zc = || rows.iter().filter(|r| r.point.series == ZEROCOPY);
    let mut found = Findings::default();
    if zc().next().is_some() {
        let worst = zc().map(copied).fold(0.0, f64::max);
        found.targets.push(Target::new(
            "the zero-copy pipelines copy 0 bytes per byte delivered",
            format!("{worst:.3} at most"),
            worst == 0.0,
        ));
    }
    for core in first_of_each(rows, |r| r.point.at.core)
        .into_iter()
        .map(|r| r.point.at.core)
    {
        let mine: Vec<&PipelineRow> = rows.iter().filter(|r| r.point.at.core == core).collect();
        of_core(core, &mine, &mut found);
        let plot = match core {
            Core::Fir => FIR_PLOT,
            Core::BgSub => BGSUB_PLOT,
        };
        let json = columns().json(mine.iter().copied());
        found.plots.push(plot.draw(&columns(), &json));
    }
    found
}

/// What `mine`, the rows of `core`, find: clauses and targets.
fn of_core(core: Core, mine: &[&PipelineRow], found: &mut Findings) {
    let name = core.name();
    let (clauses, targets) = (&mut found.clauses, &mut found.targets);
    let zc = || mine.iter().copied().filter(|r| r.point.series == ZEROCOPY);
    let unlimited_of = |pipeline: &'static str| {
        (mine.iter().copied()).filter(move |r| r.point.series == pipeline && unlimited(r))
    };
    let largest = |pipeline| unlimited_of(pipeline).max_by_key(|r| r.point.at.window_bytes);
    if let (Some(z), Some(c)) = (largest(ZEROCOPY), largest(COPY)) {
        clauses.push(format!(
            "with the link unlimited, the {name} accelerator node delivers {:.0} MB/s at {} \
             windows against {:.0} MB/s for the copying pipeline ({:.2}x), for {:.0} \
             against {:.0} us of host CPU per MB and {:.2} against {:.2} bytes copied \
             per byte",
            delivered(z),
            bytes_label(z.point.at.window_bytes),
            delivered(c),
            delivered(z) / delivered(c),
            cpu(z),
            cpu(c),
            copied(z),
            copied(c)
        ));
    }
    let modelled = zc().filter(|r| r.point.at.model_mb_per_s.is_some());
    if let Some(z) = modelled.min_by_key(|r| r.point.at.window_bytes) {
        clauses.push(format!(
            "at the {} port it keeps {:.1} % of the modelled link from {} windows",
            clock_label(z.point.at.clock),
            100.0 * link_share(z).unwrap_or(0.0),
            bytes_label(z.point.at.window_bytes)
        ));
    }
    if let Some((share, worst)) = zc()
        .filter(|r| r.point.at.window_bytes >= 4096)
        .filter_map(|r| link_share(r).map(|s| (s, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
    {
        targets.push(Target::new(
            format!(
                "{name}: zero-copy at the {} port from 4 KiB windows up >= 95 % of the \
                 modelled link",
                clock_label(worst.point.at.clock)
            ),
            format!(
                "at least {:.1} % ({:.0} MB/s, worst at {}; the emulated core itself \
                 computes {:.0} MB/s there on this host, the pipeline's threads take {:.0} \
                 us of CPU per MB on their one core)",
                100.0 * share,
                delivered(worst),
                bytes_label(worst.point.at.window_bytes),
                worst.point.at.core_mb_per_s,
                cpu(worst)
            ),
            share >= 0.95,
        ));
    }
    let at_64k = |pipeline| unlimited_of(pipeline).find(|r| r.point.at.window_bytes == 64 << 10);
    if let (Some(z), Some(c)) = (at_64k(ZEROCOPY), at_64k(COPY))
        && let Some(q) = vs(z, COPY)
    {
        let (ratio, lo, hi) = (q.typical(), q.0.min, q.0.max);
        targets.push(Target::new(
            format!(
                "{name}: unlimited clock, 64 KiB windows: zero-copy >= 1.5x the copying \
                 pipeline"
            ),
            format!(
                "{ratio:.2}x, runs {lo:.2}x to {hi:.2}x ({:.0} against {:.0} MB/s){}",
                delivered(z),
                delivered(c),
                q.0.straddle_note(1.5)
            ),
            ratio >= 1.5,
        ));
    }
    // Against the device-only baseline: every window size, both clocks.
    if let Some((worst, q)) = zc()
        .filter_map(|r| vs(r, DEVICE).map(|q| (r, q)))
        .min_by(|a, b| a.1.typical().total_cmp(&b.1.typical()))
    {
        targets.push(Target::new(
            format!(
                "{name}: the accelerator node >= 95 % of the device-only baseline at every \
                 window size"
            ),
            format!(
                "at least {:.1} % (worst at {} {}, runs {:.1} to {:.1} %){}; {}",
                100.0 * q.typical(),
                bytes_label(worst.point.at.window_bytes),
                clock_label(worst.point.at.clock),
                100.0 * q.0.min,
                100.0 * q.0.max,
                q.0.straddle_note(0.95),
                device_share(worst)
            ),
            q.typical() >= 0.95,
        ));
    }
    if let (Some(z), Some(c)) = (at_64k(ZEROCOPY), at_64k(COPY)) {
        let ratio = cpu(c) / cpu(z);
        targets.push(Target::new(
            format!(
                "{name}: unlimited clock, 64 KiB windows: the copying pipeline's host CPU \
                 per MB >= 2x the accelerator node's"
            ),
            format!(
                "{ratio:.2}x ({:.0} against {:.0} us per MB; the nodes' threads alone {:.0} \
                 against {:.0}, the device-only run's {:.0})",
                cpu(c),
                cpu(z),
                node_cpu(c),
                node_cpu(z),
                at_64k(DEVICE).map_or(f64::NAN, node_cpu)
            ),
            ratio >= 2.0,
        ));
    }
    // bgsub: one frame in flight, so each frame's time beyond the
    // device-only run's is the node's software round trip.
    let at_port = |pipeline: &'static str| {
        (mine.iter().copied()).find(move |r| {
            r.point.series == pipeline && r.point.at.window_bytes == 4 << 10 && !unlimited(r)
        })
    };
    if core == Core::BgSub
        && let (Some(z), Some(d)) = (at_port(ZEROCOPY), at_port(DEVICE))
    {
        let frame_us = |r: &PipelineRow| r.point.at.window_bytes as f64 / delivered(r);
        let round_trip = frame_us(z) - frame_us(d);
        let clock = clock_label(z.point.at.clock);
        targets.push(Target::new(
            format!(
                "bgsub: 4 KiB frames at the {clock} port: the node's software round trip per \
                 frame <= 25 us (half of the ~50 us before)"
            ),
            format!(
                "{round_trip:.1} us ({:.1} us per frame against {:.1} us device-only)",
                frame_us(z),
                frame_us(d)
            ),
            round_trip <= 25.0,
        ));
        clauses.push(format!(
            "a 4 KiB bgsub frame at the {clock} port takes {:.1} us through the node, {:.1} us \
             of them software round trip beyond the device-only run",
            frame_us(z),
            round_trip
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's rate leaves out its start-up and its first answer: with 50 ms
    /// before the first answer, the span's rate is above the whole run's;
    /// later answers do not move the span's start; a first answer that held
    /// the whole output leaves the whole run's rate.
    #[test]
    fn a_span_leaves_out_the_start_up_and_the_first_answer() {
        let mut span = Span::new();
        std::thread::sleep(Duration::from_millis(50));
        span.answer(1);
        span.answer(500);
        assert_eq!(span.first.map(|(_, b)| b), Some(1));
        let rate = span.rate(1001);
        let whole = 1001.0 / span.began.elapsed().as_secs_f64();
        assert!(rate > whole, "{rate} against the whole run's {whole}");
        let mut all = Span::new();
        all.answer(1000);
        let rate = all.rate(1000);
        assert!(rate.is_finite() && rate > 0.0, "{rate}");
        assert!(rate >= 1000.0 / all.began.elapsed().as_secs_f64(), "{rate}");
    }

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
    fn a_copying_run_with_other_output_fails_the_run() {
        let sample = |digest| Sample {
            mb_per_s: 1.0,
            cpu_us_per_mb: 1.0,
            node_cpu_us_per_mb: 1.0,
            copied_per_byte: 0.0,
            device_us_per_mb: 1.0,
            digest,
        };
        let row = |copy_digests: &[u64], device_digests: &[u64]| Row {
            point: Point {
                series: ZEROCOPY,
                at: At {
                    core: Core::Fir,
                    clock: Clock::Unlimited,
                    window_bytes: 4 << 10,
                    model_mb_per_s: None,
                    core_mb_per_s: 1.0,
                },
            },
            samples: vec![sample(7), sample(7)],
            baseline: None,
            others: vec![
                (COPY, copy_digests.iter().map(|&d| sample(d)).collect()),
                (DEVICE, device_digests.iter().map(|&d| sample(d)).collect()),
            ],
        };
        let cfg = Config::at(&Setup::TINY);
        assert!(same_output(&cfg, &[row(&[7, 7], &[7])]).is_ok());
        let e = same_output(&cfg, &[row(&[7, 8], &[7])])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("pipeline fir unlimited 4 KiB: checksum 0x00000008"),
            "{e}"
        );
        // The FIR device-only run reads its answers: they count too.
        let e = same_output(&cfg, &[row(&[7, 7], &[9])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("checksum 0x00000009"), "{e}");
    }

    #[test]
    fn both_pipelines_deliver_the_same_filtered_stream() {
        let t0 = Instant::now();
        let mut cfg = Config::at(&Setup::TINY);
        prepare(&mut cfg, &mut |_| {}).unwrap();
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        let wall = t0.elapsed().as_secs_f64();
        // Two clocks, two cores, one window, three pipelines.
        assert_eq!(rows.len(), 12);
        for r in &rows {
            let (series, at) = (r.point.series, r.point.at);
            assert!(at.core_mb_per_s > 0.0, "{at}");
            for s in &r.samples {
                assert!(
                    s.mb_per_s > 0.0 && s.cpu_us_per_mb > 0.0,
                    "{series} {at}: {s:?}"
                );
                // The node's thread is one of the pipeline's (the device-only
                // run's driving thread its only one).
                assert!(s.node_cpu_us_per_mb > 0.0, "{series} {at}: {s:?}");
                assert!(
                    s.node_cpu_us_per_mb <= s.cpu_us_per_mb,
                    "{series} {at}: {s:?}"
                );
                if series == DEVICE {
                    assert_eq!(s.node_cpu_us_per_mb, s.cpu_us_per_mb, "{at}: {s:?}");
                }
                // The whole output went through in less than the test's time.
                let out = cfg.delivered(at.core, at.window_bytes).unwrap();
                assert!(
                    out as f64 / (s.mb_per_s * 1e6) < wall,
                    "{series} {at}: {s:?}"
                );
                // The emulated device worked in every run: at least the
                // core's compute (its own rate, measured alone, with a
                // margin for this host's spread), within the run's time.
                let compute_us_per_mb = 1e6 / at.core_mb_per_s;
                assert!(
                    s.device_us_per_mb > compute_us_per_mb / 4.0,
                    "{series} {at}: {s:?}"
                );
                assert!(
                    s.device_us_per_mb * out as f64 / 1e6 < wall * 1e6,
                    "{series} {at}: {s:?}"
                );
                // The zero-copy pipelines copy nothing; the copying one each
                // window in and each answer out: two bytes per byte at least.
                match series {
                    ZEROCOPY => assert_eq!(s.copied_per_byte, 0.0, "{at}: {s:?}"),
                    COPY => assert!(s.copied_per_byte >= 2.0, "{at}: {s:?}"),
                    _ => {}
                }
            }
            match series {
                // Set against the device-only run at the same point.
                ZEROCOPY => assert!(vs(r, DEVICE).is_some_and(|q| q.typical() > 0.0), "{at}"),
                _ => assert!(vs(r, DEVICE).is_none() && vs(r, COPY).is_none(), "{at}"),
            }
        }
        let report = EXPERIMENT.report(&cfg, &rows);
        let first = &report.json["rows"][0];
        assert_eq!(
            (&first["core"], &first["pipeline"]),
            (&"fir".into(), &"zerocopy".into())
        );
        assert_eq!(first["mb_per_s_spread"]["n"], 1);
        // One round: the runs' range is the figure itself.
        assert_eq!(first["mb_per_s_spread"]["min"], first["mb_per_s"]);
        assert_eq!(first["mb_per_s_spread"]["max"], first["mb_per_s"]);
        assert_eq!(
            (&first["vs_device"]["n"], &first["vs_copy"]["n"]),
            (&1.into(), &1.into())
        );
        assert!(report.json["rows"][1]["vs_copy"].is_null());
        assert!(rows.iter().any(|r| r.point.at.core == Core::BgSub));
        assert!(report.text.contains("copied B/B"));
        // A plot per core, a line per pipeline and clock.
        assert_eq!(report.plots.len(), 2);
        assert!(report.plots[1].title.starts_with("bgsub"));
        assert_eq!(report.plots[0].series.len(), 6);
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
