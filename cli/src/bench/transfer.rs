//! `dmaflow bench transfer`: a stream of packets through a ring of DMA buffers on
//! a scatter-gather engine (paper 004's tables): zero-copy with and without
//! explicit cache maintenance, and standard I/O (a copy each way), buffer sizes
//! 64 B to 32 KiB, ring sizes 16 to 1024 buffers, the fabric clocked at the
//! board profile's HP port and unlimited; polling and interrupt completion; and
//! the zero-copy stream again while another thread loads a core. Every packet
//! is checked on the way back. The conditions of one packet size on one board
//! take turns run by run, each run on a fresh ring; the boards (a link and a
//! memory each) are measured one after another.

use std::cell::RefCell;
use std::fmt::{self, Display};
use std::time::{Duration, Instant};

use dmaflow::dma::{Completion, Engine, Link, PacketRing, Starved};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::cpu::{allowed_cores, default_scheduling, request_slice};
use dmaflow::platform::sim::SimRegisters;
use dmaflow::platform::{IrqLine, MemoryModel, RegisterSpace};
use dmaflow::rig::{Placement, Rig, policy_for};
use dmaflow::sim::{Clock, Loopback, Profile};

use super::app::{App, Work};
use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point};
use super::harness::{OnGpu, Setup, Tables, Tier, bytes_label, clock_label};
use super::meter::{Meter, Tally};
use super::on_board::{BoardRig, Mode};
use super::plot::{LinePlot, XAxis};
use super::report::Target;

/// `dmaflow bench transfer`.
pub static EXPERIMENT: Bench<Config, At, Sample> = Bench {
    name: "transfer",
    on_gpu: Some(OnGpu::Gpu(Tables::MOVED)),
    board: Some((Mode::ScatterGather, on_the_board)),
    question: "A stream of packets through a ring of DMA buffers (paper 004).",
    conditions: Conditions {
        timed: "the stream of packets from the first send to the last packet received, on \
                the driver's thread",
        against: "the modelled link (share of the modelled link) and the copying path",
        model: "the link rate, PG021's latencies and model_us: a stream at 100 % of the \
                link is what the emulator's clock allows, the overhead beside it is dmaflow's",
        paper: USER_X86,
    },
    prepare: |cfg, _| {
        cfg.cores = allowed_cores(None)?;
        Ok(())
    },
    turns_within: Some((group_of, "board and packet size")),
    heading: |cfg| {
        format!(
            "packets through a ring of DMA buffers each way (scatter-gather, {} descriptors \
             per TAILDESC write, {} buffers unless swept), link = {} HP port with PG021 \
             latencies or unlimited",
            cfg.batch, cfg.slots, cfg.profile.description
        )
    },
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// What to measure.
pub struct Config {
    /// Buffer (packet) sizes in bytes.
    pub sizes: Vec<usize>,
    /// Packets per run at most.
    pub max_packets: usize,
    /// Bytes per run at most (bounds the packets of large sizes).
    pub bytes_per_run: usize,
    /// Rounds per point.
    pub rounds: usize,
    /// Buffers in the ring per direction.
    pub slots: usize,
    /// Descriptors handed to the engine per TAILDESC write.
    pub batch: usize,
    /// Ring sizes (buffers per direction) swept at the unlimited clock.
    pub ring_sizes: Vec<usize>,
    /// Packet sizes of the ring-size sweep.
    pub ring_sweep_sizes: Vec<usize>,
    /// The board whose HP port clocks the link.
    pub profile: Profile,
    /// The cores the run may use, found before the first round: where the
    /// emulated device gets a core of its own and a load may run.
    cores: Vec<usize>,
    /// A real board's engine in loopback (`--board`), measured in place of
    /// the emulated boards.
    board: Option<BoardRig>,
    /// What the points of one board run on, made at the first of them and
    /// kept until another board's.
    held: RefCell<Option<Held>>,
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            sizes: (6..=15).map(|s| 1usize << s).collect(),
            max_packets: 400_000,
            bytes_per_run: 128 << 20,
            rounds: 5,
            slots: 256,
            batch: 16,
            ring_sizes: vec![16, 64, 256, 1024],
            ring_sweep_sizes: vec![64, 4096],
            profile: setup.profile,
            cores: Vec::new(),
            board: None,
            held: RefCell::new(None),
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                max_packets: 100_000,
                bytes_per_run: 24 << 20,
                rounds: 3,
                ..full
            },
            Tier::Tiny => Config {
                sizes: vec![64, 4096],
                max_packets: 2_000,
                bytes_per_run: 1 << 20,
                rounds: 1,
                slots: 16,
                batch: 4,
                ring_sizes: vec![8, 32],
                ring_sweep_sizes: vec![64],
                ..full
            },
        }
    }
}

/// Keeps the board's engine for the run (`--board`), and the cores a load
/// may run on.
fn on_the_board(cfg: &mut Config, rig: BoardRig, _: &mut dyn FnMut(&str)) -> Result<(), Error> {
    cfg.cores = allowed_cores(None)?;
    cfg.board = Some(rig);
    Ok(())
}

/// A board as the points see it: its link, its memory, and which conditions
/// are measured on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Board {
    /// The `clock` column: the modelled link's rate, `unlimited`, or `board`.
    pub clock: String,
    /// The modelled link (`model_us`); none on a real board.
    pub model: Option<Clock>,
    /// The emulated board's memory.
    pub memory: MemoryModel,
    /// Whether buffers are cleaned and invalidated around each transfer.
    pub cache_maintenance: bool,
    /// Whether interrupt completion is measured beside polling.
    pub irq: bool,
    /// Whether the zero-copy stream is measured again beside a loaded core.
    pub loaded: bool,
    /// Whether ring sizes other than the configured one are swept.
    pub ring_sweep: bool,
}

/// Where a point is: its board, its packet size and its ring.
#[derive(Debug, Clone, PartialEq)]
pub struct At {
    /// The board.
    pub board: Board,
    /// Packet size in bytes.
    pub bytes: usize,
    /// Buffers in the ring per direction.
    pub slots: usize,
}

impl Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cache={} {} x {}",
            self.board.clock,
            self.board.cache_maintenance,
            self.slots,
            bytes_label(self.bytes)
        )
    }
}

/// One condition: a point's series.
#[derive(Debug, Clone, Copy)]
struct Condition {
    /// The series' name.
    series: &'static str,
    /// How the ring waits.
    completion: Completion,
    /// `zerocopy`, `copy`, `burst`, or `bare` (the scatter-gather ring
    /// driven by hand).
    path: &'static str,
    /// Where a load runs beside the stream (`driver`, `device`, `any`).
    load: Option<&'static str>,
}

impl Condition {
    /// The `completion` column: the mode's name, `bare` for the bare ring.
    fn completion_name(&self) -> &'static str {
        if self.path == "bare" {
            "bare"
        } else {
            self.completion.name()
        }
    }
}

