//! The papers' questions on real hardware: a CUDA GPU's copy engines over PCIe
//! as the DMA device (`dmaflow bench gpu`, or `--device cuda[:N]`).
//!
//! - **ceiling**: the copy engines' own rate, measured in the same run the way
//!   nvbandwidth does (copies queued behind a kernel that holds the stream).
//! - **transfer**: two-way transfers for every host memory kind and completion
//!   mode, 8 B to 256 MiB: wall time, each direction's device-timed rate (as
//!   the ceiling's, and as the host submits) and host CPU per transfer.
//! - **message**: a whole message in blocks on one or two streams (single or
//!   double buffering), through a kernel: does overlap approach the ceiling?
//! - **kernels**: background subtraction and the convolution layers on the GPU,
//!   byte for byte against the CPU references, every run.
//!
//! Without a driver or a device the experiment is skipped and says so.

use std::fmt::{self, Display};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmaflow::dma::{Completion, Partition};
use dmaflow::dsp::{bgsub, conv};
use dmaflow::gpu::ceiling::{self, Direction};
use dmaflow::gpu::engine::{DeviceTiming, Process};
use dmaflow::gpu::kernels::{self, Bgsub};
use dmaflow::gpu::{DeviceInfo, Gpu, GpuEngine, HostBuf, HostKind, Kernels};
use dmaflow::platform::cpu::{process_cpu_time, thread_cpu_time};
use serde_json::{Value, json};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Point, Row};
use super::harness::{OnBoard, OnGpu, Progress, Setup, Spec, Tables, Tier, bytes_label};
use super::phases::{Sections, phase};
use super::report::{Report, Target};
use super::spread::Spread;

/// `dmaflow bench gpu`.
pub static EXPERIMENT: Spec<Config, Outcome> = Spec {
    name: "gpu",
    on_gpu: Some(OnGpu::Itself),
    board: OnBoard::EmulatorOnly("it runs on a GPU (--device cuda)"),
    question: "A CUDA GPU as the DMA device: copy-engine ceiling, host memory kinds and \
               completion modes, double buffering, kernels against the CPU (skipped without a \
               GPU).",
    keys: "device (every row), table (ceiling|transfer|message|kernel);\n\
          ceiling: direction (h2d|d2h), bytes_per_s, bytes_per_s_spread;\n\
          transfer: memory (pageable|pinned|pinned-wc|mapped|registered),\n\
          mode, bytes, repeats, us (per two-way transfer), us_spread,\n\
          h2d_bytes_per_s and d2h_bytes_per_s (device events, the\n\
          copies queued behind a holding kernel as the ceiling's),\n\
          h2d_submitted_bytes_per_s and d2h_submitted_bytes_per_s (the\n\
          events queued as the host submits), their spreads, cpu_us (process CPU per transfer), cpu_us_spread,\n\
          caller_cpu_us; message: bytes, block, depth, kernel, ms,\n\
          ms_spread, ceiling_share (its spread too); kernel: name, gpu_ms,\n\
          gpu_ms_spread, cpu_ms, identical. Without a GPU: skipped, no rows.",
    conditions: Conditions {
        timed: "each point's transfers from the first call to the last return on the \
                waiting thread (wall), each copy by the device's own events queued \
                behind a holding kernel as the ceiling's are (h2d, d2h; in extra \
                transfers) and as the host submits them (h2d/d2h submitted: a small \
                copy's submission inside), process CPU time (the waiter and the \
                driver's threads included)",
        against: "the copy engines' ceiling measured in the same run (copies queued \
                  behind a kernel holding the stream, as nvbandwidth does), and the CPU \
                  references of every kernel",
        model: "none: a GPU is real hardware, every figure is measured",
        paper: "the papers' questions on a PCIe GPU instead of a Zynq's AXI DMA: copy \
                engines for MM2S and S2MM, pinned memory for the DMA buffers",
    },
    ..Spec::new(Config::at, run, report)
};

/// What the experiment (and `cnn --device cuda`) reports without a GPU.
pub const NO_GPU: &str = "no CUDA device: skipped";

/// The table of the copy engines' ceiling and the transfer points.
pub const TRANSFERS: &str = "transfers";
/// The table of the message in blocks.
pub const MESSAGES: &str = "messages";
/// The table of the kernels against the CPU.
pub const KERNELS: &str = "kernels";

impl Tables {
    /// The tables of data moved: the ceiling, the transfer points and the
    /// message, not the kernels.
    pub const MOVED: Tables = Tables::only(&[TRANSFERS, MESSAGES]);

    /// The kernels against the CPU only.
    pub const KERNELS: Tables = Tables::only(&[KERNELS]);
}

/// The completion modes a GPU is waited on with.
pub const MODES: [Completion; 3] = [Completion::Poll, Completion::Yield, Completion::Irq];

