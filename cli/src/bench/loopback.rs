//! `dmaflow bench loopback`: two-way loopback transfers on the emulated fabric
//! (paper 002's Figs. 4-5), 8 B to 6 MB, for each completion mode and data path,
//! at the board profile's port clock. Every transfer sends fresh data into a
//! cleared receive buffer, and what comes back is checked. Every point (a
//! mode and path at a size) takes its turn in every round, a share of the
//! transfers each, on a board of its own (on a real board, `--board`, the
//! same engine, opened again after the kernel-style proxy took it over).
//! Where the adaptive wait naps, a `nap` point beside them takes the same
//! timed sleep, of the nap's length, on the same thread setup and measured
//! the same way, with no transfer: the host's floor for a wait that sleeps.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dmaflow::axi::{self, Channel, NAP_WAKE};
use dmaflow::dma::{Completion, Engine, Link, Partition, Timing};
use dmaflow::platform::{IrqLine, MemoryModel, RegisterSpace};
use dmaflow::sim::{Clock, Loopback};

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::dma::{proxy, rig};
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point};
use super::harness::{OnGpu, Setup, Tables, Tier, bytes_label, on_board};
use super::meter::{Meter, Samples, Tally};
use super::on_board::{BoardRig, KeptBoard, Mode};
use super::plot::XAxis;
use super::report::{Target, per_mode};
use super::spread::Spread;

/// `dmaflow bench loopback`.
pub static EXPERIMENT: Bench<Config, usize, Sample> = Bench {
    name: "loopback",
    on_gpu: Some(OnGpu::Gpu(Tables::MOVED)),
    board: Some((Mode::Direct, on_the_board)),
    question: "Two-way loopback transfers on the emulated fabric (paper 002).",
    conditions: Conditions {
        timed: "each two-way transfer from the call to its return; TX and RX from their own \
                starts; every point in turns, five rounds, each round's median",
        against: "the modelled device (model_us) and polling's CPU",
        model: "model_us: PG021's latencies and the HP port's clock; overhead_us also holds \
                the emulator's own work, which the bare rows (the thinnest driver on the same \
                fabric) measure: over_bare_us is dmaflow's",
        paper: USER_X86,
    },
    baseline: Some(BARE),
    plots: &[
        plot(
            "Two-way transfer time (paper 002, Fig. 4)",
            "median_us",
            Some(("round_median_us_min", "round_median_us_max")),
        ),
        plot("Time per byte (paper 002, Fig. 5)", "us_per_byte", None),
        plot(
            "What software adds to the modelled device",
            "overhead_us",
            None,
        ),
        plot(
            "Host CPU per transfer (driver-side threads)",
            "cpu_us",
            None,
        ),
    ],
    heading,
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// A plot of `y` against the size, a line per mode and path, log scale.
const fn plot(
    title: &'static str,
    y: &'static str,
    interval: Option<(&'static str, &'static str)>,
) -> Plot {
    Plot {
        title,
        x: "bytes",
        y,
        interval,
        y_scale: 1.0,
        lines: &["completion", "path", "buffering", "partition"],
        axis: XAxis::Bytes,
        log_y: true,
    }
}

/// What to measure.
pub struct Config {
    /// Transfer sizes in bytes.
    pub sizes: Vec<usize>,
    /// Transfers per point at most (fewer for large sizes).
    pub max_iterations: usize,
    /// Bytes moved per point at most, which bounds the iterations of large sizes.
    pub bytes_per_point: usize,
    /// Block size of the `Blocks` partition (used for messages longer than it).
    pub block: usize,
    /// The fabric's stream rate.
    pub clock: Clock,
    /// The board's memory (a non-coherent one runs with explicit maintenance).
    pub memory: MemoryModel,
    /// Rounds: the points take turns, each round a share of the transfers,
    /// the order reversed every other round.
    pub rounds: usize,
    /// A real board's engine in loopback (`--board`), measured in place of
    /// an emulated board per measurement.
    pub board: Option<KeptBoard>,
    /// Where the adaptive zero-copy point's S2MM naps ended against the
    /// expected end (ns, [`axi::AxiDma::nap_aim_ns`]) when its last share
    /// was over, per size: the `nap` point at that size naps as long.
    pub aims: Mutex<BTreeMap<usize, i64>>,
}

/// Keeps the board's engine for the run (`--board`).
fn on_the_board(cfg: &mut Config, rig: BoardRig, _: &mut dyn FnMut(&str)) -> Result<(), Error> {
    cfg.board = Some(KeptBoard::new(rig));
    Ok(())
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            sizes: vec![
                8,
                64,
                512,
                4 << 10,
                32 << 10,
                64 << 10,
                256 << 10,
                1 << 20,
                6_000_000,
            ],
            max_iterations: 20_000,
            bytes_per_point: 256 << 20,
            block: 64 << 10,
            clock: setup.profile.port,
            memory: setup.memory,
            rounds: 5,
            board: None,
            aims: Mutex::default(),
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                max_iterations: 1_000,
                bytes_per_point: 24 << 20,
                ..full
            },
            Tier::Tiny => Config {
                sizes: vec![8, 4096],
                max_iterations: 30,
                bytes_per_point: 1 << 20,
                block: 1024,
                rounds: 2,
                ..full
            },
        }
    }

    /// Transfers per point over all rounds.
    fn iterations(&self, bytes: usize) -> usize {
        (self.bytes_per_point / bytes).clamp(5, self.max_iterations)
    }
}