const fn alone(series: &'static str, completion: Completion, path: &'static str) -> Condition {
    Condition {
        series,
        completion,
        path,
        load: None,
    }
}

const fn beside(series: &'static str, completion: Completion, load: &'static str) -> Condition {
    Condition {
        series,
        completion,
        path: "zerocopy",
        load: Some(load),
    }
}

/// Every condition, in a packet size's order.
const CONDITIONS: [Condition; 15] = [
    alone("poll zerocopy", Completion::Poll, "zerocopy"),
    alone("poll copy", Completion::Poll, "copy"),
    alone("poll burst", Completion::Poll, "burst"),
    alone("bare", Completion::Poll, "bare"),
    alone("irq zerocopy", Completion::Irq, "zerocopy"),
    alone("adaptive zerocopy", Completion::Adaptive, "zerocopy"),
    beside("poll beside driver", Completion::Poll, "driver"),
    beside("irq beside driver", Completion::Irq, "driver"),
    beside("adaptive beside driver", Completion::Adaptive, "driver"),
    beside("poll beside device", Completion::Poll, "device"),
    beside("irq beside device", Completion::Irq, "device"),
    beside("adaptive beside device", Completion::Adaptive, "device"),
    beside("poll beside any", Completion::Poll, "any"),
    beside("irq beside any", Completion::Irq, "any"),
    beside("adaptive beside any", Completion::Adaptive, "any"),
];

/// The condition of `series`.
fn condition(series: &str) -> Result<&'static Condition, Error> {
    CONDITIONS
        .iter()
        .find(|c| c.series == series)
        .ok_or_else(|| Error::peer("transfer")(format!("no condition {series}")))
}

/// The condition of a row (every row's series is one of [`CONDITIONS`]).
fn of(r: &Row) -> Condition {
    condition(r.point.series).map_or(alone("?", Completion::Poll, "?"), |c| *c)
}

/// One run of one point.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Seconds the timed run took.
    pub seconds: f64,
    /// Packets the run moved.
    pub packets: usize,
    /// 10^6 bytes per second one way.
    pub mbytes_per_s: f64,
    /// Packets per second.
    pub packets_per_s: f64,
    /// Host CPU of the driver thread per packet, in microseconds.
    pub cpu_us: f64,
    /// Host CPU over wall time while streaming.
    pub cpu_share: f64,
    /// What the ring counted of its stream; none for the bare ring.
    pub starved: Option<Starved>,
    /// The emulated device thread's CPU per packet, in microseconds (`NaN`
    /// on a board).
    pub device_us: f64,
    /// Burst runs: the driver's own CPU per packet, in microseconds (`NaN`
    /// elsewhere).
    pub driver_us: f64,
    /// With cache maintenance: this CPU's own maintenance of one packet, each
    /// repeat's microseconds (none without, or where the CPU offers none in
    /// user space).
    pub cache_us: Vec<f64>,
    /// The scheduling the driver's and the device's threads were granted.
    pub sched: String,
}

/// A point over the rounds.
pub type Row = super::frame::Row<At, Sample>;

/// Repeats of the cache maintenance timed beside each maintained run.
const CACHE_REPEATS: usize = 201;

/// What this CPU's own cache maintenance of a `bytes` packet costs
/// (`clflushopt` on x86-64, `dc civac` on AArch64): clean the lines of a
/// packet just written (as before MM2S reads it), clean and invalidate those
/// of another (as around S2MM), timed together, in microseconds, each of
/// `repeats`; none where the CPU offers no maintenance in user space.
pub fn cpu_cache_times(bytes: usize, repeats: usize) -> Vec<f64> {
    use dmaflow::platform::cache::{Op, available, maintain};
    if !available() {
        return Vec::new();
    }
    let mut out = vec![0u8; bytes.max(1)];
    let mut back = vec![0u8; bytes.max(1)];
    let mut times = Vec::with_capacity(repeats);
    for k in 0..repeats.max(1) {
        // Dirty every line of both, as a producer and a consumer would.
        out.fill(k as u8);
        back.fill(!(k as u8));
        let t0 = std::time::Instant::now();
        maintain(Op::Clean, out.as_ptr(), out.len());
        maintain(Op::CleanInvalidate, back.as_ptr(), back.len());
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box((&out, &back));
    }
    times
}