/// The copy directions, host to device first.
const DIRECTIONS: [Direction; 2] = [Direction::H2D, Direction::D2H];

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// The device's ordinal (`cuda:N`).
    pub device: usize,
    /// Transfer sizes, bytes.
    pub sizes: Vec<usize>,
    /// Host memory kinds.
    pub kinds: Vec<HostKind>,
    /// Rounds: every point is measured once per round, the points in turns.
    pub rounds: usize,
    /// Bytes moved per point and round (repeats = this over the size, clamped).
    pub bytes_per_point: usize,
    /// Fewest and most transfers per point and round.
    pub repeats: (usize, usize),
    /// The ceiling's copy size and number of copies.
    pub ceiling: (usize, usize),
    /// The message of the overlap table, and the blocks it is cut into.
    pub message: usize,
    /// Block sizes of the message (the message size itself is one transfer).
    pub blocks: Vec<usize>,
    /// Frames of background subtraction (640 x 480) checked and timed.
    pub frames: usize,
    /// The longest wait on the device.
    pub timeout: Duration,
    /// Which tables run.
    pub tables: Tables,
}

impl Config {
    /// The size `setup` asks for (the recorded run: 8 B to 256 MiB; the
    /// tiny one exercises every table) on its CUDA device, with the tables
    /// it asks for.
    pub fn at(setup: &Setup) -> Self {
        let (device, tables) = setup.gpu.unwrap_or((0, Tables::ALL));
        let full = Config {
            device,
            // 8 B to 16 MiB in steps of 8, then 64 and 256 MiB.
            sizes: (1..=8)
                .map(|k| 8usize.pow(k))
                .chain([64 << 20, 256 << 20])
                .collect(),
            kinds: HostKind::ALL.to_vec(),
            rounds: 3,
            bytes_per_point: 512 << 20,
            repeats: (3, 2000),
            ceiling: (64 << 20, 8),
            message: 256 << 20,
            blocks: vec![256 << 20, 64 << 20, 16 << 20, 4 << 20, 1 << 20],
            frames: 30,
            timeout: Duration::from_secs(10),
            tables,
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                sizes: vec![8, 4 << 10, 256 << 10, 16 << 20, 64 << 20],
                bytes_per_point: 128 << 20,
                repeats: (3, 300),
                message: 64 << 20,
                blocks: vec![64 << 20, 8 << 20, 1 << 20],
                frames: 10,
                ..full
            },
            Tier::Tiny => Config {
                sizes: vec![8, 64 << 10],
                rounds: 1,
                bytes_per_point: 1 << 20,
                repeats: (2, 20),
                ceiling: (4 << 20, 2),
                message: 4 << 20,
                blocks: vec![4 << 20, 1 << 20],
                frames: 3,
                ..full
            },
        }
    }

    fn repeats_for(&self, size: usize) -> usize {
        (self.bytes_per_point / size.max(1)).clamp(self.repeats.0, self.repeats.1)
    }
}

/// One transfer point: a memory kind (its series), a size, a completion
/// mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferAt {
    /// Host memory kind of both buffers.
    pub kind: HostKind,
    /// How completion was waited for.
    pub mode: Completion,
    /// Bytes each way.
    pub bytes: usize,
    /// Transfers per round.
    pub repeats: usize,
}

impl Display for TransferAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", bytes_label(self.bytes), self.mode.name())
    }
}

/// One round of one transfer point, each figure per transfer of the round.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Wall time per two-way transfer, microseconds.
    pub us: f64,
    /// H2D rate on the device's timer, the copies queued behind a holding
    /// kernel as the ceiling's, bytes/s; `NaN` without the kernels.
    pub h2d: f64,
    /// D2H rate, timed the same way, bytes/s.
    pub d2h: f64,
    /// H2D rate on the device's timer, its marks queued as the host submits.
    pub h2d_submitted: f64,
    /// D2H rate, timed the same way, bytes/s.
    pub d2h_submitted: f64,
    /// Process CPU time per transfer (every thread), microseconds.
    pub cpu_us: f64,
    /// Of that, the waiting thread's own, microseconds.
    pub caller_cpu_us: f64,
}

impl Figures {
    /// A mode not measured.
    const NONE: Figures = Figures {
        us: f64::NAN,
        h2d: f64::NAN,
        d2h: f64::NAN,
        h2d_submitted: f64::NAN,
        d2h_submitted: f64::NAN,
        cpu_us: f64::NAN,
        caller_cpu_us: f64::NAN,
    };
}

/// A transfer point's rounds.
pub type TransferRow = Row<TransferAt, Figures>;

/// One message point: blocks on one or two streams, through a kernel or not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageAt {
    /// Its place among the points.
    pub index: usize,
    /// Message bytes.
    pub bytes: usize,
    /// Block bytes.
    pub block: usize,
    /// Streams (1 single, 2 double buffering).
    pub depth: usize,
    /// Whether a kernel touched every byte on the device.
    pub kernel: bool,
    /// The message's time through the slower direction's ceiling, ms.
    pub ideal_ms: f64,
}

impl Display for MessageAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kernel = if self.kernel { ", a kernel" } else { "" };
        let label = bytes_label(self.block);
        write!(f, "{label} blocks on {} stream(s){kernel}", self.depth)
    }
}

/// A message point's rounds: wall time per message, milliseconds.
pub type MessageRow = Row<MessageAt, f64>;

/// A kernel point: background subtraction (a round a frame) or one
/// convolution layer (one round, each layer fed the one before's output).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelAt {
    /// What ran (`bgsub 640x480`, `conv layer 1`).
    pub name: String,
    /// The convolution layer's place in the network, from 0.
    pub layer: Option<usize>,
}

