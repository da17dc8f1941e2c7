//! The `dmaflow` command-line tool.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::sync::OnceLock;

use clap::builder::PossibleValue;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use dmaflow::dsp::fir::Mode;
use dmaflow::platform::MemoryModel;
use dmaflow::sim::Profile;
use dmaflow_cli::bench;
use dmaflow_cli::bench::harness::{OnGpu, Tables};
use dmaflow_cli::bench::report::{Report, RunInfo};
use dmaflow_cli::bench::{Experiment, Setup, Tier};
use dmaflow_cli::{files, finish, status};
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
    #[arg(long, default_value = "sim", value_parser = parse_bgsub_device)]
    device: files::bgsub::Device,
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
    device: FirDeviceArg,
}

/// A command's failure: its exit status and what to say.
type Fail = (u8, String);

/// `dmaflow bench`'s arguments.
#[derive(clap::Args)]
struct BenchArgs {
    /// Which experiment.
    #[arg(value_enum, default_value = "all")]
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
    #[arg(long, value_enum, default_value_t = Memory::Coherent)]
    memory: Memory,
    /// The board the fabric stands in for: its HP port's clock and width
    /// (PG021's latencies follow in cycles of it) for transfer, loopback and
    /// contention.
    #[arg(long, value_enum, default_value_t = Board::Zynq7000)]
    profile: Board,
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
    #[arg(long, default_value = "sim", value_parser = parse_device)]
    device: BenchDevice,
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
            memory: match self.memory {
                Memory::Coherent => MemoryModel::Coherent,
                Memory::Noncoherent => MemoryModel::NonCoherent,
            },
            profile: match self.profile {
                Board::Zynq7000 => Profile::ZYNQ7000,
                Board::Zynqmp => Profile::ZYNQMP,
            },
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
    #[arg(long, value_enum, default_value = "push-pull")]
    pattern: PatternArg,
    /// Messages carry gr-zeromq's tag header (its pass_tags).
    #[arg(long)]
    pass_tags: bool,
    /// End the input stream after this many seconds without a message (GNU
    /// Radio peers send no end of stream).
    #[arg(long)]
    idle_timeout: Option<f64>,
    /// What the input does when its peer goes away mid-stream and is not
    /// back within --grace: end the stream or fail.
    #[arg(long, value_enum, default_value = "fail")]
    on_vanish: VanishArg,
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

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum PatternArg {
    PushPull,
    PubSub,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
enum VanishArg {
    End,
    Fail,
}

/// Seconds from the command line as a duration, named when they are not one.
fn seconds(what: &str, s: f64) -> Result<std::time::Duration, String> {
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(std::time::Duration::from_secs_f64(s))
    } else {
        Err(format!(
            "{what} must be between 0 and 86400 seconds, not {s}"
        ))
    }
}

impl Ends {
    /// The edge for an endpoint given as `--input` (`output` false) or
    /// `--output`.
    fn edge(&self, text: &str, output: bool) -> Result<dmaflow_net::Edge, String> {
        let at = dmaflow_net::Endpoint::parse(text).map_err(|e| e.to_string())?;
        let (mut e, bind) = if output {
            (dmaflow_net::Edge::sink(at), !self.connect_output)
        } else {
            (dmaflow_net::Edge::source(at), self.bind_input)
        };
        e.bind = bind;
        e.pattern = match self.pattern {
            PatternArg::PushPull => dmaflow_net::Pattern::PushPull,
            PatternArg::PubSub => dmaflow_net::Pattern::PubSub,
        };
        e.pass_tags = self.pass_tags;
        e.high_water_mark = match (self.hwm, self.pattern) {
            (Some(h), _) if h > 0 => h,
            (Some(h), _) => return Err(format!("--hwm must be at least 1, not {h}")),
            (None, PatternArg::PushPull) => 16,
            (None, PatternArg::PubSub) => 1000,
        };
        e.idle_timeout = self
            .idle_timeout
            .map(|s| seconds("--idle-timeout", s))
            .transpose()?;
        e.vanish = match self.on_vanish {
            VanishArg::End => dmaflow_net::Vanish::End,
            VanishArg::Fail => dmaflow_net::Vanish::Fail,
        };
        e.grace = seconds("--grace", self.grace)?;
        e.send_eos = !self.no_eos;
        Ok(e)
    }