/// One point's transfers in one round.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Each transfer's times (call to return, TX, RX) and their cost: host
    /// CPU of the driver-side threads, the emulated device's interrupt
    /// delivery included (the eventfd write and the waiter's wake-up, an
    /// interrupt handler's work on a board).
    pub transfers: Samples,
    /// Block size for `blocks`, the whole message for `unique`.
    pub block_bytes: usize,
    /// What the modelled device needs to move the message in one transfer
    /// (MM2S start-up, the link, the S2MM write latency), in microseconds;
    /// 0 on a real board.
    pub model_us: f64,
}

/// A point over the rounds.
pub type Row = super::frame::Row<usize, Sample>;

/// A way of moving one message: (path, buffering, partition).
pub type Way = (&'static str, &'static str, &'static str);

/// The emulator baseline: the thinnest driver, a spin on DMASR.
const BARE: &str = "bare zerocopy";

/// The kernel-style driver thread, which takes the engine over.
const PROXY: &str = "proxy copy";

/// One timed sleep as long as the adaptive wait's nap, no transfer: the
/// host's floor for a wait that sleeps once.
const NAP: &str = "nap";

/// Zero-copy: one transfer straight from and into the caller's buffers.
const ZEROCOPY: Way = ("zerocopy", "single", "unique");

/// The series: (name, completion as the tables name it, how the driver
/// waits, the way the message moves); a `blocks` way only at sizes above
/// the block size.
const SERIES: [(&str, &str, Completion, Way); 22] = [
    ("poll zerocopy", "poll", Completion::Poll, ZEROCOPY),
    (
        "poll copy single unique",
        "poll",
        Completion::Poll,
        ("copy", "single", "unique"),
    ),
    (
        "poll copy single blocks",
        "poll",
        Completion::Poll,
        ("copy", "single", "blocks"),
    ),
    (
        "poll copy double unique",
        "poll",
        Completion::Poll,
        ("copy", "double", "unique"),
    ),
    (
        "poll copy double blocks",
        "poll",
        Completion::Poll,
        ("copy", "double", "blocks"),
    ),
    ("yield zerocopy", "yield", Completion::Yield, ZEROCOPY),
    (
        "yield copy single unique",
        "yield",
        Completion::Yield,
        ("copy", "single", "unique"),
    ),
    (
        "yield copy single blocks",
        "yield",
        Completion::Yield,
        ("copy", "single", "blocks"),
    ),
    (
        "yield copy double unique",
        "yield",
        Completion::Yield,
        ("copy", "double", "unique"),
    ),
    (
        "yield copy double blocks",
        "yield",
        Completion::Yield,
        ("copy", "double", "blocks"),
    ),
    ("irq zerocopy", "irq", Completion::Irq, ZEROCOPY),
    (
        "irq copy single unique",
        "irq",
        Completion::Irq,
        ("copy", "single", "unique"),
    ),
    (
        "irq copy single blocks",
        "irq",
        Completion::Irq,
        ("copy", "single", "blocks"),
    ),
    (
        "irq copy double unique",
        "irq",
        Completion::Irq,
        ("copy", "double", "unique"),
    ),
    (
        "irq copy double blocks",
        "irq",
        Completion::Irq,
        ("copy", "double", "blocks"),
    ),
    (
        "adaptive zerocopy",
        "adaptive",
        Completion::Adaptive,
        ZEROCOPY,
    ),
    (
        "adaptive copy single unique",
        "adaptive",
        Completion::Adaptive,
        ("copy", "single", "unique"),
    ),
    (
        "adaptive copy single blocks",
        "adaptive",
        Completion::Adaptive,
        ("copy", "single", "blocks"),
    ),
    (
        "adaptive copy double unique",
        "adaptive",
        Completion::Adaptive,
        ("copy", "double", "unique"),
    ),
    (
        "adaptive copy double blocks",
        "adaptive",
        Completion::Adaptive,
        ("copy", "double", "blocks"),
    ),
    (BARE, "bare", Completion::Poll, ZEROCOPY),
    (
        PROXY,
        "proxy",
        Completion::Poll,
        ("copy", "single", "unique"),
    ),
];

/// A series' completion as the tables name it, how its driver waits and
/// its way.
fn series(name: &str) -> (&'static str, Completion, Way) {
    if name == NAP {
        return (NAP, Completion::Adaptive, ZEROCOPY);
    }
    SERIES
        .iter()
        .find(|s| s.0 == name)
        .map_or(("?", Completion::Poll, ZEROCOPY), |&(_, c, w, way)| {
            (c, w, way)
        })
}

/// Every series at every size, and the nap where the adaptive wait naps.
fn points(cfg: &Config) -> Vec<Point<usize>> {
    let mut v = Vec::new();
    for &bytes in &cfg.sizes {
        for (name, _, _, way) in SERIES {
            if way.2 != "blocks" || bytes > cfg.block {
                v.push(Point {
                    series: name,
                    at: bytes,
                });
            }
        }
        if naps_at(cfg, bytes) {
            v.push(Point {
                series: NAP,
                at: bytes,
            });
        }
    }
    v
}

/// Whether an adaptive two-way wait for `bytes` naps: when the transfer is
/// expected to take more than two [`NAP_WAKE`]s, by the link an emulated
/// board's engine is given (the modelled two-way time and the default
/// margin, [`Link::default`]).
fn naps_at(cfg: &Config, bytes: usize) -> bool {
    cfg.clock.two_way(bytes, false) + Link::default().latency > 2 * NAP_WAKE
}

/// How long the adaptive wait's nap for a two-way transfer of `bytes` on
/// `link` lasts: from the start to the expected end, moved by the aim its
/// S2MM channel learned (the adaptive point's last, or the aim a fresh
/// engine starts with), and at least one [`NAP_WAKE`].
fn nap_length(cfg: &Config, link: &Link, bytes: usize) -> Duration {
    let start_aim = -(NAP_WAKE.as_nanos() as i64);
    let aim = cfg
        .aims
        .lock()
        .ok()
        .and_then(|a| a.get(&bytes).copied())
        .unwrap_or(start_aim);
    let ns = link.expected(bytes).as_nanos() as i64 + aim;
    Duration::from_nanos(ns.max(0) as u64).max(NAP_WAKE)
}

/// Transfers each measurement begins with on its fresh board (or engine),
/// checked and not timed.
const WARM_UP: usize = 3;

/// Numbers the transfers of the whole run: every transfer's data is fresh.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Fresh data for transfer `seq`: its number, then a pattern of it.
fn fill(seq: u64, p: &mut [u8]) {
    let n = p.len().min(8);
    p[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    let b = (seq as u8).wrapping_mul(37) ^ 0xA5;
    for (i, x) in p[n..].iter_mut().enumerate() {
        *x = b.wrapping_add(i as u8);
    }
}

/// Whether `got` (`n` bytes received) is transfer `seq`'s data of `len` bytes.
fn check(what: &str, seq: u64, len: usize, n: usize, got: &[u8]) -> Result<(), Error> {
    let k = len.min(8);
    let b = (seq as u8).wrapping_mul(37) ^ 0xA5;
    let ok = n == len
        && got[..k] == seq.to_le_bytes()[..k]
        && got[k..n]
            .iter()
            .enumerate()
            .all(|(i, &x)| x == b.wrapping_add(i as u8));
    ok.then_some(()).ok_or_else(|| Error::Corrupted {
        what: format!("{what}: transfer {seq}"),
        got: n as u32,
        expected: len as u32,
    })
}

/// One point's share of the transfers in one round, every transfer's data
/// fresh and checked: on a board of its own (its emulated device on a core
/// of its own where there are two), or on the real board's engine.
fn measure(cfg: &Config, p: &Point<usize>) -> Result<Sample, Error> {
    let bytes = p.at;
    let (_, _, way) = series(p.series);
    let block_bytes = if way.2 == "blocks" { cfg.block } else { bytes };
    if p.series == NAP {
        return naps(cfg, p);
    }
    let Some(real) = &cfg.board else {
        let (mut rig, _placed) = rig(8 * bytes, cfg.clock, cfg.memory, Box::new(Loopback))?;
        // The same engine's registers for the emulator baseline.
        let regs = rig.board.registers(0)?;
        let engine = rig.engines.remove(0);
        let (transfers, _) = transfers(cfg, p, engine, &regs)?;
        return Ok(Sample {
            transfers,
            block_bytes,
            model_us: cfg.clock.two_way(bytes, false).as_secs_f64() * 1e6,
        });
    };
    // Nothing is modelled on a real board: model_us is 0. The proxy driver
    // keeps the engine it takes over: the next point opens it anew (a
    // reset, as an emulated point's fresh board).
    let (transfers, engine) = transfers(cfg, p, real.take()?, real.registers())?;
    if let Some(engine) = engine {
        real.give_back(engine);
    }
    Ok(Sample {
        transfers,
        block_bytes,
        model_us: 0.0,
    })
}

/// The nap point's share: one timed sleep per "transfer", as long as the
/// adaptive wait's nap at this size and taken by the same call
/// ([`axi::nap`]), on a thread placed as the transfers' (a board of its own,
/// its emulated device on a core of its own), measured as they are (the
/// thread's CPU clock, interrupt delivery included: none here). Its
/// `model_us` is the nap's length asked, so its overhead is the wake-up's
/// lateness.
fn naps(cfg: &Config, p: &Point<usize>) -> Result<Sample, Error> {
    let bytes = p.at;
    let share = cfg.iterations(bytes).div_ceil(cfg.rounds.max(1));
    // An emulated board (and the thread's placement) stays until the naps
    // are over, as it does for a point's transfers.
    let (_board, link) = match &cfg.board {
        Some(real) => {
            let engine = real.take()?;
            let link = engine.link();
            real.give_back(engine);
            (None, link)
        }
        None => {
            let (rig, placed) = rig(8 * bytes, cfg.clock, cfg.memory, Box::new(Loopback))?;
            let link = rig.engines[0].link();
            (Some((rig, placed)), link)
        }
    };
    let length = nap_length(cfg, &link, bytes);
    let (mut warm, mut s) = (Samples::default(), Samples::default());
    for k in 0..WARM_UP + share {
        let m = Meter::start(None);
        axi::nap(length);
        let kept = if k < WARM_UP { &mut warm } else { &mut s };
        kept.push(&m, Timing::default());
    }
    Ok(Sample {
        transfers: s,
        block_bytes: bytes,
        model_us: length.as_secs_f64() * 1e6,
    })
}

/// The point's share of the transfers over `engine` (its MM2S stream looped
/// back to its S2MM), whose register window `regs` also is, for the bare
/// baseline; the engine back, unless the proxy driver took it over.
fn transfers<R, I>(
    cfg: &Config,
    p: &Point<usize>,
    engine: Engine<R, I>,
    regs: &dyn RegisterSpace,
) -> Result<(Samples, Option<Engine<R, I>>), Error>
where
    R: RegisterSpace + Send + 'static,
    I: IrqLine + Send + 'static,
{
    let bytes = p.at;
    let (_, c, (path, buffering, partition)) = series(p.series);
    let what = format!("loopback {} {}", bytes_label(bytes), p.series);
    // This round's share of the transfers.
    let share = cfg.iterations(bytes).div_ceil(cfg.rounds.max(1));
    // What the fresh board's first transfers cost (its buffers' first
    // touch, its device thread's first wake-up) is not the point's: they
    // are checked, not kept.
    let (mut warm, mut s) = (Samples::default(), Samples::default());
    let next = || SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    if p.series == PROXY {
        // The kernel-style driver thread takes the engine over: standard
        // I/O only. It starts on the driver's cores (threads inherit the
        // caller's).
        let proxy = proxy(vec![engine])?;
        let mut buf = vec![0u8; bytes];
        for k in 0..WARM_UP + share {
            let seq = next();
            buf.resize(bytes, 0);
            fill(seq, &mut buf);
            let m = Meter::start(Some(&proxy));
            buf = proxy.transfer(buf, bytes)?;
            let kept = if k < WARM_UP { &mut warm } else { &mut s };
            kept.push(&m, proxy.last_timing());
            check(&what, seq, bytes, buf.len(), &buf)?;
        }
        return Ok((s, None));
    }
    let mut tx = engine.pool().alloc::<u8>(bytes)?;
    let mut rx = engine.pool().alloc::<u8>(bytes)?;
    let mut data = vec![0u8; bytes];
    let mut out = vec![0u8; bytes];
    let depth = if buffering == "double" { 2 } else { 1 };
    let split = if partition == "blocks" {
        Partition::Blocks(cfg.block)
    } else {
        Partition::Unique
    };
    for k in 0..WARM_UP + share {
        let seq = next();
        let kept = if k < WARM_UP { &mut warm } else { &mut s };
        if path == "copy" {
            fill(seq, &mut data);
            out.fill(0);
            let m = Meter::start(None);
            let n = engine.send_message(&data, &mut out, split, depth, c)?;
            kept.push(&m, engine.last_timing());
            check(&what, seq, bytes, n, &out)?;
            continue;
        }
        fill(seq, tx.as_mut_slice());
        rx.as_mut_slice().fill(0);
        let m = Meter::start(None);
        let (n, timing) = if p.series == BARE {
            // SAFETY: `regs` is the engine's register window and `tx`, `rx`
            // come from that engine's pool; `recover` halts that engine.
            unsafe {
                super::baseline::two_way(regs, &tx, &mut rx, bytes, || engine.dma().recover())
            }?;
            (bytes, Timing::default())
        } else {
            (
                engine.two_way(&tx, bytes, &mut rx, c)?,
                engine.last_timing(),
            )
        };
        kept.push(&m, timing);
        check(&what, seq, bytes, n, rx.as_slice())?;
    }
    if p.series == BARE {
        // dmaflow's driver gets the engine back in a known state (its
        // register cache forgotten).
        engine.dma().reset()?;
    }
    if c == Completion::Adaptive && path == "zerocopy" {
        // Where this engine's naps ended up: the nap point's length.
        if let Ok(mut aims) = cfg.aims.lock() {
            aims.insert(bytes, engine.dma().nap_aim_ns(Channel::S2mm));
        }
    }
    drop((tx, rx));
    Ok((s, Some(engine)))
}

/// The two-way transfer time, each round's median, over the rounds (us).
fn time(r: &Row) -> Spread {
    r.per_round(|s| &s.transfers.total)
}

/// What the modelled device needs per transfer (us).
fn model_us(r: &Row) -> f64 {
    r.samples.first().map_or(f64::NAN, |s| s.model_us)
}

/// Measured minus modelled: what software and the emulator added to the
/// device's time.
fn overhead_us(r: &Row) -> f64 {
    time(r).median - model_us(r)
}

/// Measured minus the emulator baseline at the same size, in the same
/// rounds (the thinnest driver's time, [`super::baseline`]): what dmaflow's
/// driver added; none for the baseline itself.
fn over_bare_us(r: &Row) -> Option<f64> {
    if r.point.series == NAP {
        return None;
    }
    Some(time(r).median - r.baseline_per_round(|s| &s.transfers.total)?.median)
}

/// The costs of every round's transfers, added up.
fn cost(r: &Row) -> Tally {
    r.samples
        .iter()
        .fold(Tally::default(), |a, s| a.plus(s.transfers.cost))
}

/// The rows' columns.
fn columns() -> Columns<'static, Row> {
    let way = |r: &Row| series(r.point.series).2;
    Columns::new()
        .bytes("bytes", "bytes", |r: &Row| r.point.at)
        .doc("each way")
        .plain("completion", "completion", |r| series(r.point.series).0)
        .doc(
            "poll|yield|irq|adaptive|proxy|bare: the emulator baseline|nap: one timed sleep as \
             long as adaptive's nap, no transfer (the host's floor for a wait that sleeps)",
        )
        .plain("path", "path", move |r| way(r).0)
        .doc("zerocopy|copy")
        .plain("buffering", "buffering", move |r| way(r).1)
        .doc("single|double")
        .plain("partition", "partition", move |r| way(r).2)
        .doc("unique|blocks")
        .kept("block_bytes", |r| {
            r.samples.first().map_or(0, |s| s.block_bytes)
        })
        .doc("the blocks' size, the whole message for unique")
        .fixed("us (median)", "median_us", 2, |r| time(r).median)
        .doc("two-way transfer, each round's median, the median of the rounds")
        .shown("rounds' medians", |r| {
            format!("{:.2}..{:.2}", time(r).min, time(r).max)
        })
        .kept("round_median_us_min", |r| time(r).min)
        .kept("round_median_us_max", |r| time(r).max)
        .kept("rounds", |r| r.rounds())
        .doc("every point takes its turn in every round")
        .fixed("model us", "model_us", 2, model_us)
        .doc("the modelled device at the profile's port clock; 0 on a board; for nap, its length")
        .fixed("overhead us", "overhead_us", 2, overhead_us)
        .doc("median_us over model_us")
        .optional("over bare us", "over_bare_us", 2, over_bare_us)
        .doc("over the baseline, in the same rounds; null for it and for nap")
        .fixed("CPU us", "cpu_us", 2, |r| cost(r).cpu_us())
        .doc("driver threads and interrupt delivery, per transfer")
        .fixed("of it irq delivery", "irq_delivery_us", 2, |r| {
            cost(r).delivery_us()
        })
        .doc(
            "of cpu_us: the emulated interrupt's eventfd write and wake-up, a handler's work \
             on a board",
        )
        .percent("CPU share", "cpu_share", |r| cost(r).cpu_share())
        .doc("cpu_us over the transfers' wall time")
        .fixed("TX us", "tx_us", 2, |r| {
            r.per_round(|s| &s.transfers.tx).median
        })
        .doc("MM2S start to its completion")
        .fixed("RX us", "rx_us", 2, |r| {
            r.per_round(|s| &s.transfers.rx).median
        })
        .doc("S2MM start to its completion")
        .shown("MB/s each way", |r| {
            format!("{:.1}", r.point.at as f64 / time(r).median)
        })
        .fixed("us per byte", "us_per_byte", 4, |r| {
            time(r).median / r.point.at as f64
        })
        .doc("median_us over bytes")
        .plain("transfers", "iterations", |r| cost(r).n)
        .doc("transfers timed, all rounds")
}

/// What was measured.
fn heading(cfg: &Config) -> String {
    on_board(
        format!(
            "two-way transfers on the emulated fabric ({}, PG021 latencies), median per \
             transfer; blocks of {}; fresh data every transfer, checked",
            match cfg.clock {
                Clock::Unlimited => "unlimited clock".to_string(),
                Clock::Rate {
                    mhz,
                    bytes_per_cycle,
                } => format!("{mhz} MHz x {bytes_per_cycle} B"),
            },
            bytes_label(cfg.block)
        ),
        cfg.memory,
    )
}

/// The unique zero-copy (or, for `proxy`, copying) row of a mode at a size.
fn point<'a>(rows: &'a [Row], completion: &str, bytes: usize) -> Option<&'a Row> {
    let name = match completion {
        "proxy" => PROXY.to_string(),
        c => format!("{c} zerocopy"),
    };
    rows.iter()
        .find(|r| r.point.series == name && r.point.at == bytes)
}

