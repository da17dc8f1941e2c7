//! `dmaflow bench sched`: the pipes x stages flowgraph every SDR runtime is
//! benchmarked with (FutureSDR's `perf/null_rand` and `perf/fir`, and the GNU
//! Radio scheduler studies before them): P parallel pipes, each
//! `null source -> head(N) -> S blocks -> null sink`, the blocks either
//! copies (the runtime's own cost per hand-over), copies of a random 1..=128
//! items per call (small, irregular hand-overs) or 64-tap FIR filters
//! (runtime plus computation), in dmaflow's graph (tasks, [`Graph::task`], or
//! threads, [`Graph::node`]), FutureSDR 0.8.0 (built by this command in a
//! directory of its own, `cli/peers/futuresdr-sched` into `target/futuresdr`,
//! so that none of its crates enters dmaflow's tree) and GNU Radio 3.10 from
//! its Python API where installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Point};
use super::harness::{Setup, Tier};
use super::peers::xorshift;
use super::report::Target;
use super::spread::Ratio;
use dmaflow::dsp::fir::{self, Mode, OverlapSave};
use dmaflow::graph::{Graph, Input, NodeResult, Output};
use dmaflow::platform::cpu::process_cpu_time;

/// Taps of every FIR stage (FutureSDR's `perf/fir` uses 64).
pub const TAPS: usize = 64;

/// What to measure, and the peers a run found.
pub struct Config {
    /// Parallel pipes.
    pub pipes: usize,
    /// Stage counts.
    pub stages: Vec<usize>,
    /// Samples per pipe through copy, random copy and FIR stages ([`Block`]'s order).
    pub samples: [u64; 3],
    /// Rounds.
    pub rounds: usize,
    /// Whether to measure the peers (FutureSDR, GNU Radio) where present.
    pub peers: bool,
    /// Whether FutureSDR may be built (minutes the first time) when it is
    /// not built yet.
    pub build_futuresdr: bool,
    /// FutureSDR's program, or why it is not measured.
    pub futuresdr: Result<PathBuf, String>,
    /// GNU Radio's presence, or why it is not measured.
    pub gnuradio: Result<(), String>,
    /// Where the taps file the peers read is written.
    pub scratch: Option<Arc<super::peers::ScratchDir>>,
}

/// Why the peers are not measured before a run looks for them.
const NOT_HERE: &str = "peers not measured in this run";

impl Config {
    /// The size `setup` asks for: the full run, or the quick one made from
    /// it (FutureSDR only if already built), or the tiny one for tests
    /// (dmaflow alone).
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            pipes: 4,
            stages: vec![1, 2, 5, 10, 20],
            // Copies through 64 KiB buffers run at several G samples/s: 50 M
            // per pipe keep a run at 1 stage over 40 ms.
            samples: [50_000_000, 5_000_000, 2_000_000],
            rounds: 5,
            peers: true,
            build_futuresdr: true,
            futuresdr: Err(NOT_HERE.into()),
            gnuradio: Err(NOT_HERE.into()),
            scratch: None,
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                stages: vec![1, 5, 20],
                samples: [20_000_000, 2_000_000, 500_000],
                rounds: 3,
                build_futuresdr: false,
                ..full
            },
            Tier::Tiny => Config {
                pipes: 2,
                stages: vec![1, 3],
                samples: [100_000, 100_000, 20_000],
                rounds: 1,
                peers: false,
                build_futuresdr: false,
                ..full
            },
        }
    }
}

/// The blocks of a pipe's stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// Copies.
    Copy,
    /// Copies of a random 1..=128 items per call ([`RAND_MAX_COPY`]).
    Rand,
    /// 64-tap FIR filters.
    Fir,
}

/// Most items a random copy stage moves per call (FutureSDR's
/// `perf/null_rand` draws up to its `max_copy`).
pub const RAND_MAX_COPY: u64 = 128;

/// The seed of random copy stage `stage` of pipe `pipe`: the same in
/// FutureSDR's program (`cli/peers/futuresdr-sched`).
fn rand_seed(pipe: usize, stage: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15 ^ ((pipe as u64) << 32 | (stage as u64 + 1))
}