    /// `--input` and `--output`, each a file or a ZeroMQ edge; when both
    /// are edges passing tags, one relay carries the tags received through
    /// the tool (its nodes keep the item count: output sample or pixel `i`
    /// comes from input `i`).
    fn open(&self) -> Result<(files::Source, files::Sink), String> {
        let net = |text: &str| dmaflow_net::Endpoint::looks_like(text);
        let mut source = match net(&self.input) {
            true => files::Source::Net(self.edge(&self.input, false)?),
            false => files::Source::File(PathBuf::from(&self.input)),
        };
        let mut sink = match net(&self.output) {
            true => files::Sink::Net(self.edge(&self.output, true)?),
            false => files::Sink::File(PathBuf::from(&self.output)),
        };
        if let (files::Source::Net(i), files::Sink::Net(o)) = (&mut source, &mut sink)
            && self.pass_tags
        {
            let relay = dmaflow_net::Relay::new();
            i.relay = Some(relay.clone());
            o.relay = Some(relay);
        }
        Ok((source, sink))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FirDeviceArg {
    /// The FIR coprocessor on the emulated fabric, an accelerator node whose
    /// DMA engine reads and writes the graph's queues in place (f32
    /// accumulation in time order; within 1e-5 relative of the CPU filter).
    Sim,
    /// Overlap-save in software.
    Cpu,
}

fn parse_bgsub_device(s: &str) -> Result<files::bgsub::Device, String> {
    use files::bgsub::Device;
    match (s, parse_device(s)) {
        ("cpu", _) => Ok(Device::Cpu),
        (_, Ok(BenchDevice::Sim)) => Ok(Device::Sim),
        (_, Ok(BenchDevice::Cuda(n))) => Ok(Device::Cuda(n)),
        (_, Err(_)) => Err(format!("{s:?} is not a device: sim, cpu, cuda or cuda:N")),
    }
}

/// An experiment named on the command line (from the registry), or `all`.
#[derive(Clone, Copy)]
struct Which(Option<&'static dyn Experiment>);

impl ValueEnum for Which {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: OnceLock<Vec<Which>> = OnceLock::new();
        ALL.get_or_init(|| {
            std::iter::once(Which(None))
                .chain(bench::EXPERIMENTS.iter().map(|&e| Which(Some(e))))
                .collect()
        })
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self.0 {
            None => PossibleValue::new("all").help("Every experiment below."),
            Some(e) => PossibleValue::new(e.name()).help(e.question()),
        })
    }
}

/// The emulated board's memory, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Memory {
    /// CPU caches coherent with the device.
    Coherent,
    /// CPU view and DRAM apart; explicit cache maintenance.
    Noncoherent,
}

/// Which DMA device the experiments drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BenchDevice {
    /// The emulated fabric.
    Sim,
    /// CUDA device N.
    Cuda(usize),
}

fn parse_device(s: &str) -> Result<BenchDevice, String> {
    match s {
        "sim" => Ok(BenchDevice::Sim),
        "cuda" => Ok(BenchDevice::Cuda(0)),
        _ => s
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(BenchDevice::Cuda)
            .ok_or_else(|| format!("{s:?} is not a device: sim, cuda or cuda:N")),
    }
}

/// The board profile, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Board {
    /// Zynq-7000: 64-bit HP port at 150 MHz (1200 MB/s).
    Zynq7000,
    /// Zynq UltraScale+ MPSoC: 128-bit HP port at 250 MHz (4000 MB/s).
    Zynqmp,
}