fn fill(seq: u64, p: &mut [u8]) {
    let n = p.len().min(8);
    p[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    p[n..].fill(seq as u8 ^ 0x5A);
}

fn intact(seq: u64, len: usize, p: &[u8]) -> bool {
    let n = len.min(8);
    p.len() == len
        && p[..n] == seq.to_le_bytes()[..n]
        // An OR of differences, without early exit, so that it vectorises.
        && p[n..].iter().fold(0u8, |acc, &b| acc | (b ^ (seq as u8 ^ 0x5A))) == 0
}

/// What the ring counted of its stream between `before` and now
/// ([`Sample::starved`]).
fn starved_since<R: RegisterSpace, I: IrqLine>(
    ring: &PacketRing<'_, R, I>,
    before: Starved,
) -> Starved {
    let now = ring.starved();
    Starved {
        underruns: now.underruns - before.underruns,
        overruns: now.overruns - before.overruns,
    }
}

/// Streams `packets` packets of `bytes` through `ring`; returns the seconds
/// taken and the times the ring ran dry or full.
fn stream<R: RegisterSpace, I: IrqLine>(
    ring: &mut PacketRing<'_, R, I>,
    bytes: usize,
    packets: usize,
    copy: bool,
    what: &str,
) -> Result<(f64, Starved), Error> {
    stream_stalled(ring, bytes, packets, copy, what, Duration::ZERO)
}

/// [`stream`], the driver away for `stall` after each refill of the ring (a
/// driver descheduled that long).
fn stream_stalled<R: RegisterSpace, I: IrqLine>(
    ring: &mut PacketRing<'_, R, I>,
    bytes: usize,
    packets: usize,
    copy: bool,
    what: &str,
    stall: Duration,
) -> Result<(f64, Starved), Error> {
    let slots = ring.slots() as u64;
    let mut src = vec![0u8; bytes];
    let mut dst = vec![0u8; bytes];
    let (mut sent, mut received) = (0u64, 0u64);
    let total = packets as u64;
    let bad = |seq: u64| corrupted_packet(what, seq);
    let before = ring.starved();
    let t0 = Instant::now();
    while received < total {
        while sent < total && sent - received < slots {
            if copy {
                fill(sent, &mut src);
                ring.send(&src)?;
            } else {
                ring.send_with(bytes, |p| fill(sent, p))?;
            }
            sent += 1;
        }
        if !stall.is_zero() {
            std::thread::sleep(stall);
        }
        let mut first = true;
        while received < total {
            let seq = received;
            let ok = if copy {
                let got = if first {
                    Some(ring.recv(&mut dst)?)
                } else {
                    ring.try_recv_with(|p| {
                        dst[..p.len()].copy_from_slice(p);
                        p.len()
                    })?
                };
                got.map(|n| intact(seq, bytes, &dst[..n]))
            } else if first {
                Some(ring.recv_with(|p| intact(seq, bytes, p))?)
            } else {
                ring.try_recv_with(|p| intact(seq, bytes, p))?
            };
            match ok {
                Some(true) => received += 1,
                Some(false) => return Err(bad(seq)),
                None => break,
            }
            first = false;
        }
    }
    let t = t0.elapsed().as_secs_f64();
    Ok((t, starved_since(ring, before)))
}

/// How much of the link a stream's ring holds beside a load: more than two
/// scheduler slices of a busy core (about 1.5 ms each on two CPUs), so that a
/// driver kept off its core that long still finds buffers to fill.
pub const LOADED_RING: Duration = Duration::from_millis(4);

/// The most buffers a ring sized by time gets (64 B packets would need tens
/// of thousands for [`LOADED_RING`]; the small-packet rows are not targeted).
const LOADED_RING_MAX: usize = 4096;

/// The scheduling slice the driver's and the emulated device's threads ask
/// for: EEVDF's shortest, so that each is picked soon after it wakes beside a
/// busy program.
pub const STREAM_SLICE: Duration = Duration::from_micros(100);

/// Streams `packets` packets of `bytes` through `ring` by the burst: as many
/// sent as the ring has room for with one TAILDESC write, then every packet
/// that has arrived taken in one pass; returns the seconds taken and the
/// times the ring ran dry or full.
fn stream_burst<R: RegisterSpace, I: IrqLine>(
    ring: &mut PacketRing<'_, R, I>,
    bytes: usize,
    packets: usize,
    what: &str,
) -> Result<(f64, Starved), Error> {
    let slots = ring.slots() as u64;
    let (mut sent, mut received) = (0u64, 0u64);
    let total = packets as u64;
    let before = ring.starved();
    let t0 = Instant::now();
    while received < total {
        let room = (total - sent).min(slots - (sent - received)) as usize;
        if room > 0 {
            let from = sent;
            sent += ring.send_burst_with(room, bytes, |i, p| fill(from + i as u64, p))? as u64;
        }
        received = take_checked(ring, (sent - received) as usize, received, bytes, what)?;
    }
    let t = t0.elapsed().as_secs_f64();
    Ok((t, starved_since(ring, before)))
}

/// The driver's own CPU for `packets` packets of `bytes` by the burst: the
/// ring filled, the whole burst awaited outside the measurement (polling
/// [`PacketRing::arrived`], bounded by the driver's timeout), then taken in
/// one pass; only the thread CPU time inside `send_burst_with` and
/// `recv_burst_with` is counted (the fill and check of the data included,
/// as in every row). Returns the CPU time in all.
fn burst_driver_cpu<R: RegisterSpace, I: IrqLine>(
    ring: &mut PacketRing<'_, R, I>,
    bytes: usize,
    packets: usize,
    patience: Duration,
    what: &str,
) -> Result<Duration, Error> {
    let slots = ring.slots() as u64;
    let (mut sent, mut received) = (0u64, 0u64);
    let total = packets as u64;
    let mut cpu = Tally::default();
    while received < total {
        let meter = Meter::start(None);
        while sent < total && sent - received < slots {
            let room = (total - sent).min(slots - (sent - received)) as usize;
            let from = sent;
            sent += ring.send_burst_with(room, bytes, |i, p| fill(from + i as u64, p))? as u64;
        }
        cpu.add(meter.stop());
        let burst = (sent - received) as usize;
        let t0 = Instant::now();
        while !ring.arrived(burst) {
            if t0.elapsed() > patience {
                return Err(Error::peer("transfer")(format!(
                    "{what}: {burst} packets did not arrive within {patience:?}"
                )));
            }
            std::hint::spin_loop();
        }
        let meter = Meter::start(None);
        received = take_checked(ring, burst, received, bytes, what)?;
        cpu.add(meter.stop());
    }
    Ok(cpu.cost().cpu)
}

/// Takes `count` arrived packets from `ring` in one pass, each checked
/// against the sequence numbered from `first`; returns the number after the
/// last packet taken.
fn take_checked<R: RegisterSpace, I: IrqLine>(
    ring: &mut PacketRing<'_, R, I>,
    count: usize,
    first: u64,
    bytes: usize,
    what: &str,
) -> Result<u64, Error> {
    let mut bad = None;
    let mut seq = first;
    ring.recv_burst_with(count, |p| {
        if bad.is_none() && !intact(seq, bytes, p) {
            bad = Some(seq);
        }
        seq += 1;
    })?;
    match bad {
        Some(seq) => Err(corrupted_packet(what, seq)),
        None => Ok(seq),
    }
}

/// The error for packet `seq` of a stream that arrived other than sent.
fn corrupted_packet(what: &str, seq: u64) -> Error {
    Error::Corrupted {
        what: format!("{what}: packet {seq}"),
        got: 0,
        expected: seq as u32,
    }
}

/// The boards measured, one after another: on the emulated fabric paper
/// 004's two conditions (a coherent port with no maintenance, and a
/// non-coherent one with explicit cache control), each at the profile's HP
/// port and unlimited; on a real board (`--board`) that board at its own
/// clock and cache policy (explicit maintenance where u-dma-buf says the
/// memory is not coherent), every condition.
fn boards(cfg: &Config) -> Vec<Board> {
    if let Some(b) = &cfg.board {
        return vec![Board {
            clock: "board".into(),
            model: None,
            memory: MemoryModel::Coherent,
            cache_maintenance: b.board.pool().policy() == CachePolicy::Explicit,
            irq: true,
            loaded: true,
            ring_sweep: true,
        }];
    }
    let hp = cfg.profile.port;
    let mut v = Vec::new();
    for (cache_maintenance, memory) in [
        (false, MemoryModel::Coherent),
        (true, MemoryModel::NonCoherent),
    ] {
        for clock in [hp, Clock::Unlimited] {
            v.push(Board {
                clock: clock_label(clock),
                model: Some(clock),
                memory,
                cache_maintenance,
                irq: !cache_maintenance,
                loaded: !cache_maintenance && clock == hp,
                ring_sweep: !cache_maintenance && clock == Clock::Unlimited,
            });
        }
    }
    v
}

/// Where a load may run: beside the driver (what a board sees) and beside
/// the emulated device (the emulator's own share of a loss) where the device
/// gets a core of its own, else wherever the scheduler puts it.
fn loads(cfg: &Config) -> &'static [&'static str] {
    if cfg.board.is_none() && cfg.cores.len() >= 2 {
        &["driver", "device"]
    } else {
        &["any"]
    }
}

/// The link a board's ring is sized by beside a load.
fn link_of(cfg: &Config, board: &Board) -> Link {
    match &cfg.board {
        Some(b) => b.engine.link(),
        None => Link {
            bytes_per_s: board.model.and_then(|c| c.bytes_per_s()),
            ..Link::default()
        },
    }
}