impl Block {
    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Block::Copy => "copy",
            Block::Rand => "copy-rand",
            Block::Fir => "fir64",
        }
    }
}

/// A runtime with its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// dmaflow, nodes as tasks on the worker pool.
    DmaflowTasks,
    /// dmaflow, a thread per node.
    DmaflowThreads,
    /// dmaflow, nodes as tasks, FIR stages in direct form (FIR only).
    DmaflowDirect,
    /// FutureSDR 0.8.0.
    FutureSdr,
    /// GNU Radio 3.10, time-domain blocks (`copy`, `fir_filter_fff`).
    GnuRadio,
    /// GNU Radio 3.10 with `fft_filter_fff` (FIR stages only).
    GnuRadioFft,
}

impl Runtime {
    /// Every runtime.
    pub const ALL: [Runtime; 6] = [
        Runtime::DmaflowTasks,
        Runtime::DmaflowThreads,
        Runtime::DmaflowDirect,
        Runtime::FutureSdr,
        Runtime::GnuRadio,
        Runtime::GnuRadioFft,
    ];

    /// The runtime of `name` ([`Runtime::name`]).
    pub fn named(name: &str) -> Option<Runtime> {
        Runtime::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::DmaflowTasks => "dmaflow-tasks",
            Runtime::DmaflowThreads => "dmaflow-threads",
            Runtime::DmaflowDirect => "dmaflow-tasks-direct",
            Runtime::FutureSdr => "futuresdr",
            Runtime::GnuRadio => "gnuradio",
            Runtime::GnuRadioFft => "gnuradio-fft",
        }
    }

    /// What its flowgraph does, in its own words.
    pub fn does(self, block: Block) -> &'static str {
        match (self, block) {
            (Runtime::DmaflowTasks, Block::Copy) => {
                "dmaflow Graph, every node a task on one worker per core, 64 KiB queues: source \
                 fills what is free with zeros, head and copy stages memcpy what is readable \
                 and free, sink counts"
            }
            (Runtime::DmaflowTasks, Block::Rand) => {
                "dmaflow Graph, tasks, 64 KiB queues: each stage copies what is readable and \
                 free, at most a random 1..=128 items per call (xorshift64, fixed seeds)"
            }
            (Runtime::DmaflowThreads, Block::Rand) => {
                "dmaflow Graph, a thread per node; the same random copy stages"
            }
            (Runtime::FutureSdr, Block::Rand) => {
                "FutureSDR 0.8.0, FUTURESDR_BUFFER_SIZE=65536: CopyRand stages (what is readable \
                 and free, at most the same random 1..=128 items per call, same generator and \
                 seeds)"
            }
            (Runtime::DmaflowThreads, Block::Copy) => {
                "dmaflow Graph, every node on a thread of its own; same nodes as dmaflow-tasks"
            }
            (Runtime::DmaflowTasks, Block::Fir) => {
                "dmaflow Graph, tasks; each stage dmaflow's overlap-save FIR (FFT 256 for 64 \
                 taps, zero-copy windows), output count = input count"
            }
            (Runtime::DmaflowThreads, Block::Fir) => {
                "dmaflow Graph, a thread per node; the same overlap-save FIR stages"
            }
            (Runtime::DmaflowDirect, Block::Fir) => {
                "dmaflow Graph, tasks; each stage a direct-form FIR (64-tap dot products on \
                 the queue's window, what is readable and free per call; only whole windows: 63 \
                 samples fewer per stage)"
            }
            (Runtime::FutureSdr, Block::Copy) => {
                "FutureSDR 0.8.0 default runtime (smol, one worker per core), \
                 FUTURESDR_BUFFER_SIZE=65536 (as its own perf flowgraphs set it): NullSource, \
                 Head, Copy, NullSink"
            }
            (Runtime::FutureSdr, Block::Fir) => {
                "FutureSDR 0.8.0: FirBuilder::fir, a time-domain FIR (only whole windows: 63 \
                 samples fewer per stage)"
            }
            (Runtime::GnuRadio, Block::Copy) => {
                "GNU Radio 3.10 from Python, a thread per block, its default 64 KiB buffers \
                 (2 x 32 KiB): null_source, head, copy, null_sink"
            }
            (Runtime::GnuRadio, Block::Fir) => {
                "GNU Radio 3.10: fir_filter_fff, time-domain (VOLK dot products)"
            }
            (Runtime::GnuRadioFft, Block::Fir) => {
                "GNU Radio 3.10: fft_filter_fff, overlap-save with FFTW (FFT 128 for 64 taps)"
            }
            // The direct form and GNU Radio's FFT filter run FIR stages only, and GNU
            // Radio has no random copy block: no row has these.
            _ => "not measured",
        }
    }

    /// The FIR algorithm of its FIR stages ("-" for copies).
    pub fn algorithm(self, block: Block) -> &'static str {
        match (self, block) {
            (_, Block::Copy | Block::Rand) => "-",
            (Runtime::FutureSdr | Runtime::GnuRadio | Runtime::DmaflowDirect, _) => "direct form",
            _ => "FFT (overlap-save)",
        }
    }

    /// Items each sink must take from `n` samples through `stages` of
    /// `block`: `(least, most)`.
    fn expected(self, block: Block, n: u64, stages: usize) -> (u64, u64) {
        match (self, block) {
            (Runtime::FutureSdr | Runtime::DmaflowDirect, Block::Fir) => {
                let n = n.saturating_sub(stages as u64 * (TAPS as u64 - 1));
                (n, n)
            }
            // fft_filter_fff leaves a last part-block unfiltered: less than
            // its FFT length per stage.
            (Runtime::GnuRadioFft, _) => (n.saturating_sub(stages as u64 * 128), n),
            _ => (n, n),
        }
    }
}