/// What `bench EXPERIMENT --device cuda:N` runs: the experiments that run on
/// the GPU themselves, or the GPU experiment with the tables that answer that
/// experiment's question; an error for experiments with no GPU form.
fn gpu_plan(which: Which) -> Result<Vec<(&'static dyn Experiment, Tables)>, String> {
    let mut itself = bench::EXPERIMENTS
        .iter()
        .copied()
        .filter(|e| e.on_gpu() == Some(OnGpu::Itself));
    let Some(e) = which.0 else {
        return Ok(itself.map(|e| (e, Tables::ALL)).collect());
    };
    match (e.on_gpu(), itself.find(|e| e.name() == "gpu")) {
        (Some(OnGpu::Itself), _) => Ok(vec![(e, Tables::ALL)]),
        (Some(OnGpu::Gpu(tables)), Some(gpu)) => Ok(vec![(gpu, tables)]),
        _ => Err(format!(
            "`bench {}` has no GPU form (--device cuda runs {} or all)",
            e.name(),
            bench::EXPERIMENTS
                .iter()
                .filter(|e| e.on_gpu().is_some())
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
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

/// `bench EXPERIMENT --board ROOT`: the experiments with a board form (`all`:
/// every one of them) on a real board's AXI DMA in loopback, with the same
/// measurement code, report and keys as on the emulated fabric. The board is
/// checked for every experiment before any runs: what is missing is refused
/// (status 2) with `dmaflow info`'s advice, as is an experiment that needs the
/// emulator; a failure while measuring is status 1.
fn run_on_board(args: &BenchArgs, root: &Path) -> Result<(), Fail> {
    use bench::on_board::open;
    let list: Vec<(&'static dyn Experiment, bench::on_board::Mode)> = match args.experiment.0 {
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

/// `bench EXPERIMENT` on the emulated fabric, or with `--device cuda:N` its
/// GPU form.
fn run_bench(args: &BenchArgs) -> Result<(), Fail> {
    let Setup {
        tier,
        memory,
        profile,
        ..
    } = args.setup();
    let list: Vec<(&'static dyn Experiment, Tables)> = match (args.device, args.experiment.0) {
        (BenchDevice::Cuda(_), _) => gpu_plan(args.experiment).map_err(status(2))?,
        (BenchDevice::Sim, None) => bench::EXPERIMENTS
            .iter()
            .map(|&e| (e, Tables::ALL))
            .collect(),
        (BenchDevice::Sim, Some(e)) => std::iter::once(e)
            .chain(e.then().and_then(bench::find))
            .map(|e| (e, Tables::ALL))
            .collect(),
    };
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
    if !args.json && tier == Tier::Full {
        bar.println(
            "full runs take several minutes per experiment (--quick: all of them in under 5 minutes)",
        );
    }
    let info = RunInfo {
        board: format!(
            "{} [profile {}], emulated (AXI DMA per PG021 with its latencies, {} memory; paper \
             000's coprocessor streams at 100 MHz x 1 B); {}",
            profile.description,
            profile.name,
            match memory {
                MemoryModel::Coherent => "cache-coherent",
                MemoryModel::NonCoherent => "non-coherent",
            },
            bench::placement_here()
        ),
        ..RunInfo::here()
    };
    run_each(args, list, bar, |e, tables, bar| {
        let setup = Setup {
            gpu: match args.device {
                BenchDevice::Cuda(n) => Some((n, tables)),
                BenchDevice::Sim => None,
            },
            ..args.setup()
        };
        let report = e.run(&setup, &mut |m: &str| bar.set_message(m.to_string()));
        Ok((report.map_err(status(1))?, info.clone()))
    })
}

/// Runs a file tool on its ends; prints what it says it did, `dmaflow TOOL: `
/// before each line. A bad command line or input is status 2, a failure
/// while running 1.
fn run_tool(
    tool: &str,
    ends: &Ends,
    run: impl FnOnce(files::Source, files::Sink) -> Result<Vec<String>, files::FileError>,
) -> ExitCode {
    let said = ends.open().map_err(|e| (2, e)).and_then(|(source, sink)| {
        run(source, sink).map_err(|e| (if e.is_bad_input() { 2 } else { 1 }, e.to_string()))
    });
    finish(tool, said, |lines| {
        for line in lines {
            println!("dmaflow {tool}: {line}");
        }
    })
}

fn run_fir_file(args: &FirArgs) -> ExitCode {
    let FirArgs {
        taps,
        ends,
        fft,
        device,
    } = args;
    if *device == FirDeviceArg::Sim && fft.is_some() {
        eprintln!("dmaflow fir: --fft sets the CPU filter's FFT length; the coprocessor has none");
        return ExitCode::from(2);
    }
    let device = match device {
        FirDeviceArg::Cpu => files::fir::FirDevice::Cpu {
            fft_len: *fft,
            mode: Mode::ZeroCopy,
        },
        FirDeviceArg::Sim => files::fir::FirDevice::Sim,
    };
    run_tool("fir", ends, |source, sink| {
        let done = files::fir::filter(taps, source, sink, device)?;
        let mut said: Vec<String> = done
            .copies
            .iter()
            .map(|c| {
                format!(
                    "{} samples through the FIR coprocessor node; {c}",
                    done.samples
                )
            })
            .collect();
        for end in &done.net {
            let (messages, items, lost, tags) = end.counts;
            said.push(format!(
                "{}: {} {items} samples in {messages} messages ({lost} lost on the way, {tags} \
                 tags)",
                end.endpoint, end.direction
            ));
            if !end.tags.is_empty() {
                let shown: Vec<String> = end.tags.iter().map(|t| t.to_string()).collect();
                said.push(format!("{}: tags {}", end.direction, shown.join(", ")));
            }
        }
        Ok(said)
    })
}

fn run_bgsub(args: &BgsubArgs) -> ExitCode {
    use files::bgsub::{bgsub_file, bgsub_stream};
    let (a, device) = (args, args.device);
    run_tool("bgsub", &args.ends, |source, sink| {
        let p = dmaflow::dsp::bgsub::Params::new(a.width, a.height, a.threshold, !a.no_filter)?;
        let done = match (source, sink) {
            (files::Source::File(i), files::Sink::File(o)) => bgsub_file(p, &i, &o, device),
            (source, sink) => bgsub_stream(p, source, sink, device),
        }?;
        Ok(done
            .copies
            .iter()
            .map(|c| format!("{} frames through the coprocessor node; {c}", done.frames))
            .collect())
    })
}

fn run_info(root: &Path) -> ExitCode {
    let inv = dmaflow::platform::uio::inventory(root);
    if inv.uio.is_empty() {
        println!(
            "UIO devices: none under {}",
            root.join("sys/class/uio").display()
        );
    }
    for d in &inv.uio {
        let what = match d.size {
            0 => "an interrupt line".to_string(),
            size => format!("registers {size:#x} bytes at physical {:#x}", d.addr),
        };
        println!("UIO device: /dev/uio{} ({}), {what}", d.index, d.name);
    }
    if inv.udmabuf.is_empty() {
        println!(
            "u-dma-buf: none under {}",
            root.join("sys/class/u-dma-buf").display()
        );
    }
    for (name, phys, size) in &inv.udmabuf {
        println!("u-dma-buf: /dev/{name}, {size} bytes at physical {phys:#x}");
    }
    for problem in &inv.malformed {
        eprintln!("dmaflow info: left out: {problem}");
    }
    let findings = dmaflow_cli::board_check::check(&inv, root);
    for f in &findings {
        let mark = match (f.blocking, f.missing) {
            (true, _) => "missing",
            (false, true) => "warning",
            (false, false) => "ok",
        };
        println!("  {mark}: {}", f.text);
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
        Ok(list) => {
            for d in list {
                println!("CUDA: {d}");
            }
        }
        Err(e) => println!("CUDA: none ({e})"),
    }
    if inv.malformed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// Refuses, before anything runs, a GPU asked for that this machine's driver
/// does not have, and an experiment with no GPU form. A machine with no driver
/// or no device passes: the GPU experiment then says it skipped.
fn check_device(which: Which, device: BenchDevice) -> Result<(), String> {
    let BenchDevice::Cuda(n) = device else {
        return Ok(());
    };
    gpu_plan(which)?;
    let count = dmaflow::gpu::driver::count();
    if count > 0 && n >= count {
        return Err(format!(
            "--device cuda:{n}: this machine has {count} CUDA device(s)"
        ));
    }
    Ok(())
}

/// Makes sure the report directory can be written before any experiment runs:
/// creates it and writes (and removes) a probe file in it.
fn prepare_out(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let probe = out.join(format!(".dmaflow-probe.{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| format!("{}: {e}", out.display()))?;
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
        Command::Bench(args) => {
            let checked = match args.board {
                Some(_) => Ok(()),
                None => check_device(args.experiment, args.device),
            };
            let done = checked
                .and_then(|()| prepare_out(&args.out))
                .map_err(|e| (2, e))
                .and_then(|()| match &args.board {
                    Some(root) => run_on_board(&args, root),
                    None => run_bench(&args),
                });
            finish("bench", done, |()| {})
        }
        Command::Bgsub(args) => run_bgsub(&args),
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
        Command::Fir(args) => run_fir_file(&args),
    }
}
