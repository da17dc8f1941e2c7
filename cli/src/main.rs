//! The `dmaflow` command-line tool.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use dmaflow::dsp::bgsub::Params;
use dmaflow::platform::MemoryModel;
use dmaflow::sim::Profile;
use dmaflow_cli::bench::harness::{OnGpu, Tables};
use dmaflow_cli::bench::report::{Report, RunInfo};
use dmaflow_cli::bench::{self, Experiment, Setup, Tier};
use dmaflow_cli::files::bgsub::Device;
use dmaflow_cli::files::{Done, End, FileError, fir::FirDevice};
use dmaflow_cli::{choice, files, finish, status};
use dmaflow_net::{Edge, Endpoint, Pattern, Vanish};
use indicatif::{ProgressBar, ProgressStyle};

/// Move streams of data between programs and accelerators, and measure how fast.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the experiments and print their tables; write CSV, SVG plots and
    /// index.html to --out.
    ///
    /// JSON (--json): one document per experiment, {"experiment":NAME,"rows":[...]};
    /// the keys of each row:
    ///   Every *_spread is {median, p25, p75, min, max, n} over the rounds.
    ///   Every document also has heading, answer and targets ({what, found,
    ///   met}); `dmaflow targets DIR` prints them as a markdown table.
    ///
    /// The DMA experiments' common keys:
    ///   model_us     what the modelled device needs for the transfer: the link
    ///                at the board's clock plus PG021's MM2S start-up and S2MM
    ///                write latencies (0 with the unlimited clock)
    ///   overhead_us  measured minus model_us: what software added
    ///   cpu_us       host CPU time per transfer of the driver-side threads (the
    ///                caller and, for proxy, the driver thread; never the emulated
    ///                device's thread)
    ///   cpu_share    that CPU time over the wall time it was spent in
    #[command(verbatim_doc_comment)]
    Bench(BenchArgs),
    /// Approximate-median background subtraction of raw 8-bit frames (paper 000):
    /// one mask (0 or 255 per pixel) per frame.
    Bgsub(BgsubArgs),
    /// The receiving end of `bench net` (run by it in a child process).
    #[command(hide = true)]
    NetPeer {
        /// `dmaflow` or `raw`.
        #[arg(long)]
        point: String,
        /// Where the sender binds.
        #[arg(long)]
        endpoint: String,
    },
    /// The reading end of `bench ring`'s cross-process row (run by it in a
    /// child process).
    #[command(hide = true)]
    ShmReader {
        /// The shared queue's memory object.
        #[arg(long)]
        path: PathBuf,
    },
    /// Print the Targets table (markdown, as BENCHMARKS.md has it) of a
    /// `bench` run, from the JSON documents it wrote: each PATH a
    /// `bench --out` directory (its NAME.json files) or one NAME.json.
    Targets {
        /// Report directories or JSON documents.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Serve PYNQ.remote (PYNQ 4.0's gRPC protocol) over the emulated board
    /// or a real one: unmodified PYNQ with PYNQ_REMOTE_DEVICES set drives it.
    Serve(dmaflow_cli::serve::ServeArgs),
    /// Overlay files for PYNQ.
    #[command(subcommand)]
    Overlay(dmaflow_cli::serve::OverlayCommand),
    /// List what is present: UIO devices and u-dma-bufs, and the emulated fabric.
    Info {
        /// Root of the sysfs and /dev tree to look in.
        #[arg(long, default_value = "/")]
        root: PathBuf,
    },
    /// Filter a file of little-endian f32 samples with an FIR filter (overlap-save,
    /// zero-copy, run as a process network: file source -> FIR -> file sink).
    /// Output equals scipy.signal.lfilter(taps, 1.0, x).
    Fir(FirArgs),
}

// `dmaflow bgsub`'s arguments (the command's help is its variant's).
#[derive(clap::Args)]
struct BgsubArgs {
    /// Frame width in pixels.
    #[arg(long)]
    width: usize,
    /// Frame height in pixels.
    #[arg(long)]
    height: usize,
    #[command(flatten)]
    ends: Ends,
    /// Foreground where the filtered difference exceeds this.
    #[arg(long, default_value_t = 25)]
    threshold: u8,
    /// Threshold the raw difference (no Gaussian and maximum filter).
    #[arg(long)]
    no_filter: bool,
    /// `sim`: the coprocessor on the emulated fabric, fed by two DMA engines;
    /// `cpu`: the software implementation; `cuda[:N]`: the kernels on GPU N.
    /// All three write the same bytes.
    #[arg(long, default_value = "sim", value_parser = |s: &str| Device::parse(s, true))]
    device: Device,
}