impl Display for KernelAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// One kernel's item (a frame, a layer) on the GPU and the CPU.
#[derive(Debug, Clone, Copy)]
pub struct KernelSample {
    /// Time on the GPU, copies in and out included, milliseconds.
    pub gpu_ms: f64,
    /// Time of the CPU reference, milliseconds.
    pub cpu_ms: f64,
    /// Whether every output byte matched the CPU's.
    pub identical: bool,
}

/// A kernel's rounds checked against its CPU reference.
pub type KernelRow = Row<KernelAt, KernelSample>;

/// What the experiment found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The device, or why there was none.
    pub device: Result<DeviceInfo, String>,
    /// What could not be measured on this device, and why.
    pub notes: Vec<String>,
    /// Ceiling per direction, bytes/s, round by round.
    pub ceiling: Vec<Row<Direction, f64>>,
    /// Transfer points.
    pub transfers: Vec<TransferRow>,
    /// Message points.
    pub messages: Vec<MessageRow>,
    /// Kernel checks.
    pub kernels: Vec<KernelRow>,
}

/// Runs the experiment on device `cfg.device`; a machine with no driver or no
/// device gives an outcome that says so. Asking for a device beyond those present
/// is an error.
pub fn run(cfg: &Config, progress: Progress) -> Result<Outcome, Error> {
    let mut out = Outcome {
        device: Err(String::new()),
        notes: Vec::new(),
        ceiling: Vec::new(),
        transfers: Vec::new(),
        messages: Vec::new(),
        kernels: Vec::new(),
    };
    let why = match dmaflow::gpu::devices() {
        Ok(l) if !l.is_empty() => None,
        Ok(_) => Some("the driver sees none".into()),
        Err(e) => Some(e.to_string()),
    };
    if let Some(why) = why {
        out.device = Err(format!("{NO_GPU} ({why})"));
        return Ok(out);
    }
    let gpu = Gpu::open(cfg.device)?;
    out.device = Ok(gpu.info()?);
    let kernels = match Kernels::load(&gpu) {
        Ok(k) => Some(Arc::new(k)),
        Err(e) => {
            out.notes.push(format!(
                "kernels unavailable ({e}): no ceiling, mapped memory, message or kernel rows"
            ));
            None
        }
    };
    if cfg.tables.has(TRANSFERS) || cfg.tables.has(MESSAGES) {
        progress("gpu: ceiling and transfers");
        transfers(cfg, &gpu, kernels.as_ref(), &mut out, &mut *progress)?;
    }
    if let Some(k) = &kernels {
        let bound = out
            .ceiling
            .iter()
            .map(|r| r.typical(rate))
            .fold(f64::INFINITY, f64::min);
        if cfg.tables.has(MESSAGES) {
            progress("gpu: messages");
            out.messages = messages(cfg, &gpu, k, bound, &mut *progress)?;
        }
        if cfg.tables.has(KERNELS) {
            progress("gpu: kernels");
            out.kernels = kernel_checks(cfg, k, &mut *progress)?;
        }
    }
    Ok(out)
}

/// A fill that differs per byte, round and size, so a stale or misplaced byte shows.
fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in buf {
        *b = super::peers::xorshift(&mut x) as u8;
    }
}

/// A transfer point's size (its series is the host memory kind).
#[derive(Debug, Clone, Copy, PartialEq)]
struct SizeAt {
    /// Host memory kind of both buffers.
    kind: HostKind,
    /// Its place among the configured sizes.
    index: usize,
    /// Bytes each way.
    bytes: usize,
}

impl Display for SizeAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&bytes_label(self.bytes))
    }
}