/// Every board, packet size by packet size, each size's conditions in their
/// order; the ring-size sweep's rings after them.
fn points(cfg: &Config) -> Vec<Point<At>> {
    let mut v = Vec::new();
    for board in boards(cfg) {
        let swept = |bytes| board.ring_sweep && cfg.ring_sweep_sizes.contains(&bytes);
        let mut sizes = cfg.sizes.clone();
        sizes.extend(
            cfg.ring_sweep_sizes
                .iter()
                .filter(|&&b| swept(b) && !cfg.sizes.contains(&b)),
        );
        for bytes in sizes {
            let mut add = |series, slots| {
                v.push(Point {
                    series,
                    at: At {
                        board: board.clone(),
                        bytes,
                        slots,
                    },
                })
            };
            if cfg.sizes.contains(&bytes) {
                // Packets by the burst, and the emulator baseline beside
                // them: a bare scatter-gather ring, same work per packet.
                for series in ["poll zerocopy", "poll copy", "poll burst", "bare"] {
                    add(series, cfg.slots);
                }
                if board.irq {
                    // What waiting on the interrupt costs and saves.
                    add("irq zerocopy", cfg.slots);
                    add("adaptive zerocopy", cfg.slots);
                }
                if board.irq && board.loaded {
                    // Another program on a core: polling, interrupts,
                    // adaptive, the ring sized by time. Whole batches: a ring
                    // whose receive buffers go back in part batches can keep
                    // the oldest packet's buffer from S2MM.
                    let batch = cfg.batch.max(1);
                    let slots = link_of(cfg, &board)
                        .slots_for(LOADED_RING, bytes)
                        .map_or(cfg.slots, |n| {
                            (n.div_ceil(batch) * batch).clamp(cfg.slots, LOADED_RING_MAX)
                        });
                    for &load in loads(cfg) {
                        for c in CONDITIONS.iter().filter(|c| c.load == Some(load)) {
                            add(c.series, slots);
                        }
                    }
                }
            }
            if swept(bytes) {
                for &slots in cfg.ring_sizes.iter().filter(|&&s| s != cfg.slots) {
                    add("poll zerocopy", slots);
                }
            }
        }
    }
    v
}

/// The points that take turns together: one board's at one packet size.
fn group_of(p: &Point<At>) -> String {
    format!(
        "{} {} {}",
        p.at.board.clock, p.at.board.cache_maintenance, p.at.bytes
    )
}

/// Packets per run of `at`.
fn packets_of(cfg: &Config, at: &At) -> usize {
    (cfg.bytes_per_run / at.bytes.max(1))
        .min(cfg.max_packets)
        .max(at.slots)
}

/// The scheduling slice asked for while one board's points run, as granted;
/// the bench's thread goes back to the kernel's default when it drops.
struct Sliced(String);

impl Drop for Sliced {
    fn drop(&mut self) {
        let _ = default_scheduling(None);
    }
}

/// What the points of one board run on (fields drop in order: the
/// scheduling, then the emulated board).
struct Held {
    /// The scheduling the threads were granted.
    sched: Sliced,
    /// The board's points' board.
    board: Board,
    /// The emulated board; none on a real one.
    emulated: Option<Emulated>,
}

/// An emulated board with its device thread on a core of its own.
struct Emulated {
    /// The engine's register window, for the bare ring.
    regs: SimRegisters,
    /// Where the device and the driver run (given back when it drops).
    placed: Placement,
    /// The board.
    rig: Rig,
}

/// The DMA memory an emulated board needs: the largest ring each way, or a
/// ring sized by time beside a load.
fn ddr(cfg: &Config) -> usize {
    let largest = cfg.sizes.iter().copied().max().unwrap_or(64);
    let most = cfg.ring_sizes.iter().copied().fold(cfg.slots, usize::max);
    // A ring sized by time holds LOADED_RING of the link, each way.
    let timed = cfg
        .profile
        .port
        .bytes_per_s()
        .map_or(0.0, |r| r * LOADED_RING.as_secs_f64()) as usize
        + 2 * largest;
    (2 * (most * largest).max(timed) + (1 << 20)).next_power_of_two()
}

/// What `board`'s points run on: the real board's engine, or a new emulated
/// board; the driver's (and the device's) thread asking for a short slice.
fn hold(cfg: &Config, board: &Board) -> Result<Held, Error> {
    let Some(clock) = board.model.filter(|_| cfg.board.is_none()) else {
        let sched = Sliced(format!("driver {}", request_slice(None, STREAM_SLICE)));
        return Ok(Held {
            sched,
            board: board.clone(),
            emulated: None,
        });
    };
    let rig = Rig::with_model(
        ddr(cfg),
        clock,
        true,
        policy_for(board.memory),
        board.memory,
        Box::new(Loopback),
    )?;
    let placed = rig.dedicate_core()?;
    let sched = Sliced(format!(
        "driver {}; device {}",
        request_slice(None, STREAM_SLICE),
        rig.fabric.request_device_slice(STREAM_SLICE)
    ));
    let regs = rig.board.registers(0)?;
    Ok(Held {
        sched,
        board: board.clone(),
        emulated: Some(Emulated { regs, placed, rig }),
    })
}

/// One run of one point on its board (made at the board's first point).
fn measure(cfg: &Config, p: &Point<At>) -> Result<Sample, Error> {
    let c = condition(p.series)?;
    let mut held = cfg.held.borrow_mut();
    if held.as_ref().is_none_or(|h| h.board != p.at.board) {
        // The last board and its scheduling go before the next is made.
        *held = None;
        *held = Some(hold(cfg, &p.at.board)?);
    }
    let Some(h) = held.as_ref() else {
        return Err(Error::peer("transfer")("no board held"));
    };
    let sched = &h.sched.0;
    match (&h.emulated, &cfg.board) {
        (Some(e), _) => {
            let cores = match (c.load, e.placed.device_core) {
                (Some("device"), Some(d)) => vec![d],
                (Some("driver"), Some(_)) => e.placed.host_cores.clone(),
                _ => e.placed.all_cores().to_vec(),
            };
            let device = || e.rig.fabric.device_cpu_time().ok();
            let on = On {
                engine: &e.rig.engines[0],
                regs: &e.regs,
                device: &device,
                load: &cores,
                sched,
            };
            run(cfg, c, &p.at, &on)
        }
        (None, Some(b)) => {
            let on = On {
                engine: &b.engine,
                regs: &b.registers,
                device: &|| None,
                load: &cfg.cores,
                sched,
            };
            run(cfg, c, &p.at, &on)
        }
        (None, None) => Err(Error::peer("transfer")("no engine to measure")),
    }
}

/// The engine a run streams through, and what it reads beside it.
struct On<'a, R: RegisterSpace, I: IrqLine> {
    /// dmaflow's driver.
    engine: &'a Engine<R, I>,
    /// The engine's register window, for the bare ring.
    regs: &'a dyn RegisterSpace,
    /// The emulated device thread's CPU time (`None` on a board).
    device: &'a dyn Fn() -> Option<Duration>,
    /// The cores a load runs on.
    load: &'a [usize],
    /// The scheduling the threads were granted.
    sched: &'a str,
}