// `dmaflow fir`'s arguments.
#[derive(clap::Args)]
struct FirArgs {
    /// File of little-endian f32 filter taps.
    #[arg(long)]
    taps: PathBuf,
    #[command(flatten)]
    ends: Ends,
    /// FFT length (a power of two, at least the number of taps; CPU only).
    #[arg(long = "fft")]
    fft: Option<usize>,
    /// Where the filter runs.
    #[arg(long, value_enum, default_value = "cpu")]
    device: FirDevice,
}

/// A command's failure: its exit status and what to say.
type Fail = (u8, String);

/// `dmaflow bench`'s arguments.
#[derive(clap::Args)]
struct BenchArgs {
    /// Which experiment.
    #[arg(default_value = "all", value_parser = experiments())]
    experiment: Which,
    /// Shorter runs with fewer repetitions.
    #[arg(long)]
    quick: bool,
    /// The smallest runs, for tests: every table, key and file, no figure
    /// worth reading.
    #[arg(long, hide = true, conflicts_with = "quick")]
    tiny: bool,
    /// Print JSON instead of tables (no progress output).
    #[arg(long)]
    json: bool,
    /// Directory for plots.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// The emulated board's memory for twoway, loopback, bgsub and cnn:
    /// `noncoherent` keeps the CPU's view and DRAM apart and runs with explicit
    /// cache maintenance (transfer always measures both).
    #[arg(long, default_value = "coherent", value_parser = choice(&[
        ("coherent", "CPU caches coherent with the device", MemoryModel::Coherent),
        ("noncoherent", "CPU view and DRAM apart; explicit cache maintenance", MemoryModel::NonCoherent),
    ]))]
    memory: MemoryModel,
    /// The board the fabric stands in for: its HP port's clock and width
    /// (PG021's latencies follow in cycles of it) for transfer, loopback and
    /// contention.
    #[arg(long, default_value = "zynq7000", value_parser = choice(&[
        ("zynq7000", "Zynq-7000: 64-bit HP port at 150 MHz (1200 MB/s)", Profile::ZYNQ7000),
        ("zynqmp", "Zynq UltraScale+ MPSoC: 128-bit HP port at 250 MHz (4000 MB/s)", Profile::ZYNQMP),
    ]))]
    profile: Profile,
    /// Measure a real board instead of the emulated fabric: transfer,
    /// twoway and loopback drive an AXI DMA whose MM2S stream feeds its
    /// own S2MM (the loopback design) through UIO and u-dma-buf
    /// (udmabuf0), found under ROOT (default `/`, the board itself);
    /// transfer needs the engine built with scatter-gather, twoway and
    /// loopback one in direct register mode, and each channel's interrupt
    /// line. A board lacking any of it is refused with `dmaflow info`'s
    /// advice (exit status 2), as is an experiment that needs the
    /// emulator (faults, the coprocessors, the queues' experiments).
    #[arg(long, value_name = "ROOT", num_args = 0..=1, default_missing_value = "/",
              conflicts_with = "device")]
    board: Option<PathBuf>,
    /// The DMA device: `sim` (the emulated fabric; `--board` for a real one)
    /// or `cuda[:N]` (GPU N: cnn runs on it as the coprocessor; transfer and
    /// loopback run the GPU experiment's transfer and message tables, twoway
    /// and bgsub its kernels; all runs gpu and cnn).
    #[arg(long, default_value = "sim", value_parser = |s: &str| Device::parse(s, false))]
    device: Device,
}

impl BenchArgs {
    /// The run's size and board (the GPU comes with each experiment).
    fn setup(&self) -> Setup {
        Setup {
            tier: match (self.tiny, self.quick) {
                (true, _) => Tier::Tiny,
                (false, true) => Tier::Quick,
                (false, false) => Tier::Full,
            },
            memory: self.memory,
            profile: self.profile,
            gpu: None,
        }
    }
}