/// The ceiling (each round, before its points) and every transfer point,
/// in turns, into `out` (the points only where their table runs).
fn transfers(
    cfg: &Config,
    gpu: &Gpu,
    kernels: Option<&Arc<Kernels>>,
    out: &mut Outcome,
    progress: Progress,
) -> Result<(), Error> {
    let info = gpu.info()?;
    let (kinds, absent): (Vec<HostKind>, Vec<HostKind>) = cfg.kinds.iter().partition(|k| match k {
        HostKind::Mapped => info.can_map_host && kernels.is_some(),
        HostKind::Registered => info.can_register_host,
        _ => true,
    });
    out.notes.extend(
        absent
            .iter()
            .map(|k| format!("{} memory: not available on this device", k.name())),
    );
    let largest = cfg.sizes.iter().copied().max().unwrap_or(1);
    let mut engine = GpuEngine::new(gpu, largest, kernels.cloned(), cfg.timeout)?;
    let points: Vec<Point<SizeAt>> = (kinds.iter())
        .flat_map(|k| {
            (cfg.sizes.iter().enumerate()).map(|(index, &bytes)| Point {
                series: k.name(),
                at: SizeAt {
                    kind: *k,
                    index,
                    bytes,
                },
            })
        })
        .collect();
    // The ceiling in every round, both directions, where the kernels are.
    let ceiling_now = |_round: usize| match kernels {
        Some(k) => (DIRECTIONS.into_iter())
            .map(|dir| Ok(ceiling::measure(gpu, k, dir, cfg.ceiling.0, cfg.ceiling.1)?))
            .collect::<Result<Vec<f64>, Error>>(),
        None => Ok(Vec::new()),
    };
    // Every completion mode at the point, in `MODES`' order.
    let measure = |p: &Point<SizeAt>, round: usize| {
        let SizeAt {
            kind,
            index: si,
            bytes: size,
        } = p.at;
        let mut tx = HostBuf::new(gpu, kind, size)?;
        let mut rx = HostBuf::new(gpu, kind, size)?;
        fill(tx.as_mut_slice(), (round * 1000 + si) as u64);
        // The modes take turns within the point, their order reversed with
        // the points'.
        let mut modes: Vec<usize> = (0..MODES.len()).collect();
        if round % 2 == 1 {
            modes.reverse();
        }
        let mut got = vec![Figures::NONE; MODES.len()];
        for mi in modes {
            let m = MODES[mi];
            rx.as_mut_slice().fill(0);
            let n = cfg.repeats_for(size);
            // One warm-up transfer (first touch of the buffers, the waiter).
            engine.two_way(&mut tx, &mut rx, size, Process::Echo, m)?;
            // `n` transfers: the device's time of each direction, summed.
            let timed = |engine: &mut GpuEngine, tx: &mut HostBuf, rx: &mut HostBuf| {
                let (mut h2d, mut d2h) = (Duration::ZERO, Duration::ZERO);
                for _ in 0..n {
                    engine.two_way(tx, rx, size, Process::Echo, m)?;
                    let t = engine.last_timing();
                    h2d += t.tx;
                    d2h += t.rx;
                }
                Ok::<_, Error>((h2d, d2h))
            };
            let (c0, t0) = (process_cpu_time(), thread_cpu_time());
            let w0 = Instant::now();
            let (h2d, d2h) = timed(&mut engine, &mut tx, &mut rx)?;
            let wall = w0.elapsed();
            let (c1, t1) = (process_cpu_time(), thread_cpu_time());
            if rx.as_slice() != tx.as_slice() {
                return Err(Error::Corrupted {
                    what: format!("gpu {} {} {} B", kind.name(), m.name(), size),
                    got: crc(rx.as_slice()),
                    expected: crc(tx.as_slice()),
                });
            }
            let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
            let rate = |d: Duration| (size * n) as f64 / d.as_secs_f64().max(1e-12);
            let mut f = Figures {
                us: per(wall),
                h2d_submitted: rate(h2d),
                d2h_submitted: rate(d2h),
                cpu_us: per(c1.saturating_sub(c0)),
                caller_cpu_us: per(t1.saturating_sub(t0)),
                ..Figures::NONE
            };
            // The device's own time, taken as the ceiling's is: each
            // block's copies queued behind a holding kernel, so the
            // host's submission is not inside the marks. Not timed on
            // the wall (a kernel launch per transfer).
            if kernels.is_some() {
                engine.set_device_timing(DeviceTiming::Held)?;
                let held = timed(&mut engine, &mut tx, &mut rx);
                engine.set_device_timing(DeviceTiming::AsSubmitted)?;
                let (h, d) = held?;
                (f.h2d, f.d2h) = (rate(h), rate(d));
            }
            got[mi] = f;
        }
        Ok(got)
    };
    let (ceil, rows) = phase(
        EXPERIMENT.name,
        &points,
        |_| cfg.rounds,
        progress,
        ceiling_now,
        measure,
    )?;
    // A row a completion mode of each point, in `MODES`' order.
    let per_mode = |r: &Row<SizeAt, Vec<Figures>>, mi: usize| {
        let at = TransferAt {
            kind: r.point.at.kind,
            mode: MODES[mi],
            bytes: r.point.at.bytes,
            repeats: cfg.repeats_for(r.point.at.bytes),
        };
        let each = r.samples.iter().map(|s| s.get(mi).copied());
        let point = Point {
            series: r.point.series,
            at,
        };
        Row::alone(point, each.map(|f| f.unwrap_or(Figures::NONE)).collect())
    };
    if cfg.tables.has(TRANSFERS) {
        out.transfers = (rows.iter())
            .flat_map(|r| (0..MODES.len()).map(move |mi| (r, mi)))
            .map(|(r, mi)| per_mode(r, mi))
            .collect();
    }
    if kernels.is_some() {
        out.ceiling = (DIRECTIONS.into_iter().enumerate())
            .map(|(i, dir)| {
                let each: Vec<f64> = ceil.iter().map(|c| c[i]).collect();
                let at = Point {
                    series: "ceiling",
                    at: dir,
                };
                Row::alone(at, each)
            })
            .collect();
    }
    Ok(())
}

/// A short checksum for a mismatch's message.
fn crc(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| {
        (h ^ x as u32).wrapping_mul(0x0100_0193)
    })
}