/// Where on a runtime's series a point is: the stages' block and how many
/// stages each pipe has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// The stages' block.
    pub block: Block,
    /// Stages per pipe.
    pub stages: usize,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} stages", self.stages, self.block.name())
    }
}

/// One round's run of one runtime's flowgraph.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Wall seconds of the run.
    pub seconds: f64,
    /// Process CPU seconds over the same span.
    pub cpu_seconds: f64,
    /// Items each sink took.
    pub sink_items: Vec<u64>,
    /// Pipes.
    pub pipes: usize,
    /// Samples per pipe into the head.
    pub per_pipe: u64,
}

impl Sample {
    /// Samples per second through all pipes.
    pub fn rate(&self) -> f64 {
        (self.pipes as u64 * self.per_pipe) as f64 / self.seconds
    }

    /// Cores kept busy: CPU seconds over wall seconds.
    pub fn busy(&self) -> f64 {
        self.cpu_seconds / self.seconds
    }
}

/// A measured point.
pub type Row = super::frame::Row<At, Sample>;

/// Samples per second per busy core: the rounds' rate over their cores
/// busy, each the median of the rounds.
fn per_core(r: &Row) -> f64 {
    r.median(Sample::rate) / r.median(Sample::busy).max(f64::MIN_POSITIVE)
}