/// One run of condition `c` at `at`: a short run first so that the caches
/// and the device thread are warm, then the timed one; a loading application
/// beside it where `c` says.
fn run<R: RegisterSpace, I: IrqLine>(
    cfg: &Config,
    c: &Condition,
    at: &At,
    on: &On<'_, R, I>,
) -> Result<Sample, Error> {
    let bytes = at.bytes;
    let packets = packets_of(cfg, at);
    let what = format!(
        "transfer {} {} {} cache={}{} {} x {}",
        at.board.clock,
        c.completion.name(),
        c.path,
        at.board.cache_maintenance,
        c.load
            .map_or(String::new(), |l| format!(" loaded ({l} core)")),
        at.slots,
        bytes_label(bytes)
    );
    let per_packet = |d: Duration| d.as_secs_f64() * 1e6 / packets as f64;
    let device_since = |before: Option<Duration>| match (before, (on.device)()) {
        (Some(b), Some(a)) => per_packet(a.saturating_sub(b)),
        _ => f64::NAN,
    };
    let (seconds, cost, starved, device_us, driver_us) = if c.path == "bare" {
        let work = super::baseline::PacketWork {
            fill: &fill,
            intact: &|seq, p| intact(seq, bytes, p),
        };
        let bare = |n| {
            // SAFETY: `regs` is this engine's register window and the pool
            // is its pool; `recover` halts that engine.
            unsafe {
                super::baseline::sg_stream(
                    on.regs,
                    on.engine.pool(),
                    at.slots,
                    bytes,
                    n as u64,
                    &work,
                    || on.engine.dma().recover(),
                )
            }
        };
        bare(at.slots)?;
        let before = (on.device)();
        let meter = Meter::start(None);
        let t = bare(packets);
        let cost = meter.stop();
        let device_us = device_since(before);
        // dmaflow's driver gets the engine back in a known state.
        on.engine.dma().reset()?;
        (t?, cost, None, device_us, f64::NAN)
    } else {
        let mut ring = PacketRing::new(on.engine, at.slots, bytes, cfg.batch, c.completion)?;
        let _load = c
            .load
            .map(|_| App::start(Work::Spin, on.load))
            .transpose()?;
        let copy = c.path == "copy";
        let burst = c.path == "burst";
        let stream_of = |ring: &mut PacketRing<'_, R, I>, n| {
            if burst {
                stream_burst(ring, bytes, n, &what)
            } else {
                stream(ring, bytes, n, copy, &what)
            }
        };
        stream_of(&mut ring, at.slots)?;
        let before = (on.device)();
        let meter = Meter::start(None);
        let (t, starved) = stream_of(&mut ring, packets)?;
        let cost = meter.stop();
        let device_us = device_since(before);
        let driver_us = match burst {
            true => {
                let patience = on.engine.dma().timeout();
                per_packet(burst_driver_cpu(
                    &mut ring, bytes, packets, patience, &what,
                )?)
            }
            false => f64::NAN,
        };
        (t, cost, Some(starved), device_us, driver_us)
    };
    let moved = (packets * bytes) as f64;
    Ok(Sample {
        seconds,
        packets,
        mbytes_per_s: moved / seconds / 1e6,
        packets_per_s: packets as f64 / seconds,
        cpu_us: cost.cpu_us_per(packets),
        cpu_share: cost.cpu_share(),
        starved,
        device_us,
        driver_us,
        cache_us: match at.board.cache_maintenance {
            true => cpu_cache_times(bytes, CACHE_REPEATS),
            false => Vec::new(),
        },
        sched: on.sched.to_string(),
    })
}

/// A count, or `n/a` where nothing was counted.
fn counted(n: Option<u64>) -> String {
    n.map_or("n/a".into(), |n| n.to_string())
}

/// The times the ring ran dry, over all runs; none for the bare ring.
fn underruns(r: &Row) -> Option<u64> {
    r.samples
        .iter()
        .map(|s| s.starved.map(|x| x.underruns))
        .sum()
}

/// The times the ring ran full, over all runs; none for the bare ring.
fn overruns(r: &Row) -> Option<u64> {
    r.samples
        .iter()
        .map(|s| s.starved.map(|x| x.overruns))
        .sum()
}

fn mbytes_per_s(r: &Row) -> f64 {
    r.typical(|s| s.mbytes_per_s)
}

fn packets_per_s(r: &Row) -> f64 {
    r.typical(|s| s.packets_per_s)
}

/// The link's time per packet on the modelled device, in microseconds
/// (back to back, PG021's start-up overlapped by prefetch; 0 unlimited or on
/// a board).
fn model_us(r: &Row) -> f64 {
    let at = &r.point.at;
    at.board
        .model
        .map_or(0.0, |c| c.duration(at.bytes).as_secs_f64() * 1e6)
}

/// Wall time per packet, in microseconds.
fn us_per_packet(r: &Row) -> f64 {
    1e6 / packets_per_s(r)
}

/// Measured minus modelled time per packet.
fn overhead_us(r: &Row) -> f64 {
    us_per_packet(r) - model_us(r)
}

/// A figure's typical value, none where no run has it.
fn optional(r: &Row, figure: fn(&Sample) -> f64) -> Option<f64> {
    r.measured(figure).then(|| r.typical(figure))
}

/// Packets per second over the bare scatter-gather ring's at the same
/// packet size, board and ring, round by round.
fn of_bare(r: &Row) -> Option<f64> {
    r.ratio_to("bare", |s| s.packets_per_s).map(|q| q.typical())
}

/// This CPU's own cache maintenance per packet, every repeat of every run.
fn cpu_cache_us(r: &Row) -> Option<f64> {
    Some(r.pooled_typical(|s| &s.cache_us)).filter(|v| v.is_finite())
}