/// The message cut into blocks, on one and two streams, with and without a
/// kernel; each round's share of the ceiling against `bound` (the slower
/// direction's ceiling, bytes/s).
fn messages(
    cfg: &Config,
    gpu: &Gpu,
    kernels: &Arc<Kernels>,
    bound: f64,
    progress: Progress,
) -> Result<Vec<MessageRow>, Error> {
    let largest = cfg.blocks.iter().copied().max().unwrap_or(cfg.message);
    let mut engine = GpuEngine::new(gpu, largest, Some(kernels.clone()), cfg.timeout)?;
    let mut tx = HostBuf::new(gpu, HostKind::Pinned, cfg.message)?;
    let mut rx = HostBuf::new(gpu, HostKind::Pinned, cfg.message)?;
    let ideal_ms = cfg.message as f64 / bound * 1e3;
    let points: Vec<Point<MessageAt>> = (cfg.blocks.iter())
        .flat_map(|&b| [(1, false), (1, true), (2, false), (2, true)].map(|(d, k)| (b, d, k)))
        .enumerate()
        .map(|(index, (b, depth, kernel))| Point {
            series: "message",
            at: MessageAt {
                index,
                bytes: cfg.message,
                block: b.min(cfg.message),
                depth,
                kernel,
                ideal_ms,
            },
        })
        .collect();
    let measure = |p: &Point<MessageAt>, round: usize| {
        let MessageAt {
            index,
            block,
            depth,
            kernel,
            ..
        } = p.at;
        fill(tx.as_mut_slice(), (round * 100 + index) as u64);
        rx.as_mut_slice().fill(0);
        let t0 = Instant::now();
        engine.send_message(
            &mut tx,
            &mut rx,
            cfg.message,
            Partition::Blocks(block),
            depth,
            if kernel {
                Process::Invert
            } else {
                Process::Echo
            },
            Completion::Poll,
        )?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let (rx, tx) = (rx.as_slice(), tx.as_slice());
        let ok = if kernel {
            rx.iter().zip(tx).all(|(r, t)| *r == !*t)
        } else {
            rx == tx
        };
        if !ok {
            return Err(Error::Corrupted {
                what: format!("gpu message in {} blocks", bytes_label(block)),
                got: crc(rx),
                expected: crc(tx),
            });
        }
        Ok(ms)
    };
    let name = EXPERIMENT.name;
    let (_, rows) = phase(name, &points, |_| cfg.rounds, progress, |_| Ok(()), measure)?;
    Ok(rows)
}

/// Background subtraction and the convolution layers on the GPU and the CPU,
/// output against output.
fn kernel_checks(
    cfg: &Config,
    k: &Arc<Kernels>,
    progress: Progress,
) -> Result<Vec<KernelRow>, Error> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    // Background subtraction, frame after frame, each side its own background.
    let p = bgsub::Params::new(640, 480, 25, true).map_err(Error::peer("bgsub"))?;
    let n = p.frame_bytes();
    let frames = bgsub::synthetic_frames(&p, cfg.frames.max(2), seed);
    let mut dev = Bgsub::new(k.clone(), p)?;
    let (mut bg_cpu, mut bg_gpu) = (frames[..n].to_vec(), frames[..n].to_vec());
    let (mut nb_cpu, mut nb_gpu) = (vec![0u8; n], vec![0u8; n]);
    let (mut m_cpu, mut m_gpu) = (vec![0u8; n], vec![0u8; n]);
    // The convolution layers, each side feeding its own output on.
    let layers = conv::roshambo(seed);
    let (mut a_cpu, mut a_gpu) = (conv::input_frame(seed), conv::input_frame(seed));
    let (mut h, mut w) = (64, 64);
    let mut next_layer = 0;
    let bgsub_at = KernelAt {
        name: format!("bgsub {}x{}", p.width, p.height),
        layer: None,
    };
    let points: Vec<Point<KernelAt>> = std::iter::once(bgsub_at)
        .chain((0..layers.len()).map(|i| KernelAt {
            name: format!("conv layer {}", i + 1),
            layer: Some(i),
        }))
        .map(|at| Point {
            series: "kernel",
            at,
        })
        .collect();
    let frame_count = frames.len() / n.max(1);
    let rounds = |pt: &Point<KernelAt>| match pt.at.layer {
        None => frame_count,
        Some(_) => 1,
    };
    let measure = |pt: &Point<KernelAt>, round: usize| {
        let Some(i) = pt.at.layer else {
            let f = &frames[round * n..(round + 1) * n];
            let t0 = Instant::now();
            bgsub::step(&p, f, &bg_cpu, &mut nb_cpu, &mut m_cpu).map_err(Error::peer("bgsub"))?;
            let cpu_ms = t0.elapsed().as_secs_f64() * 1e3;
            let t0 = Instant::now();
            dev.step(f, &bg_gpu, &mut nb_gpu, &mut m_gpu)?;
            let gpu_ms = t0.elapsed().as_secs_f64() * 1e3;
            let identical = m_cpu == m_gpu && nb_cpu == nb_gpu;
            std::mem::swap(&mut bg_cpu, &mut nb_cpu);
            std::mem::swap(&mut bg_gpu, &mut nb_gpu);
            return Ok(KernelSample {
                gpu_ms,
                cpu_ms,
                identical,
            });
        };
        // The first round takes the points in order: layer after layer.
        if i != next_layer {
            return Err(Error::peer("gpu")(format!(
                "conv layer {} measured before layer {}",
                i + 1,
                next_layer + 1
            )));
        }
        let layer = &layers[i];
        let t0 = Instant::now();
        let (c, oh, ow) = layer.forward(&a_cpu, h, w);
        let cpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        let (g, _, _) = kernels::conv_forward(k, layer, &a_gpu, h, w)?;
        let gpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        let identical = c == g;
        (a_cpu, a_gpu, h, w) = (c, g, oh, ow);
        next_layer += 1;
        Ok(KernelSample {
            gpu_ms,
            cpu_ms,
            identical,
        })
    };
    let name = EXPERIMENT.name;
    let (_, rows) = phase(name, &points, rounds, progress, |_| Ok(()), measure)?;
    Ok(rows)
}