/// Issue targets: what software adds to a 64-byte transfer, and what waiting
/// for a 4 KiB one costs the CPU with an interrupt instead of polling.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    for (mode, limit) in [("poll", 1.5), ("irq", 8.0)] {
        if let Some(r) = point(rows, mode, 64) {
            out.push(Target::new(
                format!("64 B two-way, {mode}: overhead over the modelled device < {limit} us"),
                format!(
                    "{:.2} us ({:.2} us measured, {:.2} us modelled)",
                    overhead_us(r),
                    time(r).median,
                    model_us(r)
                ),
                overhead_us(r) < limit,
            ));
        }
    }
    // Adaptive completion: polling's latency, interrupts' CPU.
    if let (Some(a), Some(b)) = (point(rows, "adaptive", 64), point(rows, "bare", 64)) {
        let (a, b) = (time(a).median, time(b).median);
        let over = a - b;
        out.push(Target::new(
            "64 B two-way, adaptive: < 3 us over the bare driver in the same run",
            format!("{over:+.2} us ({a:.2} us against {b:.2} us)"),
            over < 3.0,
        ));
    }
    for (bytes, limit) in [(4096, 1.05), (64 << 10, 0.25)] {
        let cpu = |mode| Some(cost(point(rows, mode, bytes)?).cpu_us());
        if let (Some(a), Some(p)) = (cpu("adaptive"), cpu("poll")) {
            let floor = nap_at(rows, bytes).map_or(String::new(), |n| {
                format!("; {}", floor_clause(n, p, limit))
            });
            out.push(Target::new(
                format!(
                    "host CPU per {} transfer (interrupt delivery included): adaptive <= {:.0} % \
                     of poll's",
                    bytes_label(bytes),
                    100.0 * limit
                ),
                format!(
                    "{a:.2} us against {p:.2} us = {:.0} %{floor}",
                    100.0 * a / p
                ),
                a <= limit * p,
            ));
        }
    }
    if let Some((i, p)) = cpu_at_4k(rows) {
        out.push(Target::new(
            "host CPU per 4 KiB transfer (interrupt delivery included): irq < 20 % of poll's",
            format!("{i:.2} us against {p:.2} us = {:.0} %", 100.0 * i / p),
            i < 0.2 * p,
        ));
    }
    out
}