/// The rows' columns.
fn columns() -> Columns<'static, Row> {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    Columns::new()
        .plain("clock", "clock", |r: &Row| r.point.at.board.clock.clone())
        .doc("the profile's port, e.g. \"1200MB/s\", \"unlimited\", or \"board\"")
        .plain("completion", "completion", |r| of(r).completion_name())
        .doc("poll|irq|adaptive|bare")
        .plain("path", "path", |r| of(r).path)
        .doc("zerocopy|copy|burst|bare: the scatter-gather ring driven by hand")
        .col(
            "cache maint.",
            "cache_maintenance",
            move |r| yes(r.point.at.board.cache_maintenance),
            |r| r.point.at.board.cache_maintenance,
        )
        .doc("bool: buffers cleaned and invalidated around each transfer")
        .col(
            "loaded",
            "loaded",
            move |r| of(r).load.map_or(yes(false), |l| format!("{l} core")),
            |r| of(r).load.is_some(),
        )
        .doc("bool: another thread spinning on a core")
        .kept("load_core", |r| of(r).load.unwrap_or(""))
        .doc(
            "where the load ran: driver (the driver thread's core), device (the emulated \
             device's core), any (the scheduler's choice); empty when not loaded",
        )
        .plain("ring", "slots", |r| r.point.at.slots)
        .doc("ring size: buffers per direction, beside a load as many as hold 4 ms of link")
        .bytes("size", "bytes", |r| r.point.at.bytes)
        .doc("packet size")
        .kept("packets", |r| r.samples.first().map_or(0, |s| s.packets))
        .doc("per run")
        .kept("seconds", |r| r.typical(|s| s.seconds))
        .doc("per run")
        .fixed("MB/s", "mbytes_per_s", 0, mbytes_per_s)
        .doc("10^6 B/s one way")
        .range("runs' range", "mbytes_per_s_spread", 0, |r| {
            r.spread(|s| s.mbytes_per_s)
        })
        .doc("mbytes_per_s over the runs: their spread, with p25, p75, min, max and n")
        .fixed("MiB/s", "mib_per_s", 0, |r| {
            mbytes_per_s(r) * 1e6 / f64::from(1u32 << 20)
        })
        .doc("2^20 B/s, as paper 004")
        .col(
            "packets/s",
            "packets_per_s",
            |r| format!("{:.0}k", packets_per_s(r) / 1e3),
            packets_per_s,
        )
        .doc("per second")
        .fixed("model us/pkt", "model_us", 3, model_us)
        .doc("the modelled link's time per packet, 0 unlimited or on a board")
        .fixed("overhead us/pkt", "overhead_us", 3, overhead_us)
        .doc("wall time per packet minus model_us")
        .fixed("CPU us/pkt", "cpu_us", 3, |r| r.typical(|s| s.cpu_us))
        .doc("the driver thread's CPU per packet, writing and checking the data included")
        .percent("CPU share", "cpu_share", |r| r.typical(|s| s.cpu_share))
        .doc("the driver thread's CPU over wall time while streaming")
        .shown_as("underruns", "underruns", underruns, counted)
        .doc(
            "times the ring found MM2S done with every packet handed to it (the link idle, \
             waiting for the host), over all runs; null for the bare ring",
        )
        .shown_as("overruns", "overruns", overruns, counted)
        .doc(
            "times the ring found every receive buffer handed to S2MM filled (a source \
             that cannot wait would have lost data), over all runs; null for the bare ring",
        )
        .kept("sched", |r| {
            r.samples.first().map_or(String::new(), |s| s.sched.clone())
        })
        .doc("the scheduling the driver's and the device's threads were granted")
        .shown_as("of bare SG ring", "of_bare", of_bare, |v| {
            v.map_or("-".into(), |v| format!("{:.0} %", 100.0 * v))
        })
        .doc(
            "packets_per_s over the bare ring's, same size, link, memory and ring, round \
             by round in the same turns; null on bare rows",
        )
        .optional(
            "this CPU's cache maint. us/pkt",
            "cpu_cache_us",
            3,
            cpu_cache_us,
        )
        .doc(
            "this CPU's own clflushopt/dc civac of the same ranges per packet, every \
             repeat beside every run; rows with cache maintenance",
        )
        .optional("driver's own CPU us/pkt", "driver_us", 3, |r| {
            optional(r, |s| s.driver_us)
        })
        .doc(
            "burst rows: the driver thread's CPU per packet in the ring's calls alone, a \
             run of its own that waits for each burst outside the measurement; null elsewhere",
        )
        .optional("device thread CPU us/pkt", "device_us", 3, |r| {
            optional(r, |s| s.device_us)
        })
        .doc("the emulated device thread's CPU per packet in the timed runs; null on a board")
}

/// The rows of one zero-copy condition: alone at the configured ring size
/// (`load` `None`), or beside a load on the cores `load` names (`driver`,
/// `device`, `any`), the ring sized by time.
fn select<'a>(
    cfg: &'a Config,
    rows: &'a [Row],
    clock: &'a str,
    completion: &'a str,
    load: Option<&'a str>,
) -> impl Iterator<Item = &'a Row> + 'a {
    rows.iter().filter(move |r| {
        let c = of(r);
        let b = &r.point.at.board;
        (&*b.clock, c.completion_name(), c.path, b.cache_maintenance)
            == (clock, completion, "zerocopy", false)
            && match load {
                None => c.load.is_none() && r.point.at.slots == cfg.slots,
                Some(core) => c.load == Some(core),
            }
    })
}

/// The row of `series` at 64 B with the unlimited clock, coherent, at the
/// configured ring size.
fn small<'a>(cfg: &Config, rows: &'a [Row], series: &str, maintained: bool) -> Option<&'a Row> {
    rows.iter().find(|r| {
        let at = &r.point.at;
        (
            &*at.board.clock,
            r.point.series,
            at.board.cache_maintenance,
            at.bytes,
            at.slots,
        ) == ("unlimited", series, maintained, 64, cfg.slots)
    })
}

/// Where the targeted load runs: beside the driver where the emulated device
/// has a core of its own, else wherever the scheduler puts it.
fn driver_load(rows: &[Row]) -> &'static str {
    if rows.iter().any(|r| of(r).load == Some("driver")) {
        "driver"
    } else {
        "any"
    }
}

/// The worst row from 2 KiB up, and its share of the modelled link.
fn worst_large<'a>(rows: impl Iterator<Item = &'a Row>, link: f64) -> Option<(&'a Row, f64)> {
    rows.filter(|r| r.point.at.bytes >= 2048)
        .min_by(|a, b| mbytes_per_s(a).total_cmp(&mbytes_per_s(b)))
        .map(|r| (r, 100.0 * mbytes_per_s(r) * 1e6 / link))
}