fn gbs(b: f64) -> String {
    format!("{:.2}", b / 1e9)
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

/// A ceiling round's figure, bytes/s.
fn rate(x: &f64) -> f64 {
    *x
}

fn ceiling_of(out: &Outcome, dir: Direction) -> Option<f64> {
    out.ceiling
        .iter()
        .find(|r| r.point.at == dir)
        .map(|r| r.typical(rate))
}

/// The ceiling's JSON rows (its text is a line a direction).
fn ceiling_columns<'a>(device: Value) -> Columns<'a, Row<Direction, f64>> {
    Columns::new()
        .kept("device", move |_: &Row<Direction, f64>| device.clone())
        .kept("table", |_| "ceiling")
        .kept("direction", |r| r.point.at.name())
        .kept("bytes_per_s", |r| r.typical(rate))
        .kept("bytes_per_s_spread", |r| r.spread(rate).json())
}

/// The transfer points' columns, each JSON row marked with the device.
fn transfer_columns(out: &Outcome, device: Value) -> Columns<'_, TransferRow> {
    let [ch, cd] = DIRECTIONS.map(|d| ceiling_of(out, d));
    let share = |r: f64, c: Option<f64>| c.map_or("-".into(), |c| pct(r / c));
    let us = |x: f64| format!("{x:.2}");
    let each = |get: fn(&Figures) -> f64| move |r: &TransferRow| r.spread(get);
    Columns::new()
        .kept("device", move |_: &TransferRow| device.clone())
        .kept("table", |_| "transfer")
        .plain("memory", "memory", |r| r.point.at.kind.name())
        .plain("mode", "mode", |r| r.point.at.mode.name())
        .bytes("size", "bytes", |r| r.point.at.bytes)
        .kept("repeats", |r| r.point.at.repeats)
        .median("us", "us", "us_spread", us, each(|f| f.us))
        .shown("us max", move |r| us(r.spread(|f| f.us).max))
        .median(
            "h2d GB/s",
            "h2d_bytes_per_s",
            "h2d_spread",
            gbs,
            each(|f| f.h2d),
        )
        .shown("of ceiling", move |r| share(r.typical(|f| f.h2d), ch))
        .median(
            "d2h GB/s",
            "d2h_bytes_per_s",
            "d2h_spread",
            gbs,
            each(|f| f.d2h),
        )
        .shown("of ceiling", move |r| share(r.typical(|f| f.d2h), cd))
        .median(
            "h2d submitted",
            "h2d_submitted_bytes_per_s",
            "h2d_submitted_spread",
            gbs,
            each(|f| f.h2d_submitted),
        )
        .median(
            "d2h submitted",
            "d2h_submitted_bytes_per_s",
            "d2h_submitted_spread",
            gbs,
            each(|f| f.d2h_submitted),
        )
        .median("cpu us", "cpu_us", "cpu_us_spread", us, each(|f| f.cpu_us))
        .fixed("caller cpu us", "caller_cpu_us", 2, |r| {
            r.typical(|f| f.caller_cpu_us)
        })
}

/// A message round's share of the ceiling: the message's time through the
/// slower direction's ceiling over the round's.
fn ceiling_share(r: &MessageRow) -> Spread {
    let ideal = r.point.at.ideal_ms;
    r.spread(|ms| ideal / ms)
}

/// The message points' columns.
fn message_columns<'a>(device: Value) -> Columns<'a, MessageRow> {
    Columns::new()
        .kept("device", move |_: &MessageRow| device.clone())
        .kept("table", |_| "message")
        .bytes("message", "bytes", |r| r.point.at.bytes)
        .bytes("block", "block", |r| r.point.at.block)
        .col(
            "buffering",
            "depth",
            |r| {
                if r.point.at.depth == 2 {
                    "double"
                } else {
                    "single"
                }
                .into()
            },
            |r| r.point.at.depth,
        )
        .col(
            "kernel",
            "kernel",
            |r| if r.point.at.kernel { "invert" } else { "none" }.into(),
            |r| r.point.at.kernel,
        )
        .median(
            "ms",
            "ms",
            "ms_spread",
            |x| format!("{x:.2}"),
            |r| r.spread(|ms| *ms),
        )
        .shown("ms range", |r| {
            let s = r.spread(|ms| *ms);
            format!("{:.2}..{:.2}", s.min, s.max)
        })
        .median(
            "of ceiling",
            "ceiling_share",
            "ceiling_share_spread",
            pct,
            ceiling_share,
        )
}

/// The kernel checks' columns.
fn kernel_columns<'a>(device: Value) -> Columns<'a, KernelRow> {
    let ms = |x: f64| format!("{x:.3}");
    Columns::new()
        .kept("device", move |_: &KernelRow| device.clone())
        .kept("table", |_| "kernel")
        .plain("kernel", "name", |r| r.point.at.name.clone())
        .median("gpu ms", "gpu_ms", "gpu_ms_spread", ms, |r| {
            r.spread(|s| s.gpu_ms)
        })
        .fixed("cpu ms", "cpu_ms", 3, |r| r.typical(|s| s.cpu_ms))
        .shown_as(
            "vs cpu",
            "identical",
            |r| r.every(|s| s.identical),
            |i| if i { "identical" } else { "DIFFERENT" }.into(),
        )
}