/// The nap row at `bytes`, where the adaptive wait naps.
fn nap_at(rows: &[Row], bytes: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.point.series == NAP && r.point.at == bytes)
}

/// What one timed sleep (the nap row `n`) costs against polling's `poll` us
/// of CPU per transfer, and whether a wait that sleeps once can reach
/// `limit` of polling's.
fn floor_clause(n: &Row, poll: f64, limit: f64) -> String {
    let f = cost(n).cpu_us();
    let share = 100.0 * f / poll;
    let verdict = if f > limit * poll {
        format!(
            "so no wait that sleeps once per transfer can reach {:.0} % here",
            100.0 * limit
        )
    } else {
        format!(
            "{:.2} us below the target's {:.0} %, left for the rest of the wait",
            limit * poll - f,
            100.0 * limit
        )
    };
    format!(
        "one timed sleep of the nap's {:.1} us costs {f:.2} us of thread CPU on this host \
         ({share:.0} % of polling's), {verdict}",
        model_us(n)
    )
}

/// Host CPU per 4 KiB transfer (us): waiting on the interrupt, and polling.
fn cpu_at_4k(rows: &[Row]) -> Option<(f64, f64)> {
    let cpu = |mode| Some(cost(point(rows, mode, 4096)?).cpu_us());
    Some((cpu("irq")?, cpu("poll")?))
}