/// Defines node bodies twice from one text: blocking, for a thread node,
/// and async, for a task node.
macro_rules! bodies {
    ($($(#[$m:meta])* fn $name:ident / $aname:ident ($($arg:ident: $t:ty),*) -> $ret:ty $body:block)*) => {$(
        $(#[$m])*
        #[allow(unused_mut, unused_macros)]
        fn $name($(mut $arg: $t),*) -> $ret {
            macro_rules! peek { ($p:expr, $n:expr) => { $p.peek($n) } }
            macro_rules! reserve_up_to { ($p:expr, $n:expr) => { $p.reserve_up_to($n) } }
            $body
        }
        $(#[$m])*
        #[allow(unused_mut, unused_macros)]
        async fn $aname($(mut $arg: $t),*) -> $ret {
            macro_rules! peek { ($p:expr, $n:expr) => { $p.peek_async($n).await } }
            macro_rules! reserve_up_to { ($p:expr, $n:expr) => { $p.reserve_up_to_async($n).await } }
            $body
        }
    )*};
}

/// Bytes of every dmaflow queue: the library's default (64 KiB), as
/// FutureSDR's buffers here (`FUTURESDR_BUFFER_SIZE`) and GNU Radio's
/// default (2 x 32 KiB).
pub const QUEUE_BYTES: usize = dmaflow::graph::DEFAULT_QUEUE_BYTES;

bodies! {
    /// An endless source of zeros (GNU Radio's `null_source`): fills what
    /// is free.
    fn null_source / null_source_async(out: Output<f32>) -> NodeResult {
        loop {
            let d = reserve_up_to!(out, usize::MAX)?;
            d.fill(0.0);
            let k = d.len();
            out.commit(k)?;
        }
    }

    /// Passes items on, at most `limit` of them (`head`; `u64::MAX`: a copy),
    /// each call what is readable and free; with `rand`, at most a draw of
    /// 1..=[`RAND_MAX_COPY`] items from that generator state per call.
    fn pass / pass_async(inp: Input<f32>, out: Output<f32>, limit: u64, rand: Option<u64>) -> NodeResult {
        while limit > 0 {
            let s = peek!(inp, 1)?;
            if s.is_empty() {
                break;
            }
            let mut k = (s.len() as u64).min(limit) as usize;
            if let Some(st) = rand.as_mut() {
                k = k.min(1 + (xorshift(st) % RAND_MAX_COPY) as usize);
            }
            let d = reserve_up_to!(out, k)?;
            let m = d.len();
            d.copy_from_slice(&s[..m]);
            out.commit(m)?;
            inp.consume(m)?;
            limit -= m as u64;
        }
        Ok(())
    }

    /// Counts what arrives (`null_sink`).
    fn null_sink / null_sink_async(inp: Input<f32>, count: Arc<AtomicU64>) -> NodeResult {
        loop {
            let k = peek!(inp, 1)?.len();
            if k == 0 {
                return Ok(());
            }
            inp.consume(k)?;
            count.fetch_add(k as u64, Ordering::Relaxed);
        }
    }
}

/// dmaflow's pipes, every node a task (`tasks`) or a thread.
fn dmaflow_run(
    pipes: usize,
    stages: usize,
    samples: u64,
    block: Block,
    taps: &[f32; TAPS],
    rt: Runtime,
) -> Result<Sample, Error> {
    let tasks = rt != Runtime::DmaflowThreads;
    let mut g = Graph::new().queue_bytes(QUEUE_BYTES);
    let mut counts = Vec::new();
    macro_rules! add {
        ($name:expr, $f:ident / $af:ident ($($a:expr),*)) => {
            if tasks {
                g.task($name, $af($($a),*))?
            } else {
                g.node($name, move || $f($($a),*))?
            }
        };
    }
    for p in 0..pipes {
        let name = |s: &str| format!("{s}{p}");
        let (src, h_in) = g.connect::<f32>((&name("source"), "out"), (&name("head"), "in"))?;
        add!(&name("source"), null_source / null_source_async(src));
        let stage = |s: usize| match s < stages {
            true => format!("s{p}_{s}"),
            false => name("sink"),
        };
        let (h_out, mut inp) = g.connect::<f32>((&name("head"), "out"), (&stage(0), "in"))?;
        add!(&name("head"), pass / pass_async(h_in, h_out, samples, None));
        for s in 0..stages {
            let (out, next) = g.connect::<f32>((&stage(s), "out"), (&stage(s + 1), "in"))?;
            match block {
                Block::Copy | Block::Rand => {
                    let seed = (block == Block::Rand).then(|| rand_seed(p, s));
                    add!(&stage(s), pass / pass_async(inp, out, u64::MAX, seed))
                }
                Block::Fir if rt == Runtime::DmaflowDirect => {
                    g.task(&stage(s), fir::run_direct(inp, out, *taps))?
                }
                Block::Fir => {
                    let f = OverlapSave::new(taps, None).map_err(Error::peer("dmaflow"))?;
                    let add = if tasks { fir::add_task } else { fir::add_node };
                    add(&mut g, &stage(s), f, Mode::ZeroCopy, inp, out)?;
                }
            }
            inp = next;
        }
        let count = Arc::new(AtomicU64::new(0));
        let c = count.clone();
        add!(&name("sink"), null_sink / null_sink_async(inp, c));
        counts.push(count);
    }
    let (c0, t0) = (process_cpu_time(), Instant::now());
    g.run()?;
    let (t1, c1) = (Instant::now(), process_cpu_time());
    Ok(Sample {
        seconds: (t1 - t0).as_secs_f64(),
        cpu_seconds: c1.saturating_sub(c0).as_secs_f64(),
        sink_items: counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
        pipes,
        per_pipe: samples,
    })
}

/// How long a peer's flowgraph may take before it counts as hung.
const PEER_LIMIT: Duration = Duration::from_secs(300);

const GR_SCRIPT: &str = include_str!("../../peers/gnuradio_sched_bench.py");

/// A peer's flowgraph (FutureSDR's program or GNU Radio's script) run to its
/// end, its JSON line read.
fn peer_run(
    rt: Runtime,
    futuresdr: &Result<PathBuf, String>,
    (pipes, stages, n): (usize, usize, u64),
    block: Block,
    taps: &Path,
) -> Result<Sample, Error> {
    let (peer, mut cmd) = match rt {
        Runtime::FutureSdr => {
            let mut cmd = Command::new(futuresdr.as_ref().map_err(Error::peer("futuresdr"))?);
            cmd.env("FUTURESDR_BUFFER_SIZE", QUEUE_BYTES.to_string());
            ("futuresdr", cmd)
        }
        _ => {
            let mut cmd = Command::new("/usr/bin/python3");
            cmd.args(["-c", GR_SCRIPT]);
            ("gnuradio", cmd)
        }
    };
    cmd.args([pipes.to_string(), stages.to_string(), n.to_string()]);
    match (rt, block) {
        (_, Block::Copy) => cmd.arg("copy"),
        (_, Block::Rand) => cmd.arg("rand"),
        (Runtime::GnuRadioFft, _) => cmd.arg("fft").arg(taps),
        _ => cmd.arg("fir").arg(taps),
    };
    super::peers::said(peer, &mut cmd, PEER_LIMIT, |said| {
        let v: serde_json::Value = serde_json::from_str(said.lines().last()?).ok()?;
        let items = v["sink_items"].as_array()?.iter().map(|x| x.as_u64());
        Some(Sample {
            seconds: v["seconds"].as_f64()?,
            cpu_seconds: v["cpu_seconds"].as_f64()?,
            sink_items: items.collect::<Option<_>>()?,
            pipes,
            per_pipe: n,
        })
    })
}

/// The FIR taps every runtime uses: a windowed low-pass (sinc, Hann).
fn taps() -> [f32; TAPS] {
    let m = (TAPS - 1) as f64 / 2.0;
    std::array::from_fn(|i| {
        let x = i as f64 - m;
        let sinc = if x == 0.0 {
            0.25
        } else {
            (std::f64::consts::PI * 0.25 * x).sin() / (std::f64::consts::PI * x)
        };
        let w = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / (TAPS - 1) as f64).cos();
        (sinc * w) as f32
    })
}

/// Finds the peers (FutureSDR built if asked and not built yet, GNU Radio
/// where installed) and writes the taps their flowgraphs read.
fn prepare(cfg: &mut Config, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
    let dir = super::peers::ScratchDir::new("dmaflow-sched")?;
    super::peers::write_f32(&dir.path().join("taps.f32"), &taps())?;
    cfg.scratch = Some(Arc::new(dir));
    if cfg.peers {
        cfg.futuresdr = super::peers::futuresdr_exe(cfg.build_futuresdr, progress);
        cfg.gnuradio = match super::peers::gnuradio_here() {
            true => Ok(()),
            false => Err("GNU Radio is not installed (apt-get install gnuradio)".to_string()),
        };
    }
    Ok(())
}

/// Every runtime present through every block's stage counts, in the
/// table's order.
fn points(cfg: &Config) -> Vec<Point<At>> {
    let mut v = Vec::new();
    for block in [Block::Copy, Block::Rand, Block::Fir] {
        let mut runtimes = vec![Runtime::DmaflowTasks, Runtime::DmaflowThreads];
        if block == Block::Fir {
            runtimes.push(Runtime::DmaflowDirect);
        }
        if cfg.futuresdr.is_ok() {
            runtimes.push(Runtime::FutureSdr);
        }
        // GNU Radio has no random copy block.
        if cfg.gnuradio.is_ok() && block != Block::Rand {
            runtimes.push(Runtime::GnuRadio);
            if block == Block::Fir {
                runtimes.push(Runtime::GnuRadioFft);
            }
        }
        for &stages in &cfg.stages {
            for rt in &runtimes {
                v.push(Point {
                    series: rt.name(),
                    at: At { block, stages },
                });
            }
        }
    }
    v
}

/// One run of one runtime's flowgraph, every sink's count checked.
fn measure(cfg: &Config, p: &Point<At>) -> Result<Sample, Error> {
    let At { block, stages } = p.at;
    let rt = Runtime::named(p.series)
        .ok_or_else(|| Error::peer("sched")(format!("no runtime {}", p.series)))?;
    let n = cfg.samples[block as usize];
    let s = match rt {
        Runtime::DmaflowTasks | Runtime::DmaflowThreads | Runtime::DmaflowDirect => {
            dmaflow_run(cfg.pipes, stages, n, block, &taps(), rt)?
        }
        _ => {
            let dir = cfg.scratch.as_ref().ok_or_else(|| {
                Error::peer(p.series)("the taps file was not written before the run")
            })?;
            let taps_path = dir.path().join("taps.f32");
            peer_run(
                rt,
                &cfg.futuresdr,
                (cfg.pipes, stages, n),
                block,
                &taps_path,
            )?
        }
    };
    let (least, most) = rt.expected(block, n, stages);
    if s.sink_items.len() != cfg.pipes || s.sink_items.iter().any(|k| !(least..=most).contains(k)) {
        return Err(Error::peer("sched")(format!(
            "{} with {stages} {} stages: sinks took {:?} items, expected {least}..={most} each",
            rt.name(),
            block.name(),
            s.sink_items
        )));
    }
    Ok(s)
}

/// The rows' columns: the table and the JSON keys.
fn columns() -> Columns<'static, Row> {
    let vs = |r: &Row, peer: Runtime| {
        if ![Runtime::DmaflowTasks, Runtime::DmaflowDirect]
            .map(Runtime::name)
            .contains(&r.point.series)
        {
            return String::new();
        }
        r.ratio_to(peer.name(), Sample::rate)
            .map_or(String::new(), |x| x.text_with_verdict())
    };
    let first = |r: &Row, f: fn(&Sample) -> u64| r.samples.first().map_or(0, f);
    Columns::new()
        .plain("block", "block", |r: &Row| r.point.at.block.name())
        .doc("the stages' block: copy, copy-rand or fir64")
        .plain("stages", "stages", |r| r.point.at.stages)
        .doc("stages per pipe")
        .series(
            "runtime",
            "runtime",
            "dmaflow-tasks, dmaflow-threads, dmaflow-tasks-direct, futuresdr, gnuradio or \
             gnuradio-fft",
        )
        .plain("FIR algorithm", "fir_algorithm", |r| {
            algorithm(r).algorithm(r.point.at.block)
        })
        .doc("the FIR stages' algorithm, - for copies")
        .spread(
            "M samples/s",
            "samples_per_s",
            "samples per second through all pipes",
            (1e-6, 0),
            Sample::rate,
        )
        .typical(
            "cores busy",
            "cores_busy",
            "process CPU time over wall time",
            (1.0, 2),
            Sample::busy,
        )
        .col(
            "M/s per busy core",
            "samples_per_s_per_busy_core",
            |r| format!("{:.0}", per_core(r) / 1e6),
            per_core,
        )
        .doc("samples_per_s over cores_busy")
        .shown("tasks vs FutureSDR", move |r| vs(r, Runtime::FutureSdr))
        .shown("tasks vs GNU Radio", move |r| vs(r, Runtime::GnuRadio))
        .shown("tasks vs GNU Radio FFT", move |r| {
            vs(r, Runtime::GnuRadioFft)
        })
        .kept("does", |r| algorithm(r).does(r.point.at.block))
        .doc("what the runtime's flowgraph does, in its own words")
        .kept("pipes", move |r| first(r, |s| s.pipes as u64))
        .doc("parallel pipes")
        .kept("samples_per_pipe", move |r| first(r, |s| s.per_pipe))
        .doc("samples per pipe into the head")
        .kept("seconds", |r| r.each(|s| s.seconds))
        .doc("wall seconds, per round")
        .kept("cpu_seconds", |r| r.each(|s| s.cpu_seconds))
        .doc("process CPU seconds, per round")
        .kept("sink_items", |r| {
            r.samples
                .last()
                .map_or(Vec::new(), |s| s.sink_items.clone())
        })
        .doc("items each sink took in the last round")
}

/// The runtime of a row.
fn algorithm(r: &Row) -> Runtime {
    Runtime::named(r.point.series).unwrap_or(Runtime::DmaflowTasks)
}

/// The rows of `rt` through `stages` of `block`.
fn find(rows: &[Row], rt: Runtime, block: Block, stages: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.point.series == rt.name() && r.point.at == At { block, stages })
}