/// The targets against this run's figures (none without a device:
/// nothing was measured).
pub fn targets(out: &Outcome) -> Vec<Target> {
    let mut t = Vec::new();
    for dir in DIRECTIONS {
        let Some(c) = ceiling_of(out, dir) else {
            continue;
        };
        let rate = |r: &TransferRow| match dir {
            Direction::H2D => r.typical(|f| f.h2d),
            Direction::D2H => r.typical(|f| f.d2h),
        };
        let worst = out
            .transfers
            .iter()
            .filter(|r| r.point.at.kind == HostKind::Pinned && r.point.at.bytes >= 64 << 20)
            .map(|r| (rate(r) / c, r))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((share, r)) = worst {
            let (name, at) = (dir.name().to_uppercase(), bytes_label(r.point.at.bytes));
            t.push(Target::new(
                format!("pinned {name} >= 64 MiB at >= 95 % of the ceiling"),
                format!("{} (worst: {at} {})", pct(share), r.point.at.mode.name()),
                share >= 0.95,
            ));
        }
    }
    let double = |r: &&MessageRow| {
        let at = &r.point.at;
        at.depth == 2 && at.kernel && at.block < at.bytes
    };
    let typical_share = |r: &MessageRow| r.typical(|ms| r.point.at.ideal_ms / ms);
    if let Some(best) = (out.messages.iter())
        .filter(double)
        .max_by(|a, b| typical_share(a).total_cmp(&typical_share(b)))
    {
        let share = ceiling_share(best);
        let best_share = typical_share(best);
        t.push(Target::new(
            format!(
                "double-buffered blocks of {} with the kernel at >= 90 % of the ceiling",
                bytes_label(best.point.at.bytes)
            ),
            format!(
                "{} ({} blocks; rounds {}..{})",
                pct(best_share),
                bytes_label(best.point.at.block),
                pct(share.min),
                pct(share.max)
            ),
            best_share >= 0.90,
        ));
    }
    let small = |m: Completion| {
        out.transfers.iter().find(|r| {
            let at = &r.point.at;
            at.kind == HostKind::Pinned && at.bytes == 8 && at.mode == m
        })
    };
    if let (Some(spin), Some(block)) = (small(Completion::Poll), small(Completion::Irq)) {
        let cpu = |r: &TransferRow| r.typical(|f| f.cpu_us);
        let wall = |r: &TransferRow| r.typical(|f| f.us);
        let ratio = cpu(block) / cpu(spin).max(f64::MIN_POSITIVE);
        t.push(Target::new(
            "8 B two-way: blocking CPU per transfer < 10 % of spinning's",
            format!(
                "spin {:.2} us/transfer with {:.2} us CPU; blocking {:.2} us with {:.2} us CPU ({})",
                wall(spin),
                cpu(spin),
                wall(block),
                cpu(block),
                pct(ratio)
            ),
            ratio < 0.10,
        ));
    }
    if !out.kernels.is_empty() {
        let bad: Vec<&str> = out
            .kernels
            .iter()
            .filter(|r| !r.every(|s| s.identical))
            .map(|r| r.point.at.name.as_str())
            .collect();
        t.push(Target::new(
            "every kernel result identical to the CPU's",
            if bad.is_empty() {
                format!("{} of {} identical", out.kernels.len(), out.kernels.len())
            } else {
                format!("different: {}", bad.join(", "))
            },
            bad.is_empty(),
        ));
    }
    t
}