/// The targets: a steady zero-copy stream keeps up with the modelled HP-port
/// link from 2 KiB up, alone and beside a load; software handles 64 B packets
/// fast enough when the link is unlimited.
pub fn targets(cfg: &Config, rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    let hp = clock_label(cfg.profile.port);
    let link = cfg.profile.port.bytes_per_s().unwrap_or(f64::INFINITY);
    let beside = driver_load(rows);
    for (completion, load, what) in [
        ("poll", None, "alone, polling"),
        (
            "irq",
            Some(beside),
            "beside a load on the driver's core, interrupts",
        ),
        (
            "adaptive",
            Some(beside),
            "beside a load on the driver's core, adaptive",
        ),
    ] {
        if let Some((w, pct)) = worst_large(select(cfg, rows, &hp, completion, load), link) {
            out.push(Target::new(
                format!(
                    "zero-copy stream from 2 KiB up, {what}: >= 95 % of the modelled {hp} link"
                ),
                format!(
                    "at least {pct:.1} % ({:.0} MB/s, worst at {}; {:.2} us CPU per packet)",
                    mbytes_per_s(w),
                    bytes_label(w.point.at.bytes),
                    w.typical(|s| s.cpu_us)
                ),
                pct >= 95.0,
            ));
        }
    }
    if let Some(small) = small(cfg, rows, "poll zerocopy", false) {
        out.push(Target::new(
            "64 B packets with the unlimited clock >= 3 M/s",
            format!(
                "{:.2} M/s ({:.3} us per packet)",
                packets_per_s(small) / 1e6,
                us_per_packet(small)
            ),
            packets_per_s(small) >= 3e6,
        ));
    }
    if let Some(b) = small(cfg, rows, "poll burst", false)
        && let Some(share) = of_bare(b)
    {
        // The bare ring of the same turns: what the emulated device itself
        // allows, and what its thread spends per packet.
        let bare = small(cfg, rows, "bare", false);
        let bare_rate = bare.map_or(f64::NAN, packets_per_s);
        out.push(Target::new(
            "64 B packets by the burst, unlimited clock: >= 90 % of the bare SG ring's rate",
            format!(
                "{:.1} % ({:.2} M/s; the bare ring {:.2} M/s in the same turns)",
                100.0 * share,
                packets_per_s(b) / 1e6,
                bare_rate / 1e6
            ),
            share >= 0.90,
        ));
        if let Some(own) = optional(b, |s| s.driver_us) {
            let device = |r: &Row| {
                optional(r, |s| s.device_us)
                    .map_or(String::new(), |d| format!(", its device thread {d:.3} us"))
            };
            let limit = bare.map_or(String::new(), |r| {
                format!(
                    "; the bare ring {:.2} M/s{}, so 8 M/s {}",
                    bare_rate / 1e6,
                    device(r),
                    if bare_rate >= 8e6 {
                        "applies"
                    } else {
                        "is past what the emulated device moves"
                    }
                )
            });
            out.push(Target::new(
                "64 B packets by the burst, unlimited clock: driver CPU <= 0.10 us per packet",
                format!(
                    "{own:.3} us per packet in the ring's calls (filling and checking each \
                     packet included; {:.3} us with the polling{}){limit}",
                    b.typical(|s| s.cpu_us),
                    device(b)
                ),
                own <= 0.10,
            ));
        }
    }
    out
}

/// The clauses of one sentence: what the stream keeps of the modelled link,
/// what a load on one core does to it in each mode, and how many small
/// packets software keeps up with, with and without cache maintenance.
fn clauses(cfg: &Config, rows: &[Row]) -> Vec<String> {
    let hp = clock_label(cfg.profile.port);
    let link = cfg.profile.port.bytes_per_s().unwrap_or(f64::INFINITY);
    let mut parts = Vec::new();
    if let Some((w, pct)) = worst_large(select(cfg, rows, &hp, "poll", None), link) {
        parts.push(format!(
            "from 2 KiB up a zero-copy stream keeps at least {pct:.1} % of the modelled {hp} \
             link ({:.0} MB/s, {:.2} us of software overhead per packet)",
            mbytes_per_s(w),
            overhead_us(w)
        ));
    }
    for (core, what) in [
        ("driver", "the driver's core"),
        (
            "device",
            "the emulated device's core (the emulator's own share of a loss)",
        ),
        ("any", "a core the scheduler picks"),
    ] {
        let loaded: Vec<String> = ["poll", "irq", "adaptive"]
            .iter()
            .filter_map(|&c| {
                let (w, pct) = worst_large(select(cfg, rows, &hp, c, Some(core)), link)?;
                Some(format!(
                    "{c} {pct:.1} % (worst at {}, {} underruns, {} overruns)",
                    bytes_label(w.point.at.bytes),
                    counted(underruns(w)),
                    counted(overruns(w))
                ))
            })
            .collect();
        if !loaded.is_empty() {
            parts.push(format!(
                "beside a load on {what}, a ring of {} ms of link: {}",
                LOADED_RING.as_millis(),
                loaded.join(", ")
            ));
        }
    }
    if let Some(s) = rows
        .iter()
        .find(|r| of(r).load.is_some())
        .and_then(|r| r.samples.first())
    {
        parts.push(format!("threads' scheduling: {}", s.sched));
    }
    if let Some(small_row) = small(cfg, rows, "poll zerocopy", false) {
        let maint = small(cfg, rows, "poll zerocopy", true);
        parts.push(format!(
            "with no link limit software moves {:.2} M packets/s of 64 B{}",
            packets_per_s(small_row) / 1e6,
            maint.map_or(String::new(), |m| format!(
                " ({:.2} M/s with the cache maintenance a non-coherent board needs)",
                packets_per_s(m) / 1e6
            ))
        ));
    }
    parts
}

/// A line a condition on a board: its completion, path, cache maintenance
/// and load.
const LINES: &[&str] = &[
    "completion",
    "path",
    "cache_maintenance",
    "loaded",
    "load_core",
];

/// Throughput against packet size (the rows of one clock).
const STREAM_PLOT: Plot = Plot {
    title: "Packet stream",
    x: "bytes",
    y: "mbytes_per_s",
    interval: None,
    y_scale: 1.0,
    lines: LINES,
    axis: XAxis::Bytes,
    log_y: true,
};

/// Host CPU per packet against packet size, unlimited link.
const CPU_PLOT: Plot = Plot {
    title: "Host CPU per packet, unlimited link",
    y: "cpu_us",
    ..STREAM_PLOT
};

/// Packets per second against ring size, unlimited link (paper 004).
const RING_PLOT: Plot = Plot {
    title: "Ring size, unlimited link (paper 004)",
    x: "slots",
    y: "packets_per_s",
    lines: &["path", "bytes"],
    axis: XAxis::PowersOfTwo,
    ..STREAM_PLOT
};