/// The answer and the targets: at 64 B what software adds to the modelled
/// device in each mode and what it costs the CPU; at the largest size what
/// copying adds.
fn findings(_: &Config, rows: &[Row]) -> Findings {
    let mut clauses = Vec::new();
    let sizes = || rows.iter().map(|r| r.point.at);
    if let Some(small) = sizes().find(|&b| b == 64).or_else(|| sizes().min()) {
        let modes = per_mode(|c| {
            point(rows, c, small).map(|r| {
                format!(
                    "{c} +{:.1} us ({:.1} us CPU)",
                    overhead_us(r),
                    cost(r).cpu_us()
                )
            })
        });
        if let Some(model) = point(rows, "poll", small).map(model_us) {
            clauses.push(format!(
                "a {} two-way transfer needs {:.2} us on the modelled device; software adds \
                 {modes}",
                bytes_label(small),
                model,
            ));
        }
    }
    let over_bare: Vec<String> = [64, 256 << 10]
        .iter()
        .filter_map(|&b| {
            let modes: Vec<String> = ["poll", "irq"]
                .iter()
                .filter_map(|&c| {
                    let r = point(rows, c, b)?;
                    Some(format!("{c} {:+.2} us", over_bare_us(r)?))
                })
                .collect();
            (!modes.is_empty()).then(|| format!("{} {}", bytes_label(b), modes.join(", ")))
        })
        .collect();
    if !over_bare.is_empty() {
        clauses.push(format!(
            "over the emulator baseline (the thinnest driver on the same fabric, in the same \
             rounds) dmaflow's driver adds: {}",
            over_bare.join("; ")
        ));
    }
    // The adaptive target's size: what the host's sleep floor leaves.
    let big = 64 << 10;
    if let (Some(n), Some(a), Some(p)) = (
        nap_at(rows, big),
        point(rows, "adaptive", big),
        point(rows, "poll", big),
    ) {
        clauses.push(format!(
            "at {} adaptive takes {:.2} us per transfer against polling's {:.2} us, at {:.2} us \
             of host CPU against {:.2} ({:.0} %); one timed sleep as long as its nap ({:.1} us) \
             costs {:.2} us of thread CPU and wakes {:.1} us late, so the rest of the \
             transfer (start, looks, spin, line) costs {:.2} us",
            bytes_label(big),
            time(a).median,
            time(p).median,
            cost(a).cpu_us(),
            cost(p).cpu_us(),
            100.0 * cost(a).cpu_us() / cost(p).cpu_us(),
            model_us(n),
            cost(n).cpu_us(),
            overhead_us(n),
            cost(a).cpu_us() - cost(n).cpu_us()
        ));
    }
    if let Some((i, p)) = cpu_at_4k(rows) {
        clauses.push(format!(
            "at 4 KiB waiting on the interrupt costs {:.0} % of polling's CPU ({i:.1} against \
             {p:.1} us)",
            100.0 * i / p
        ));
    }
    if let Some(large) = sizes().max()
        && let Some(zero) = point(rows, "poll", large)
        && let Some(copy) = rows
            .iter()
            .find(|r| (r.point.series, r.point.at) == ("poll copy single unique", large))
    {
        clauses.push(format!(
            "at {} copying through driver buffers takes {:.0} us against {:.0} us zero-copy",
            bytes_label(large),
            time(copy).median,
            time(zero).median
        ));
    }
    Findings {
        clauses,
        targets: targets(rows),
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::harness::Experiment;

    #[test]
    fn tiny_sweep_checks_its_data_and_reports_every_point() {
        let mut p = vec![0u8; 64];
        fill(3, &mut p);
        check("t", 3, 64, 64, &p).unwrap();
        // The previous transfer's data, or nothing at all, is not this one's.
        assert!(check("t", 4, 64, 64, &p).is_err());
        assert!(check("t", 3, 64, 64, &[0u8; 64]).is_err());
        assert!(check("t", 3, 64, 63, &p).is_err());
        let cfg = Config::at(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        // Per completion mode (poll, yield, irq, adaptive): 8 B zerocopy + copy
        // single/double; 4096 B adds blocks of 1 KiB for both; one proxy and one
        // emulator baseline row per size.
        assert_eq!(rows.len(), 4 * 3 + 4 * 5 + 2 + 2);
        // The baseline moved checked data too, and every driver row is set
        // against it.
        let bare: Vec<&Row> = rows.iter().filter(|r| r.point.series == BARE).collect();
        assert_eq!(bare.len(), 2);
        assert!(bare.iter().all(|b| time(b).median > 0.0));
        let others = rows.iter().filter(|r| r.point.series != BARE);
        assert!(others.clone().all(|r| over_bare_us(r).is_some()));
        for r in rows
            .iter()
            .filter(|r| series(r.point.series).2.2 == "blocks")
        {
            assert_eq!((r.point.at, r.samples[0].block_bytes), (4096, 1024));
        }
        // The tiny run's link is the Zynq-7000's HP port, clocked.
        assert_eq!(cfg.clock, dmaflow::sim::Profile::ZYNQ7000.port);
        for r in &rows {
            let (median, tx, rx) = (
                time(r).median,
                r.per_round(|s| &s.transfers.tx).median,
                r.per_round(|s| &s.transfers.rx).median,
            );
            // Every round's share of the 30 transfers, in both rounds.
            assert_eq!((r.rounds(), cost(r).n), (2, 30), "{}", r.point.series);
            // Each direction is timed inside the whole call.
            assert!(tx <= median * 1.5 + 1.0, "{r:?}");
            assert!(rx <= median * 1.5 + 1.0, "{r:?}");
            assert!(median > 0.0 && median.is_finite(), "{r:?}");
            // On a clocked link the device time is a floor: 4 KiB at
            // 1200 MB/s is 3.41 us; no transfer beats the device.
            assert!(r.point.at != 4096 || model_us(r) > 3.41, "{r:?}");
            assert!(time(r).min >= model_us(r), "{r:?}");
            // The driver's threads cannot use more CPU than two cores' worth
            // of the time they ran (with room for the CPU clock's jitter over
            // a few microseconds: 2.09 was seen on an idle machine), and
            // polling is never free.
            assert!(cost(r).cpu_share() <= 2.5, "{r:?}");
            if series(r.point.series).0 == "poll" {
                assert!(cost(r).cpu_us() > 0.0, "{r:?}");
            }
        }
        assert_eq!(rows.iter().filter(|r| r.point.series == PROXY).count(), 2);
        let report = EXPERIMENT.report(&cfg, &rows);
        let j = report.json;
        assert_eq!(j["experiment"], "loopback");
        assert_eq!(j["rows"][0]["bytes"], 8);
        assert_eq!(j["rows"][0]["buffering"], "single");
        assert_eq!(j["rows"][0]["partition"], "unique");
        for k in [
            "cpu_us",
            "model_us",
            "overhead_us",
            "cpu_share",
            "over_bare_us",
        ] {
            assert!(j["rows"][0][k].is_number(), "no {k}");
        }
        assert!(report.text.contains("zerocopy"));
        assert_eq!(report.plots.len(), 4);
        // The time plot carries each point's rounds.
        let time_plot = &report.plots[0].series[0];
        assert_eq!(time_plot.interval.len(), time_plot.points.len());
        assert_eq!(EXPERIMENT.board_mode(), Ok(Mode::Direct));
    }

    #[test]
    fn the_nap_point_sleeps_as_long_as_adaptive_naps_and_reports_its_floor() {
        // 64 KiB at the Zynq-7000's port: the adaptive wait naps (about 55 us
        // of modelled two-way time), so a nap point stands beside it.
        let cfg = Config {
            sizes: vec![64 << 10],
            ..Config::at(&Setup::TINY)
        };
        assert!(naps_at(&cfg, 64 << 10) && !naps_at(&cfg, 4096));
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        let nap = nap_at(&rows, 64 << 10).expect("a nap row at 64 KiB");
        // No transfer to time in either direction, nothing over the bare
        // driver, and every round took its naps (1 MiB a point: 16).
        assert_eq!((nap.rounds(), cost(nap).n), (2, 16));
        assert_eq!(over_bare_us(nap), None);
        assert_eq!(nap.per_round(|s| &s.transfers.tx).median, 0.0);
        // The nap's length is the adaptive S2MM channel's aim around the
        // expected end (at most NAP_LEAD_MAX before, NAP_LAG_MAX after).
        let aim = cfg.aims.lock().unwrap()[&(64 << 10)];
        assert!(
            (-(axi::NAP_LEAD_MAX.as_nanos() as i64)..=axi::NAP_LAG_MAX.as_nanos() as i64)
                .contains(&aim),
            "{aim}"
        );
        let adaptive = point(&rows, "adaptive", 64 << 10).unwrap();
        assert!(model_us(nap) >= NAP_WAKE.as_secs_f64() * 1e6, "{nap:?}");
        assert!(model_us(nap) < model_us(adaptive) + 30.0, "{nap:?}");
        // A timed sleep never ends before its time, and it costs the
        // sleeping thread some CPU (entering and leaving the kernel), at
        // most one core's worth of its time (with the CPU clock's jitter).
        assert!(nap.per_round(|s| &s.transfers.total).min >= model_us(nap));
        let floor = cost(nap).cpu_us();
        assert!(floor > 0.0 && cost(nap).cpu_share() <= 1.5, "{floor}");
        // The 64 KiB adaptive target states the floor beside the figure.
        let t = targets(&rows);
        let big = t
            .iter()
            .find(|t| t.what.contains("64 KiB transfer"))
            .expect("the 64 KiB adaptive target");
        assert!(big.found.contains("one timed sleep"), "{}", big.found);
        assert!(
            big.found.contains(&format!("{floor:.2} us")),
            "{}",
            big.found
        );
        let answer = findings(&cfg, &rows).clauses.join("; ");
        assert!(answer.contains("wakes"), "{answer}");
    }
}
