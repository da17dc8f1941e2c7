//! "Pipes x stages" scheduler benchmark on FutureSDR 0.8.0.
//!
//! Usage: futuresdr-sched PIPES STAGES SAMPLES BLOCK [TAPS]
//!
//! Builds PIPES independent pipes, each
//!
//!   NullSource<f32> -> Head<f32>(SAMPLES) -> STAGES x BLOCK -> NullSink<f32>
//!
//! where BLOCK is `copy` (FutureSDR's `Copy<f32>`), `rand` (`CopyRand`
//! below: the shape of FutureSDR's `perf/null_rand`, each call copying what
//! is readable and free but at most a random 1..=128 items, drawn by the
//! xorshift generator `dmaflow bench sched` uses for its own stages, with
//! the same seeds) or `fir` (FutureSDR's
//! time-domain FIR block `Fir<f32, f32, f32, FirFilter<..>>`, as built by
//! `FirBuilder::fir::<f32, f32, _>(taps)`, 64 taps). This follows the shape of
//! FutureSDR's own `perf/null_rand` and `perf/fir` benchmarks, with plain
//! blocks in place of their `CopyRand` helper, and uses the default runtime
//! (`Runtime::new()`, i.e. the `SmolScheduler` with one worker per core).
//!
//! Only `rt.run(fg)` is timed (wall clock and process CPU time). Afterwards
//! every sink's item count is checked and one line of JSON goes to stdout.

use std::process::ExitCode;
use std::time::Instant;

use futuresdr::blocks::Copy;
use futuresdr::blocks::FirBuilder;
use futuresdr::blocks::Head;
use futuresdr::blocks::NullSink;
use futuresdr::blocks::NullSource;
use futuresdr::runtime::dev::prelude::*;

const N_TAPS: usize = 64;
const USAGE: &str = "usage: futuresdr-sched PIPES STAGES SAMPLES BLOCK [TAPS]\n  \
    PIPES, STAGES, SAMPLES: positive integers\n  \
    BLOCK: copy | rand | fir\n  \
    TAPS: optional file of exactly 64 little-endian f32 FIR taps (fir only; default 64 x 1/64)";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Copy,
    Rand,
    Fir,
}

/// Most items a `CopyRand` call moves.
const RAND_MAX_COPY: u64 = 128;

/// The seed of stage `stage` of pipe `pipe` (as in `dmaflow bench sched`).
fn rand_seed(pipe: usize, stage: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15 ^ ((pipe as u64) << 32 | (stage as u64 + 1))
}

/// xorshift64 (13, 7, 17): the next draw.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Copies what is readable and free, at most a random 1..=128 items per call.
#[derive(Block)]
struct CopyRand<
    I: CpuBufferReader<Item = f32> = DefaultCpuReader<f32>,
    O: CpuBufferWriter<Item = f32> = DefaultCpuWriter<f32>,
> {
    #[input]
    input: I,
    #[output]
    output: O,
    state: u64,
}

impl CopyRand {
    fn new(seed: u64) -> Self {
        Self {
            input: Default::default(),
            output: Default::default(),
            state: seed,
        }
    }
}

impl<I, O> Kernel for CopyRand<I, O>
where
    I: CpuBufferReader<Item = f32>,
    O: CpuBufferWriter<Item = f32>,
{
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &BlockMeta,
    ) -> Result<()> {
        let i = self.input.slice();
        let o = self.output.slice();
        let i_len = i.len();
        let o_len = o.len();
        let cap = 1 + (xorshift(&mut self.state) % RAND_MAX_COPY) as usize;
        let m = i_len.min(o_len).min(cap);
        if m > 0 {
            o[..m].copy_from_slice(&i[..m]);
            self.input.consume(m);
            self.output.produce(m);
        }
        if self.input.finished() && m == i_len {
            io.finished = true;
        } else if m > 0 && m < i_len && m < o_len {
            // More is readable and free: called again, as a block that
            // took all it could would be by the buffers' next events.
            io.call_again = true;
        }
        Ok(())
    }
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Copy => "copy",
            Kind::Rand => "rand",
            Kind::Fir => "fir",
        }
    }

    fn block_name(self) -> &'static str {
        match self {
            Kind::Copy => "futuresdr::blocks::Copy<f32>",
            Kind::Rand => "CopyRand<f32> (1..=128 items per call)",
            Kind::Fir => {
                "futuresdr::blocks::Fir<f32, f32, f32, futuredsp::FirFilter<f32, f32, [f32; 64]>> (FirBuilder::fir)"
            }
        }
    }
}

struct Args {
    pipes: usize,
    stages: usize,
    samples: u64,
    kind: Kind,
    taps: [f32; N_TAPS],
}

fn parse_count(name: &str, s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err(format!("{name} must be at least 1, got 0")),
        Ok(v) => Ok(v),
        Err(_) => Err(format!("{name} must be a positive integer, got {s:?}")),
    }
}

fn read_taps(path: &str) -> Result<[f32; N_TAPS], String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read TAPS file {path:?}: {e}"))?;
    if bytes.len() != N_TAPS * 4 {
        return Err(format!(
            "TAPS file {path:?} has {} bytes; expected exactly {N_TAPS} little-endian f32 ({} bytes)",
            bytes.len(),
            N_TAPS * 4
        ));
    }
    let mut taps = [0f32; N_TAPS];
    for (t, c) in taps.iter_mut().zip(bytes.chunks_exact(4)) {
        *t = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Ok(taps)
}