/// A file tool's input and output, and how they behave as ZeroMQ endpoints
/// (files ignore that).
#[derive(clap::Args, Clone, Debug)]
struct Ends {
    /// The input: a file, or a ZeroMQ endpoint (tcp://HOST:PORT,
    /// ipc://PATH): a PULL source that connects, as gr-zeromq's pull_source.
    #[arg(long)]
    input: String,
    /// The file to write the output to (only on success), or a ZeroMQ
    /// endpoint: a PUSH sink that binds, as gr-zeromq's push_sink.
    #[arg(long)]
    output: String,
    /// The ZeroMQ input binds instead of connecting.
    #[arg(long)]
    bind_input: bool,
    /// The ZeroMQ output connects instead of binding.
    #[arg(long)]
    connect_output: bool,
    /// PUSH/PULL (lossless, ordered, blocks at the high-water mark) or
    /// PUB/SUB (drops when a subscriber is slow).
    #[arg(long, default_value = "push-pull",
          value_parser = choice(&[("push-pull", "", Pattern::PushPull), ("pub-sub", "", Pattern::PubSub)]))]
    pattern: Pattern,
    /// Messages carry gr-zeromq's tag header (its pass_tags).
    #[arg(long)]
    pass_tags: bool,
    /// End the input stream after this many seconds without a message (GNU
    /// Radio peers send no end of stream).
    #[arg(long)]
    idle_timeout: Option<f64>,
    /// What the input does when its peer goes away mid-stream and is not
    /// back within --grace: end the stream or fail.
    #[arg(long, default_value = "fail",
          value_parser = choice(&[("end", "", Vanish::End), ("fail", "", Vanish::Fail)]))]
    on_vanish: Vanish,
    /// Seconds a vanished peer has to reconnect, and the output's wait for
    /// its last messages to leave.
    #[arg(long, default_value_t = 5.0)]
    grace: f64,
    /// The output sends no end-of-stream message at the end.
    #[arg(long)]
    no_eos: bool,
    /// Messages queued per peer before a PUSH output blocks or a PUB output
    /// drops (default 16 for push-pull, ZeroMQ's 1000 for pub-sub).
    #[arg(long)]
    hwm: Option<i32>,
}

/// Seconds from the command line as a duration, named when they are not one.
fn seconds(what: &str, s: f64) -> Result<std::time::Duration, String> {
    // NaN and the infinities fail the comparisons.
    let ok = s > 0.0 && s <= 86_400.0;
    let not = || format!("{what} must be between 0 and 86400 seconds, not {s}");
    ok.then(|| std::time::Duration::from_secs_f64(s))
        .ok_or_else(not)
}

impl Ends {
    /// The edge for an endpoint given as `--input` (`output` false) or
    /// `--output`.
    fn edge(&self, text: &str, output: bool) -> Result<Edge, String> {
        let at = Endpoint::parse(text).map_err(|e| e.to_string())?;
        let (mut e, bind) = match output {
            true => (Edge::sink(at), !self.connect_output),
            false => (Edge::source(at), self.bind_input),
        };
        e.bind = bind;
        e.pattern = self.pattern;
        e.pass_tags = self.pass_tags;
        e.high_water_mark = match (self.hwm, self.pattern) {
            (Some(h), _) if h > 0 => h,
            (Some(h), _) => return Err(format!("--hwm must be at least 1, not {h}")),
            (None, Pattern::PushPull) => 16,
            (None, Pattern::PubSub) => 1000,
        };
        e.idle_timeout = self
            .idle_timeout
            .map(|s| seconds("--idle-timeout", s))
            .transpose()?;
        e.vanish = self.on_vanish;
        e.grace = seconds("--grace", self.grace)?;
        e.send_eos = !self.no_eos;
        Ok(e)
    }

    /// `--input` and `--output`, each a file or a ZeroMQ edge; when both
    /// are edges passing tags, one relay carries the tags received through
    /// the tool (its nodes keep the item count: output sample or pixel `i`
    /// comes from input `i`).
    fn open(&self) -> Result<(End, End), String> {
        let end = |text: &String, output| match Endpoint::looks_like(text) {
            true => self.edge(text, output).map(End::Net),
            false => Ok(End::File(text.into())),
        };
        let (mut source, mut sink) = (end(&self.input, false)?, end(&self.output, true)?);
        if let (End::Net(i), End::Net(o)) = (&mut source, &mut sink)
            && self.pass_tags
        {
            let relay = dmaflow_net::Relay::new();
            i.relay = Some(relay.clone());
            o.relay = Some(relay);
        }
        Ok((source, sink))
    }
}