/// dmaflow's runtime `me` against `peer`: the round-by-round ratio of rates.
fn ratio(rows: &[Row], me: Runtime, peer: Runtime, block: Block, stages: usize) -> Option<Ratio> {
    find(rows, me, block, stages)?.ratio_to(peer.name(), Sample::rate)
}

/// The targets (each on the ratio of the rounds, their spread beside it):
/// dmaflow's tasks at least as fast as FutureSDR, twice GNU Radio on copies,
/// and on FIR each peer against dmaflow's stage of its algorithm (like for
/// like); the answer; the peers not measured.
fn findings(cfg: &Config, rows: &[Row]) -> Findings {
    let aims = [
        (Block::Copy, Runtime::FutureSdr, "FutureSDR", 1.0),
        (Block::Rand, Runtime::FutureSdr, "FutureSDR", 1.0),
        (Block::Copy, Runtime::GnuRadio, "2x GNU Radio", 2.0),
        (Block::Fir, Runtime::FutureSdr, "", 1.0),
        (Block::Fir, Runtime::GnuRadio, "", 1.0),
        (Block::Fir, Runtime::GnuRadioFft, "", 1.0),
    ];
    let mut found = Findings::default();
    for &stages in &cfg.stages {
        for (block, peer, label, least) in aims {
            let me = [Runtime::DmaflowTasks, Runtime::DmaflowDirect]
                .into_iter()
                .find(|me| block != Block::Fir || me.algorithm(block) == peer.algorithm(block))
                .unwrap_or(Runtime::DmaflowTasks);
            let Some(r) = ratio(rows, me, peer, block, stages) else {
                continue;
            };
            let (what, met) = match block {
                Block::Fir => (
                    format!(
                        "fir64 x {stages}: {} ({}) ahead of {} (like for like)",
                        me.name(),
                        me.algorithm(block),
                        peer.name(),
                    ),
                    r.0.median > least,
                ),
                _ => (
                    format!("{} x {stages}: dmaflow tasks >= {label}", block.name()),
                    r.0.median >= least,
                ),
            };
            found
                .targets
                .push(Target::new(what, r.text_with_verdict(), met));
        }
    }
    found.clauses = [Block::Copy, Block::Rand, Block::Fir]
        .iter()
        .filter_map(|&b| {
            let (first, last) = (*cfg.stages.first()?, *cfg.stages.last()?);
            let m = |rt, stages| Some(find(rows, rt, b, stages)?.median(Sample::rate) / 1e6);
            Some(format!(
                "through {} stages dmaflow's task runtime moves {:.0} M samples/s at {first} \
                 stage(s) and {:.0} M at {last} ({:.0} M with a thread per node)",
                b.name(),
                m(Runtime::DmaflowTasks, first)?,
                m(Runtime::DmaflowTasks, last)?,
                m(Runtime::DmaflowThreads, last)?,
            ))
        })
        .collect();
    let why = [
        ("FutureSDR", cfg.futuresdr.as_ref().err()),
        ("GNU Radio", cfg.gnuradio.as_ref().err()),
    ];
    let skipped: Vec<String> = why
        .into_iter()
        .filter_map(|(peer, why)| Some(format!("{peer}: {}", why?)))
        .collect();
    found.notes = skipped
        .iter()
        .map(|s| format!("not measured: {s}\n"))
        .collect();
    found.kept = vec![("pipes", cfg.pipes.into()), ("skipped", skipped.into())];
    found
}