/// The answer, the targets, and the plots: MB/s against packet size for
/// each clock, CPU per packet, packets/s against ring size.
fn findings(cfg: &Config, rows: &[Row]) -> Findings {
    let hp = clock_label(cfg.profile.port);
    let cols = columns();
    let draw = |plot: &Plot, title: String, keep: &dyn Fn(&Row) -> bool| -> LinePlot {
        let mut drawn = plot.draw(&cols, &cols.json(rows.iter().filter(|r| keep(r))));
        drawn.title = title;
        drawn
    };
    let by_size = |clock: String| {
        move |r: &Row| {
            r.point.at.board.clock == clock
                && (r.point.at.slots == cfg.slots || of(r).load.is_some())
        }
    };
    let ring = |r: &Row| {
        let b = &r.point.at.board;
        (&*b.clock, r.point.series, b.cache_maintenance) == ("unlimited", "poll zerocopy", false)
            && cfg.ring_sweep_sizes.contains(&r.point.at.bytes)
    };
    Findings {
        clauses: clauses(cfg, rows),
        targets: targets(cfg, rows),
        plots: vec![
            draw(
                &STREAM_PLOT,
                format!("Packet stream, link {hp} (modelled)"),
                &by_size(hp.clone()),
            ),
            draw(
                &STREAM_PLOT,
                "Packet stream, unlimited link: software's own rate".into(),
                &by_size("unlimited".into()),
            ),
            draw(
                &CPU_PLOT,
                CPU_PLOT.title.into(),
                &by_size("unlimited".into()),
            ),
            draw(&RING_PLOT, RING_PLOT.title.into(), &ring),
        ],
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_sweep_is_consistent_and_bounded_by_the_clock() {
        // A corrupted packet, or another's, is caught.
        let mut p = vec![0u8; 64];
        fill(7, &mut p);
        assert!(intact(7, 64, &p));
        p[40] ^= 1;
        assert!(!intact(7, 64, &p));
        assert!(!intact(8, 64, &p));
        let mut cfg = Config::at(&Setup::TINY);
        (EXPERIMENT.prepare)(&mut cfg, &mut |_| {}).unwrap();
        let t0 = Instant::now();
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        let elapsed = t0.elapsed().as_secs_f64();
        // The last board is kept until the run's configuration goes.
        assert!(cfg.held.borrow().is_some());
        let report = EXPERIMENT.report(&cfg, &rows);
        let j = &report.json;
        let json = j["rows"].as_array().unwrap();
        // Per size: coherent zero-copy, copy, irq, adaptive (both clocks);
        // poll, irq and adaptive beside a load on each core it is put on
        // (HP clock: the driver's and the device's where the device has a
        // core of its own); non-coherent zero-copy and copy (both clocks);
        // burst and the bare SG ring in all four settings; the ring sweep's
        // other sizes at 64 B.
        let loads = if json.iter().any(|r| r["load_core"] == "device") {
            2
        } else {
            1
        };
        assert_eq!(json.len(), 2 * (8 + 3 * loads + 4 + 8) + 2, "{json:#?}");
        let num = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        for r in json {
            // Every row of a size's turns says its share of the bare ring's
            // rate; the bare rows themselves (and the sweep's) do not.
            let beside = r["path"] != "bare" && r["slots"] == cfg.slots;
            assert_eq!(r["of_bare"].is_number(), beside, "{r}");
            // Every run fits in what the test's own clock saw.
            assert!(num(r, "seconds") * cfg.rounds as f64 <= elapsed, "{r}");
            assert!(num(r, "packets") >= num(r, "slots"), "{r}");
            let model_us = num(r, "model_us");
            if r["clock"] == "1200MB/s" {
                // The link cannot go faster than its clock (a little slack for
                // the packets already in flight when timing starts).
                assert!(num(r, "mbytes_per_s") < 1200.0 * 1.05, "{r}");
                assert!(num(r, "overhead_us") > -0.1 * model_us, "{r}");
            } else {
                assert_eq!(model_us, 0.0);
            }
            // At most two cores' worth, with room for the CPU clock's jitter
            // over short runs (as loopback's sweep).
            assert!(num(r, "cpu_us") > 0.0 && num(r, "cpu_share") <= 2.5, "{r}");
            // This CPU's own maintenance is measured beside every maintained
            // row, and only there.
            assert_eq!(
                r["cpu_cache_us"].is_number(),
                r["cache_maintenance"] == true,
                "{r}"
            );
            // The driver's own CPU on the burst rows alone; the emulated
            // device's on every row.
            assert_eq!(r["driver_us"].is_number(), r["path"] == "burst", "{r}");
            for k in ["driver_us", "device_us", "cpu_cache_us"] {
                if let Some(v) = r[k].as_f64() {
                    assert!(v > 0.0 && v.is_finite(), "{k}: {r}");
                }
            }
            assert!(num(r, "device_us") > 0.0, "{r}");
            // Counted by dmaflow's ring, not by the bare one.
            assert_eq!(r["underruns"].is_null(), r["path"] == "bare", "{r}");
            let spread = &r["mbytes_per_s_spread"];
            assert_eq!(spread["n"], cfg.rounds, "{r}");
            let (low, high) = (num(spread, "min"), num(spread, "max"));
            assert!(low <= num(r, "mbytes_per_s") && num(r, "mbytes_per_s") <= high);
        }
        assert!(json.iter().any(|r| r["slots"] == 8));
        // Beside a load the ring holds LOADED_RING of the 1200 MB/s link:
        // 4.8 MB, 1172 buffers of 4 KiB (1171.9 up, a whole number of the
        // tiny run's batches of 4).
        let loaded: Vec<_> = json.iter().filter(|r| r["loaded"] == true).collect();
        assert!(!loaded.is_empty());
        for r in loaded {
            let want = if r["bytes"] == 4096 {
                1172
            } else {
                LOADED_RING_MAX
            };
            assert_eq!(r["slots"], want, "{r}");
            assert!(r["sched"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        }
        for k in [
            "cpu_us",
            "model_us",
            "overhead_us",
            "cpu_share",
            "mib_per_s",
        ] {
            assert!(j["rows"][0][k].is_number(), "no {k}");
        }
        assert!(report.text.contains("zerocopy"));
        assert!(report.answer.contains("M packets/s"), "{}", report.answer);
        // Four plots, each with lines: the HP link's, the unlimited link's,
        // the CPU's and the ring sizes'.
        assert_eq!(report.plots.len(), 4);
        assert!(report.plots.iter().all(|p| !p.series.is_empty()));
        // Each swept size at every ring size, the configured one included.
        let rings = cfg.ring_sizes.iter().filter(|&&s| s != cfg.slots).count() + 1;
        let ring = &report.plots[3].series;
        assert!(ring.iter().all(|s| s.points.len() == rings), "{ring:?}");
        let labels: Vec<&str> = report.plots[0]
            .series
            .iter()
            .map(|s| s.label.as_str())
            .collect();
        assert!(labels.contains(&"poll zerocopy"), "{labels:?}");
        assert!(labels.contains(&"poll zerocopy cache maint."), "{labels:?}");
        assert!(
            labels.iter().any(|l| l.starts_with("irq zerocopy loaded ")),
            "{labels:?}"
        );
    }

    /// A driver away while the device works through the whole ring: every
    /// drain finds all receive buffers full (an overrun) and every refill an
    /// empty ring (an underrun, but for the first fill; the device may also
    /// finish a refill's first batch before its second is flushed).
    #[test]
    fn a_stalled_driver_counts_its_overruns_and_underruns() {
        let rig = Rig::new(
            4 << 20,
            Clock::Unlimited,
            true,
            CachePolicy::Coherent,
            Box::new(Loopback),
        )
        .unwrap();
        let e = &rig.engines[0];
        let mut ring = PacketRing::new(e, 8, 256, 4, Completion::Poll).unwrap();
        let stall = Duration::from_millis(20);
        let (_, s) = stream_stalled(&mut ring, 256, 32, false, "stalled", stall).unwrap();
        assert_eq!(s.overruns, 4, "{s:?}");
        // One per refill after the first, at most one per flush (2 a refill).
        assert!((3..=7).contains(&s.underruns), "{s:?}");
        let (_, s) = stream_stalled(&mut ring, 256, 32, true, "stalled copy", stall).unwrap();
        assert_eq!(s.overruns, 4, "{s:?}");
    }
}