/// An experiment named on the command line (from the registry), or `all`
/// (`None`).
type Which = Option<&'static dyn Experiment>;

/// `bench`'s experiments as the command line names them: `all`, then each
/// of the registry with its question.
fn experiments() -> impl TypedValueParser<Value = Which> {
    let all = PossibleValue::new("all").help("Every experiment below.");
    let each = bench::EXPERIMENTS
        .iter()
        .map(|e| PossibleValue::new(e.name()).help(e.question()));
    PossibleValuesParser::new(std::iter::once(all).chain(each)).map(|s| bench::find(&s))
}

/// What `bench EXPERIMENT` runs on the emulated fabric. With `--device
/// cuda:N`: the experiments that run on the GPU themselves, or the GPU
/// experiment with the tables that answer that experiment's question; refused
/// before anything runs, an experiment with no GPU form and a GPU that this
/// machine's driver does not have (a machine with no driver or no device
/// passes: the GPU experiment then says it skipped).
fn plan(which: Which, device: Device) -> Result<Vec<(&'static dyn Experiment, Tables)>, String> {
    let all = bench::EXPERIMENTS.iter().copied();
    let Device::Cuda(n) = device else {
        return Ok(match which {
            None => all.map(|e| (e, Tables::ALL)).collect(),
            Some(e) => std::iter::once(e)
                .chain(e.then().and_then(bench::find))
                .map(|e| (e, Tables::ALL))
                .collect(),
        });
    };
    let mut itself = all.filter(|e| e.on_gpu() == Some(OnGpu::Itself));
    let list = match which {
        None => itself.map(|e| (e, Tables::ALL)).collect(),
        Some(e) => match (e.on_gpu(), itself.find(|e| e.name() == "gpu")) {
            (Some(OnGpu::Itself), _) => vec![(e, Tables::ALL)],
            (Some(OnGpu::Gpu(tables)), Some(gpu)) => vec![(gpu, tables)],
            _ => {
                let forms: Vec<&str> = bench::EXPERIMENTS
                    .iter()
                    .filter(|e| e.on_gpu().is_some())
                    .map(|e| e.name())
                    .collect();
                return Err(format!(
                    "`bench {}` has no GPU form (--device cuda runs {} or all)",
                    e.name(),
                    forms.join(", ")
                ));
            }
        },
    };
    let count = dmaflow::gpu::driver::count();
    if count > 0 && n >= count {
        return Err(format!(
            "--device cuda:{n}: this machine has {count} CUDA device(s)"
        ));
    }
    Ok(list)
}