/// The experiment's report: the device, the ceiling and the tables, every
/// JSON row naming its device and table; without a device, why.
pub fn report(_cfg: &Config, out: &Outcome) -> Report {
    let heading =
        "GPU as a DMA device: copy engines over PCIe, host memory kinds, completion modes";
    let empty = || Report::of(EXPERIMENT.name, heading.into(), &Columns::<()>::new(), &[]);
    let info = match &out.device {
        Ok(i) => i,
        Err(why) => {
            return empty()
                .text(format!("{why}\n"))
                .answer(why.clone())
                .kept("skipped", why.as_str());
        }
    };
    let device = json!(format!("cuda:{} {}", info.ordinal, info.name));
    let mut sections = Sections::default().line(format!("device: {info}"));
    for n in &out.notes {
        sections = sections.line(format!("note: {n}"));
    }
    for r in &out.ceiling {
        let (d, c) = (r.point.at, r.spread(rate));
        let (gb, min, max) = (gbs(r.typical(rate)), gbs(c.min), gbs(c.max));
        sections = sections.line(format!(
            "ceiling {}: {gb} GB/s (rounds {min}..{max})",
            d.name()
        ));
    }
    let sections = sections
        .json(&ceiling_columns(device.clone()), &out.ceiling)
        .table(&transfer_columns(out, device.clone()), &out.transfers)
        .table_after(&message_columns(device.clone()), &out.messages)
        .table_after(&kernel_columns(device), &out.kernels);
    let answer = match DIRECTIONS.map(|d| ceiling_of(out, d)) {
        [Some(h), Some(d)] => format!(
            "{}: copy-engine ceiling {} GB/s H2D, {} GB/s D2H, measured in this run",
            info.name,
            gbs(h),
            gbs(d)
        ),
        _ => format!("{}: transfers measured without the kernels", info.name),
    };
    empty()
        .text(sections.text)
        .answer(answer)
        .targets(targets(out))
        .kept("notes", out.notes.clone())
        .kept("rows", sections.rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_follow_the_size_and_without_a_device_the_experiment_skips() {
        let c = Config::at(&Setup {
            tier: Tier::Full,
            ..Setup::TINY
        });
        assert_eq!(c.repeats_for(8), 2000);
        assert_eq!(c.repeats_for(256 << 20), 3);
        assert_eq!(c.repeats_for(4 << 20), 128);
        if dmaflow::gpu::driver::count() > 0 {
            return;
        }
        let out = run(&Config::at(&Setup::TINY), &mut |_| {}).unwrap();
        let r = report(&Config::at(&Setup::TINY), &out);
        assert!(r.text.starts_with(NO_GPU), "{}", r.text);
        assert_eq!(r.json["rows"].as_array().map(Vec::len), Some(0));
        assert!(r.targets.is_empty());
    }

    /// A device's report from figures made up here (no GPU needed): the
    /// ceiling's lines, each table under the one before with its own JSON
    /// layout, an empty table left out, every JSON row naming its device
    /// and table.
    #[test]
    fn a_devices_report_has_each_table_and_its_json_layout() {
        // Two rounds of each point: the figure, then twice it.
        fn rounds<P, S>(series: &'static str, at: P, s: impl Fn(f64) -> S) -> Row<P, S> {
            Row::alone(Point { series, at }, vec![s(1.0), s(2.0)])
        }
        let info = DeviceInfo {
            ordinal: 0,
            name: "made up".into(),
            memory: 1 << 30,
            capability: (9, 0),
            multiprocessors: 1,
            copy_engines: 2,
            pci: "0000:01:00.0".into(),
            link: None,
            can_map_host: true,
            can_register_host: true,
        };
        let transfer = TransferAt {
            kind: HostKind::Pinned,
            mode: Completion::Poll,
            bytes: 64 << 20,
            repeats: 3,
        };
        let kernel = KernelAt {
            name: "bgsub 640x480".into(),
            layer: None,
        };
        let out = Outcome {
            device: Ok(info),
            notes: vec!["registered memory: not available on this device".into()],
            ceiling: vec![
                rounds("ceiling", Direction::H2D, |k| k * 50e9),
                rounds("ceiling", Direction::D2H, |k| k * 40e9),
            ],
            transfers: vec![rounds("pinned", transfer, |k| Figures {
                us: k * 3000.0,
                h2d: k * 30e9,
                d2h: k * 39e9,
                h2d_submitted: k * 45e9,
                d2h_submitted: k * 35e9,
                cpu_us: k * 3000.0,
                caller_cpu_us: k * 2900.0,
            })],
            messages: Vec::new(),
            kernels: vec![rounds("kernel", kernel, |k| KernelSample {
                gpu_ms: k,
                cpu_ms: k * 5.0,
                identical: true,
            })],
        };
        let r = report(&Config::at(&Setup::TINY), &out);
        assert!(r.text.starts_with("device: cuda:0 made up"), "{}", r.text);
        assert!(r.text.contains("\nnote: registered memory"), "{}", r.text);
        assert!(
            r.text
                .contains("ceiling h2d: 75.00 GB/s (rounds 50.00..100.00)\n"),
            "{}",
            r.text
        );
        // The kernels' table a blank line under the transfers'.
        let kernels = r.text.find("bgsub 640x480").unwrap();
        assert!(r.text[..kernels].contains(" 4350.00\n\n"), "{}", r.text);
        assert!(!r.text.contains("buffering"), "{}", r.text);
        let rows = r.json["rows"].as_array().unwrap();
        let tables: Vec<&str> = rows.iter().map(|r| r["table"].as_str().unwrap()).collect();
        assert_eq!(tables, ["ceiling", "ceiling", "transfer", "kernel"]);
        assert!(rows.iter().all(|r| r["device"] == "cuda:0 made up"));
        assert_eq!(rows[1]["direction"], "d2h");
        assert_eq!(rows[1]["bytes_per_s"], 60e9);
        assert_eq!(rows[1]["bytes_per_s_spread"]["n"], 2);
        assert_eq!(rows[2]["us_spread"]["max"], 6000.0);
        assert_eq!(rows[3]["identical"], true);
        // 45 of 75 GB/s is under 95 %: the pinned H2D target is missed.
        assert!(r.targets.iter().any(|t| !t.met), "{:?}", r.targets);
        // A message of 10 ms through the ceiling, taking 10 and 20 ms.
        let message = MessageAt {
            index: 0,
            bytes: 64 << 20,
            block: 8 << 20,
            depth: 2,
            kernel: true,
            ideal_ms: 10.0,
        };
        let with_message = Outcome {
            messages: vec![rounds("message", message, |k| k * 10.0)],
            ..out
        };
        let r = report(&Config::at(&Setup::TINY), &with_message);
        let row = &r.json["rows"][3];
        assert_eq!(
            (row["table"].as_str(), row["ms"].as_f64()),
            (Some("message"), Some(15.0))
        );
        assert_eq!(row["ceiling_share"], 0.75);
        assert_eq!(row["ceiling_share_spread"]["min"], 0.5);
        let double = r
            .targets
            .iter()
            .find(|t| t.what.starts_with("double-buffered"));
        let double = double.expect("the double-buffering target");
        assert!(
            !double.met && double.found.contains("rounds 50.0 %..100.0 %"),
            "{double:?}"
        );
    }
}