fn parse_args() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.len() < 4 || argv.len() > 5 {
        return Err(format!("expected 4 or 5 arguments, got {}", argv.len()));
    }
    let pipes = parse_count("PIPES", &argv[0])?;
    let stages = parse_count("STAGES", &argv[1])?;
    let samples = parse_count("SAMPLES", &argv[2])?;
    let kind = match argv[3].as_str() {
        "copy" => Kind::Copy,
        "rand" => Kind::Rand,
        "fir" => Kind::Fir,
        other => return Err(format!("BLOCK must be `copy`, `rand` or `fir`, got {other:?}")),
    };
    let taps = match argv.get(4) {
        Some(_) if kind != Kind::Fir => {
            return Err("TAPS is only accepted with BLOCK=fir".to_string());
        }
        Some(path) => read_taps(path)?,
        None => [1.0 / N_TAPS as f32; N_TAPS],
    };
    let pipes = usize::try_from(pipes).map_err(|_| "PIPES too large".to_string())?;
    let stages = usize::try_from(stages).map_err(|_| "STAGES too large".to_string())?;
    usize::try_from(samples).map_err(|_| "SAMPLES too large".to_string())?;
    Ok(Args {
        pipes,
        stages,
        samples,
        kind,
        taps,
    })
}

/// Process CPU time (user + system) in seconds, all threads.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the zero-initialised struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return f64::NAN;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Build the flowgraph; returns it together with one sink handle per pipe.
fn build(args: &Args) -> Result<(Flowgraph, Vec<BlockRef<NullSink<f32>>>), Error> {
    let mut fg = Flowgraph::new();
    let mut sinks = Vec::with_capacity(args.pipes);
    for pipe in 0..args.pipes {
        let src = fg.add(NullSource::<f32>::new())?;
        let head = fg.add(Head::<f32>::new(args.samples))?;
        fg.stream_dyn(&src, "output", &head, "input")?;
        let mut last: BlockId = head.into();
        for s in 0..args.stages {
            let stage: BlockId = match args.kind {
                Kind::Copy => fg.add(Copy::<f32>::new())?.into(),
                Kind::Rand => fg.add(CopyRand::new(rand_seed(pipe, s)))?.into(),
                // FutureSDR's standard time-domain FIR block: blocks::Fir with a
                // futuredsp::FirFilter core, built via FirBuilder::fir.
                Kind::Fir => fg.add(FirBuilder::fir::<f32, f32, _>(args.taps))?.into(),
            };
            fg.stream_dyn(last, "output", stage, "input")?;
            last = stage;
        }
        let snk = fg.add(NullSink::<f32>::new())?;
        fg.stream_dyn(last, "output", &snk, "input")?;
        sinks.push(snk);
    }
    Ok((fg, sinks))
}

/// Install the same log subscriber FutureSDR's `Runtime::new()` would (same
/// level from FutureSDR's config, `FUTURESDR_LOG` override, compact format),
/// but writing to stderr instead of stdout. FutureSDR's own init then finds a
/// subscriber already set and leaves it alone.
fn init_logging() {
    use tracing_subscriber::filter::EnvFilter;
    use tracing_subscriber::fmt;
    use tracing_subscriber::prelude::*;

    let level = futuresdr::runtime::config::config().log_level;
    let filter = EnvFilter::builder()
        .with_default_directive(level.into())
        .with_env_var("FUTURESDR_LOG")
        .from_env_lossy();
    let format = fmt::layer()
        .with_writer(std::io::stderr)
        .with_level(true)
        .with_target(true)
        .with_thread_ids(false)
        .with_thread_names(true)
        .compact();
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(format)
        .try_init();
}

fn run(args: &Args) -> Result<ExitCode, Error> {
    init_logging();
    let (fg, sinks) = build(args)?;
    let rt = Runtime::new();

    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let fg = rt.run(fg)?;
    let seconds = t0.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds() - cpu0;

    let mut counts = Vec::with_capacity(sinks.len());
    for s in &sinks {
        counts.push(fg.block(s)?.n_received() as u64);
    }

    // Copy passes every item through. FutureSDR's FIR (futuredsp::FirFilter)
    // produces only fully-overlapping outputs, n_in - (taps - 1) per stage, so
    // a pipe of S FIR stages delivers SAMPLES - S * 63 items; FutureSDR's own
    // perf/fir benchmark asserts exactly this.
    let expected = match args.kind {
        Kind::Copy | Kind::Rand => args.samples,
        Kind::Fir => args
            .samples
            .saturating_sub(args.stages as u64 * (N_TAPS as u64 - 1)),
    };
    let mut ok = true;
    for (p, &n) in counts.iter().enumerate() {
        if n != expected {
            eprintln!(
                "futuresdr-sched: pipe {p}: sink received {n} items, expected {expected} \
                 (SAMPLES={}, STAGES={}, BLOCK={})",
                args.samples,
                args.stages,
                args.kind.name()
            );
            ok = false;
        }
    }
    if !ok {
        return Ok(ExitCode::from(1));
    }

    let items = counts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "{{\"runtime\":\"futuresdr 0.8.0\",\"block\":\"{}\",\"pipes\":{},\"stages\":{},\"samples\":{},\
         \"seconds\":{},\"cpu_seconds\":{},\"sink_items\":[{}],\"expected_sink_items\":{},\"block_name\":\"{}\"}}",
        args.kind.name(),
        args.pipes,
        args.stages,
        args.samples,
        json_f64(seconds),
        json_f64(cpu_seconds),
        items,
        expected,
        args.kind.block_name()
    );
    Ok(ExitCode::SUCCESS)
}

fn json_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.6}")
    } else {
        "null".to_string()
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("futuresdr-sched: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("futuresdr-sched: flowgraph error: {e}");
            ExitCode::from(1)
        }
    }
}