/// Runs each experiment of `list` by `run` (which gives its report and
/// where it ran), printing its table (or its JSON document) as it finishes,
/// writing its files and the index page over every report so far; at the
/// end, the index's path.
fn run_each<T>(
    args: &BenchArgs,
    list: Vec<(&'static dyn Experiment, T)>,
    bar: ProgressBar,
    mut run: impl FnMut(&'static dyn Experiment, T, &ProgressBar) -> Result<(Report, RunInfo), Fail>,
) -> Result<(), Fail> {
    let mut reports = Vec::new();
    let mut index = args.out.join("index.html");
    for (e, how) in list {
        bar.set_message(e.name());
        let (report, info) = run(e, how, &bar)?;
        bar.inc(1);
        if args.json {
            println!("{}", report.document());
        } else {
            bar.suspend(|| {
                println!("{}", report.heading);
                print!("{}", e.conditions().lines());
                println!("{}", report.text);
            });
        }
        report.write(&args.out).map_err(status(1))?;
        reports.push((report, e.conditions()));
        index = bench::report::write_index(&args.out, &info, &reports).map_err(status(1))?;
    }
    bar.finish_and_clear();
    if !args.json {
        println!("report: {}", index.display());
    }
    Ok(())
}

/// `bench EXPERIMENT` on the emulated fabric, or with `--device cuda:N` its
/// GPU form; with `--board ROOT` the experiments with a board form (`all`:
/// every one of them) on a real board's AXI DMA in loopback, with the same
/// measurement code, report and keys as on the emulated fabric. The board is
/// checked for every experiment before any runs: what is missing is refused
/// (status 2) with `dmaflow info`'s advice, as is an experiment that needs the
/// emulator; a failure while measuring is status 1.
fn run_bench(args: &BenchArgs) -> Result<(), Fail> {
    use bench::on_board::open;
    let Some(root) = &args.board else {
        let list = plan(args.experiment, args.device).map_err(|e| (2, e))?;
        prepare_out(&args.out)?;
        return run_emulated(args, list);
    };
    prepare_out(&args.out)?;
    let list: Vec<_> = match args.experiment {
        None => bench::EXPERIMENTS
            .iter()
            .filter_map(|&e| e.board_mode().ok().map(|m| (e, m)))
            .collect(),
        Some(e) => match e.board_mode() {
            Ok(m) => vec![(e, m)],
            Err(why) => return Err((2, bench::Error::EmulatorOnly(e.name(), why).to_string())),
        },
    };
    for &(_, mode) in &list {
        // Opened and closed again: one pool over the u-dma-buf at a time.
        drop(open(root, mode).map_err(status(2))?);
    }
    run_each(args, list, ProgressBar::hidden(), |e, mode, _| {
        let rig = open(root, mode).map_err(status(2))?;
        let info = RunInfo {
            board: rig.describe(),
            ..RunInfo::here()
        };
        let progress = &mut |m: &str| {
            if !args.json {
                eprintln!("{m}");
            }
        };
        let report = e.run_on_board(&args.setup(), rig, progress);
        Ok((report.map_err(status(1))?, info))
    })
}

/// `bench` on the emulated fabric (or its GPU form): the experiments of
/// [`plan`], with a progress bar.
fn run_emulated(
    args: &BenchArgs,
    list: Vec<(&'static dyn Experiment, Tables)>,
) -> Result<(), Fail> {
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(list.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("[{elapsed_precise}] {bar:20} {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(250));
        bar
    };
    if !args.json && args.setup().tier == Tier::Full {
        bar.println(
            "full runs take several minutes per experiment (--quick: all of them in under 5 minutes)",
        );
    }
    let info = RunInfo {
        board: format!(
            "{} [profile {}], emulated (AXI DMA per PG021 with its latencies, {} memory; paper \
             000's coprocessor streams at 100 MHz x 1 B); {}",
            args.profile.description,
            args.profile.name,
            match args.memory {
                MemoryModel::Coherent => "cache-coherent",
                MemoryModel::NonCoherent => "non-coherent",
            },
            bench::placement_here()
        ),
        ..RunInfo::here()
    };
    run_each(args, list, bar, |e, tables, bar| {
        let gpu = match args.device {
            Device::Cuda(n) => Some((n, tables)),
            _ => None,
        };
        let setup = Setup {
            gpu,
            ..args.setup()
        };
        let report = e.run(&setup, &mut |m: &str| bar.set_message(m.to_string()));
        Ok((report.map_err(status(1))?, info.clone()))
    })
}

/// Runs a file tool on its ends; prints, `dmaflow TOOL: ` before each line,
/// what the CPU copied on the way through the coprocessor (after how many
/// went through, `what`) and what crossed each network end. A bad command line or
/// input is status 2, a failure while running 1.
fn run_tool(
    tool: &str,
    ends: &Ends,
    what: &str,
    run: impl FnOnce((End, End)) -> Result<Done, FileError>,
) -> ExitCode {
    let done = ends.open().map_err(|e| (2, e)).and_then(|ends| {
        run(ends).map_err(|e| (if e.is_bad_input() { 2 } else { 1 }, e.to_string()))
    });
    finish(tool, done, |done| {
        if let Some(s) = done.copies {
            let (copied, delivered) = (s.bytes_copied, s.bytes_out);
            let per = (delivered > 0).then(|| copied as f64 / delivered as f64);
            let per = per.unwrap_or(0.0);
            println!(
                "dmaflow {tool}: {} {what}; the CPU copied {copied} bytes on the way ({per:.2} per \
                 byte delivered, {delivered} delivered)",
                done.items
            );
        }
        for line in done.net {
            println!("dmaflow {tool}: {line}");
        }
    })
}

fn run_info(root: &Path) -> ExitCode {
    let inv = dmaflow::platform::uio::inventory(root);
    let none = |what: &str, dir: &str| println!("{what}: none under {}", root.join(dir).display());
    if inv.uio.is_empty() {
        none("UIO devices", "sys/class/uio");
    }
    for d in &inv.uio {
        let what = match d.size {
            0 => "an interrupt line".to_string(),
            size => format!("registers {size:#x} bytes at physical {:#x}", d.addr),
        };
        println!("UIO device: /dev/uio{} ({}), {what}", d.index, d.name);
    }
    if inv.udmabuf.is_empty() {
        none("u-dma-buf", "sys/class/u-dma-buf");
    }
    for (name, phys, size) in &inv.udmabuf {
        println!("u-dma-buf: /dev/{name}, {size} bytes at physical {phys:#x}");
    }
    for problem in &inv.malformed {
        eprintln!("dmaflow info: left out: {problem}");
    }
    let findings = dmaflow_cli::board_check::check(&inv, root);
    for f in &findings {
        println!("  {}: {}", f.mark, f.text);
    }
    println!("{}", dmaflow_cli::board_check::verdict(&findings));
    use dmaflow::platform::sim::{DEFAULT_DDR_BASE as BASE, DEFAULT_DDR_BYTES as BYTES, SimBoard};
    match SimBoard::new(1, BYTES, BASE, 2) {
        Ok(_) => println!(
            "sim: emulated AXI DMA (PG021 register map, loopback stream), {} MiB DDR at {BASE:#x}, 2 interrupt lines",
            BYTES >> 20
        ),
        Err(e) => println!("sim: unavailable: {e}"),
    }
    match dmaflow::gpu::devices() {
        Ok(list) if list.is_empty() => println!("CUDA: a driver, no device"),
        Ok(list) => list.iter().for_each(|d| println!("CUDA: {d}")),
        Err(e) => println!("CUDA: none ({e})"),
    }
    ExitCode::from(if inv.malformed.is_empty() { 0 } else { 2 })
}

/// Makes sure the report directory can be written before any experiment runs:
/// creates it and writes (and removes) a probe file in it.
fn prepare_out(out: &Path) -> Result<(), Fail> {
    let fail = |e: std::io::Error| (2, format!("{}: {e}", out.display()));
    std::fs::create_dir_all(out).map_err(fail)?;
    let probe = out.join(format!(".dmaflow-probe.{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The command line, with each experiment's JSON keys (from the registry)
/// in `bench --help`.
fn command_line() -> Cli {
    const AT: &str = "the keys of each row:\n";
    let cmd = Cli::command().mut_subcommand("bench", |bench| {
        let about = bench
            .get_long_about()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let keys = format!("{AT}{}", bench::keys_help());
        bench.long_about(about.replacen(AT, &keys, 1))
    });
    Cli::from_arg_matches(&cmd.get_matches()).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    match command_line().command {
        Command::Info { root } => run_info(&root),
        Command::Serve(args) => dmaflow_cli::serve::run(args),
        Command::Overlay(cmd) => dmaflow_cli::serve::overlay(cmd),
        Command::Bench(args) => finish("bench", run_bench(&args), |()| {}),
        Command::Bgsub(a) => {
            let what = "frames through the coprocessor node";
            run_tool("bgsub", &a.ends, what, |ends| {
                let p = Params::new(a.width, a.height, a.threshold, !a.no_filter)?;
                let mut done = files::bgsub::bgsub(p, ends, a.device)?;
                done.net.clear(); // bgsub says nothing of its network ends
                Ok(done)
            })
        }
        Command::Targets { paths } => finish(
            "targets",
            bench::report::read_documents(&paths, &bench::names()).map_err(status(2)),
            |docs| print!("{}", bench::report::targets_markdown(&docs)),
        ),
        Command::ShmReader { path } => finish(
            "shm-reader",
            bench::ring::shm_reader(&path).map_err(status(1)),
            |line| println!("{line}"),
        ),
        Command::NetPeer { point, endpoint } => finish(
            "net-peer",
            bench::net::receive(&point, &endpoint).map_err(status(1)),
            |r| println!("{}", bench::net::received_line(&r)),
        ),
        Command::Fir(a) if a.device == FirDevice::Sim && a.fft.is_some() => {
            eprintln!(
                "dmaflow fir: --fft sets the CPU filter's FFT length; the coprocessor has none"
            );
            ExitCode::from(2)
        }
        Command::Fir(a) => {
            let what = "samples through the FIR coprocessor node";
            let filter = |ends| files::fir::filter(&a.taps, ends, a.device, a.fft);
            run_tool("fir", &a.ends, what, filter)
        }
    }
}