/// `dmaflow bench sched`.
pub static EXPERIMENT: Bench<Config, At, Sample> = Bench {
    name: "sched",
    emulator_only: "it measures process networks on this machine, not a DMA device",
    question: "The pipes x stages flowgraph of the SDR scheduler studies: dmaflow's graph \
               runtime (tasks and threads) against FutureSDR and GNU Radio.",
    conditions: Conditions {
        timed: "each runtime's run of its assembled flowgraph to the end (dmaflow \
                Graph::run with its threads or workers started inside, FutureSDR \
                Runtime::run, GNU Radio top_block.run), with the process's CPU time over \
                the same span",
        against: "FutureSDR 0.8.0 (its default runtime and blocks with 64 KiB buffers, \
                  and a CopyRand block drawing from the same generator as dmaflow's random \
                  copies; built in its own directory) and GNU Radio 3.10 from Python (copy \
                  and fir_filter_fff, fft_filter_fff as a second row; its default 64 KiB \
                  buffers), runtimes taking turns round by round, every sink's count \
                  checked",
        model: "none: every figure is the runtimes' own",
        paper: "FutureSDR's perf/null_rand and perf/fir shape (random copies of up to 128 \
                items per call as there, and plain copies; here on a VM's two cores, there \
                many)",
    },
    prepare,
    heading: |cfg| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        format!(
            "{} pipes x stages, null source -> head({} copy / {} random copy / {} FIR \
             samples) -> stages -> null sink, f32; {cores} cores; each runtime with its own \
             blocks, every block taking per call what is readable and free, and 64 KiB \
             buffers everywhere (dmaflow's default queues, FutureSDR with \
             FUTURESDR_BUFFER_SIZE=65536 as its perf flowgraphs set it, GNU Radio's default \
             2 x 32 KiB); M samples/s through all pipes; cores busy = process CPU time over \
             wall time; targets on the ratio of rates, round by round",
            cfg.pipes, cfg.samples[0], cfg.samples[1], cfg.samples[2]
        )
    },
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sink_takes_every_sample_on_both_runtimes() {
        let cfg = Config::at(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        // Copies, random copies and FIR on both runtimes, FIR in direct form too.
        assert_eq!(rows.len(), (3 * 2 + 1) * cfg.stages.len());
        for r in &rows {
            let rt = Runtime::named(r.point.series).unwrap();
            let At { block, stages } = r.point.at;
            let (least, most) = rt.expected(block, cfg.samples[block as usize], stages);
            assert_eq!(least, most, "{r:?}");
            let s = &r.samples[0];
            assert_eq!(s.sink_items, vec![least; cfg.pipes], "{r:?}");
            assert!(s.seconds > 0.0);
        }
        let tasks = find(&rows, Runtime::DmaflowTasks, Block::Copy, 1).unwrap();
        assert!(tasks.ratio_to("dmaflow-threads", Sample::rate).is_some());
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert!(rep.text.contains("not measured: FutureSDR"), "{}", rep.text);
        assert_eq!(rep.json["rows"].as_array().unwrap().len(), rows.len());
        assert_eq!(rep.json["pipes"], cfg.pipes);
        assert!(rep.json["rows"][0]["samples_per_s"]["n"] == 1);
    }
}
