//! `dmaflow bench transfer`: a stream of packets through a ring of DMA buffers on
//! a scatter-gather engine (paper 004's tables): zero-copy with and without
//! explicit cache maintenance, and standard I/O (a copy each way), buffer sizes
//! 64 B to 32 KiB, ring sizes 16 to 1024 buffers, the fabric clocked at the
//! board profile's HP port and unlimited; polling and interrupt completion; and
//! the zero-copy stream again while another thread loads a core. Every packet
//! is checked on the way back. The conditions of one packet size take turns
//! run by run, each run on a fresh ring.

use std::time::{Duration, Instant};

use dmaflow::dma::{Completion, Engine, PacketRing, Starved};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::{IrqLine, MemoryModel, RegisterSpace};
use dmaflow::rig::{Rig, policy_for};
use dmaflow::sim::{Clock, Loopback, Profile};

use super::app::{App, Work};
use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::error::Error;
use super::harness::{
    OnBoard, OnGpu, Progress, Setup, Spec, Tables, Tier, bytes_label, clock_label, median,
};
use super::meter::{Meter, Tally};
use super::on_board::Mode;
use super::plot::{LinePlot, XAxis};
use super::report::{Report, Target, sentence, series_by};
use super::spread::{Spread, in_turns};

/// `dmaflow bench transfer`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "transfer",
    on_gpu: Some(OnGpu::Gpu(Tables::MOVED)),
    board: OnBoard::Runs(Mode::ScatterGather, run_on_board),
    question: "A stream of packets through a ring of DMA buffers (paper 004).",
    keys: "clock (the profile's port, e.g. \"1200MB/s\", or \"unlimited\"),\n\
          completion (poll|irq|adaptive|bare), path (zerocopy|copy|\n\
          burst|bare: the scatter-gather ring driven by hand),\n\
          cache_maintenance\n\
          (bool), loaded (bool: another thread spinning on a core),\n\
          slots (ring size), bytes (packet size), packets (per run),\n\
          seconds (median run), mbytes_per_s (10^6 B/s one way),\n\
          mbytes_per_s_spread (over the runs),\n\
          mib_per_s (2^20 B/s, as paper 004), packets_per_s, and per\n\
          packet model_us, overhead_us, cpu_us, cpu_share (see below),\n\
          cpu_cache_us (this CPU's own clflushopt/dc civac of the same\n\
          ranges per packet; rows with cache maintenance),\n\
          of_bare (packets_per_s over the bare ring's, same size, link\n\
          and memory, same turns; null on bare rows),\n\
          driver_us (burst rows: the driver thread's CPU per packet in\n\
          the ring's calls alone, a run of its own that waits for each\n\
          burst outside the measurement; null elsewhere),\n\
          device_us (the emulated device thread's CPU per packet in the\n\
          timed runs; null on a board)",
    conditions: Conditions {
        timed: "the stream of packets from the first send to the last packet received, on \
                the driver's thread",
        against: "the modelled link (share of the modelled link) and the copying path",
        model: "the link rate, PG021's latencies and model_us: a stream at 100 % of the \
                link is what the emulator's clock allows, the overhead beside it is dmaflow's",
        paper: USER_X86,
    },
    ..Spec::new(Config::at, run, report)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Buffer (packet) sizes in bytes.
    pub sizes: Vec<usize>,
    /// Packets per run at most.
    pub max_packets: usize,
    /// Bytes per run at most (bounds the packets of large sizes).
    pub bytes_per_run: usize,
    /// Rounds per point (the median is reported).
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

/// One point.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The link: the profile's HP port (e.g. `1200MB/s`) or `unlimited`.
    pub clock: String,
    /// `poll` or `irq`.
    pub completion: &'static str,
    /// `zerocopy` or `copy`.
    pub path: &'static str,
    /// Whether buffers were flushed/invalidated around each transfer.
    pub cache_maintenance: bool,
    /// Whether another thread loaded a core meanwhile.
    pub loaded: bool,
    /// Where the load ran: `driver` (the driver thread's core, what a board
    /// sees), `device` (the emulated device's core: the emulator's own share
    /// of a loss, which a board's device does not take turns for), `any` (the
    /// scheduler's choice); empty when not loaded.
    pub load_core: &'static str,
    /// Buffers in the ring per direction (beside a load: as many as hold
    /// [`LOADED_RING`] of the link).
    pub slots: usize,
    /// Times the ring found MM2S done with every packet handed to it when
    /// it handed over more (the link went idle waiting for the host), over
    /// all runs, as the ring counts them ([`PacketRing::starved`]); `None`
    /// for the bare ring, which counts nothing.
    pub underruns: Option<u64>,
    /// Times the ring found every receive buffer handed to S2MM filled (S2MM
    /// had no free buffer: a source that cannot wait, such as an ADC, would
    /// have lost data), over all runs, as the ring counts them; `None` for
    /// the bare ring.
    pub overruns: Option<u64>,
    /// The scheduling the driver's and the device's threads were granted
    /// (`driver ...; device ...`).
    pub sched: String,
    /// Packet size in bytes.
    pub bytes: usize,
    /// Packets per run.
    pub packets: usize,
    /// Median seconds per run.
    pub seconds: f64,
    /// 10^6 bytes per second (one direction), from the median run.
    pub mbytes_per_s: f64,
    /// 10^6 bytes per second over the runs.
    pub mbytes_spread: Spread,
    /// Packets per second, from the median run.
    pub packets_per_s: f64,
    /// The link's time per packet on the modelled device, in microseconds
    /// (back to back, PG021's start-up overlapped by prefetch; 0 unlimited).
    pub model_us: f64,
    /// Host CPU per packet of the driver thread (writing and checking the
    /// data included), in microseconds, over all runs.
    pub cpu_us: f64,
    /// Host CPU over wall time while streaming.
    pub cpu_share: f64,
    /// Packets per second over the bare scatter-gather ring's at the same
    /// packet size, link and memory in the same run (turns interleaved);
    /// `None` on the bare rows and where no bare row ran.
    pub of_bare: Option<f64>,
    /// On rows with cache maintenance: [`cpu_cache_us`], this CPU's own cost
    /// of the maintenance the emulated board models (the row's times and CPU
    /// include the model's); `None` where the CPU offers none in user space.
    pub cpu_cache_us: Option<f64>,
    /// On `burst` rows: the driver's own CPU per packet, in microseconds:
    /// the driver thread's CPU time inside the ring's calls alone, in a run
    /// of its own after the timed ones in which the bench waits for each
    /// whole burst to arrive ([`PacketRing::arrived`]) outside the
    /// measurement, so no wait for the device is counted ([`cpu_us`](Row::cpu_us)
    /// counts the polling). `None` on other rows.
    pub driver_us: Option<f64>,
    /// The emulated device thread's CPU per packet in the timed runs, in
    /// microseconds: the emulator's own cost on this host, which a board's
    /// hardware does not take from its CPU. `None` on a board.
    pub device_us: Option<f64>,
}

/// What this CPU's own cache maintenance of a `bytes` packet costs
/// (`clflushopt` on x86-64, `dc civac` on AArch64): clean the lines of a
/// packet just written (as before MM2S reads it), clean and invalidate those
/// of another (as around S2MM), timed together, median of `repeats`, in
/// microseconds.
pub fn cpu_cache_us(bytes: usize, repeats: usize) -> Option<f64> {
    use dmaflow::platform::cache::{Op, available, maintain};
    if !available() {
        return None;
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
    Some(median(&times))
}

impl Row {
    /// Wall time per packet, in microseconds.
    pub fn us_per_packet(&self) -> f64 {
        1e6 / self.packets_per_s
    }

    /// Measured minus modelled time per packet.
    pub fn overhead_us(&self) -> f64 {
        self.us_per_packet() - self.model_us
    }

    /// MiB/s (2^20 bytes), as paper 004's tables give throughput.
    pub fn mib_per_s(&self) -> f64 {
        self.mbytes_per_s * 1e6 / f64::from(1u32 << 20)
    }
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

/// What the ring counted of its stream between `before` and now: see
/// [`Row::underruns`] and [`Row::overruns`].
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

/// One condition of the sweep.
#[derive(Debug, Clone, Copy)]
struct Condition {
    completion: Completion,
    loaded: bool,
    /// Where the load runs (an index into the sweep's loads).
    load: usize,
    slots: usize,
    /// `zerocopy` or `copy`.
    path: &'static str,
}

/// Runs the sweep.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let hp = cfg.profile.port;
    let largest = cfg.sizes.iter().copied().max().unwrap_or(64);
    let most = cfg.ring_sizes.iter().copied().fold(cfg.slots, usize::max);
    // A ring sized by time holds LOADED_RING of the link, each way.
    let timed = hp
        .bytes_per_s()
        .map_or(0.0, |r| r * LOADED_RING.as_secs_f64()) as usize
        + 2 * largest;
    let ddr = (2 * (most * largest).max(timed) + (1 << 20)).next_power_of_two();
    let mut rows = Vec::new();
    // Paper 004's two conditions: a coherent port with no maintenance, and a
    // non-coherent one with explicit cache control.
    for (cache_maintenance, model) in [
        (false, MemoryModel::Coherent),
        (true, MemoryModel::NonCoherent),
    ] {
        for clock in [hp, Clock::Unlimited] {
            let rig = Rig::with_model(
                ddr,
                clock,
                true,
                policy_for(model),
                model,
                Box::new(Loopback),
            )?;
            let placed = rig.dedicate_core()?;
            let sched = format!(
                "driver {}; device {}",
                dmaflow::platform::cpu::request_slice(None, STREAM_SLICE),
                rig.fabric.request_device_slice(STREAM_SLICE)
            );
            // A load beside the driver (what a board sees) and beside the
            // emulated device (the emulator's own share of a loss).
            let loads = match placed.device_core {
                Some(d) => vec![("driver", placed.host_cores.clone()), ("device", vec![d])],
                None => vec![("any", placed.all_cores().to_vec())],
            };
            let at = Setting {
                clock: clock_label(clock),
                model: Some(clock),
                cache_maintenance,
                irq: !cache_maintenance,
                loaded: !cache_maintenance && clock == hp,
                ring_sweep: !cache_maintenance && clock == Clock::Unlimited,
                sched,
                loads,
            };
            let engine = &rig.engines[0];
            let regs = rig.board.registers(0)?;
            let device = || rig.fabric.device_cpu_time().ok();
            let swept = sweep(cfg, engine, &regs, &at, &device, &mut *progress);
            // The bench's thread goes back to the kernel's default slice.
            let _ = dmaflow::platform::cpu::default_scheduling(None);
            rows.extend(swept?);
        }
    }
    Ok(rows)
}

/// The same sweep on a real board's scatter-gather engine in loopback
/// (`--board`): every condition at the board's own clock and cache policy
/// (explicit maintenance where u-dma-buf says the memory is not coherent);
/// nothing is modelled, so `model_us` is 0.
pub fn run_on_board(
    cfg: &Config,
    board: super::on_board::BoardRig,
    progress: Progress,
) -> Result<Vec<Row>, Error> {
    let cores = dmaflow::platform::cpu::allowed_cores(None)?;
    let sched = format!(
        "driver {}",
        dmaflow::platform::cpu::request_slice(None, STREAM_SLICE)
    );
    let at = Setting {
        clock: "board".into(),
        model: None,
        cache_maintenance: board.board.pool().policy() == CachePolicy::Explicit,
        irq: true,
        loaded: true,
        ring_sweep: true,
        sched,
        loads: vec![("any", cores)],
    };
    let swept = sweep(
        cfg,
        &board.engine,
        &board.registers,
        &at,
        &|| None,
        &mut *progress,
    );
    let _ = dmaflow::platform::cpu::default_scheduling(None);
    swept
}

/// The link and memory one sweep runs on, and which conditions it measures.
struct Setting {
    /// The `clock` column: the modelled link's rate, or `board`.
    clock: String,
    /// The modelled link (`model_us`), none on a real board.
    model: Option<Clock>,
    /// Whether buffers are cleaned and invalidated around each transfer.
    cache_maintenance: bool,
    /// Whether interrupt completion is measured beside polling.
    irq: bool,
    /// Whether polling and interrupts are measured again beside a loaded core.
    loaded: bool,
    /// Whether ring sizes other than the configured one are swept.
    ring_sweep: bool,
    /// What scheduling the threads were granted.
    sched: String,
    /// Where a load may run: its name (`driver`, `device`, `any`) and cores.
    loads: Vec<(&'static str, Vec<usize>)>,
}

/// The conditions of `at` on `engine`, packet size by packet size, their rows
/// appended to `rows`; a loading application runs where `at.loads` say.
/// `device` reads the emulated device thread's CPU time (`None` on a board).
fn sweep<R: RegisterSpace, I: IrqLine>(
    cfg: &Config,
    engine: &Engine<R, I>,
    regs: &dyn RegisterSpace,
    at: &Setting,
    device: &dyn Fn() -> Option<Duration>,
    progress: Progress,
) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    let cache_maintenance = at.cache_maintenance;
    let at_slots = |completion, loaded, path| Condition {
        completion,
        loaded,
        load: 0,
        slots: cfg.slots,
        path,
    };
    let base = at_slots(Completion::Poll, false, "zerocopy");
    let swept = |bytes| at.ring_sweep && cfg.ring_sweep_sizes.contains(&bytes);
    let mut sizes = cfg.sizes.clone();
    sizes.extend(
        cfg.ring_sweep_sizes
            .iter()
            .filter(|&&b| swept(b) && !cfg.sizes.contains(&b)),
    );
    // The conditions of one packet size take turns run by run.
    for bytes in sizes {
        let mut group = Vec::new();
        if cfg.sizes.contains(&bytes) {
            group.extend([base, at_slots(Completion::Poll, false, "copy")]);
            // Packets by the burst, and the emulator baseline beside them: a
            // bare scatter-gather ring, same work per packet.
            group.push(at_slots(Completion::Poll, false, "burst"));
            group.push(at_slots(Completion::Poll, false, "bare"));
            if at.irq {
                // What waiting on the interrupt costs and saves.
                group.push(at_slots(Completion::Irq, false, "zerocopy"));
                group.push(at_slots(Completion::Adaptive, false, "zerocopy"));
            }
            if at.irq && at.loaded {
                // Another program on a core: polling, interrupts, adaptive,
                // the ring sized by time.
                // Whole batches: a ring whose receive buffers go back in part
                // batches can keep the oldest packet's buffer from S2MM.
                let batch = cfg.batch.max(1);
                let slots = engine
                    .link()
                    .slots_for(LOADED_RING, bytes)
                    .map_or(cfg.slots, |n| {
                        (n.div_ceil(batch) * batch).clamp(cfg.slots, LOADED_RING_MAX)
                    });
                for load in 0..at.loads.len() {
                    for c in [Completion::Poll, Completion::Irq, Completion::Adaptive] {
                        group.push(Condition {
                            load,
                            slots,
                            ..at_slots(c, true, "zerocopy")
                        });
                    }
                }
            }
        }
        if swept(bytes) {
            let others = cfg.ring_sizes.iter().filter(|&&s| s != cfg.slots);
            group.extend(others.map(|&slots| Condition { slots, ..base }));
        }
        let what = |c: &Condition| {
            format!(
                "transfer {} {} {} cache={cache_maintenance}{} {} x {}",
                at.clock,
                c.completion.name(),
                c.path,
                if c.loaded {
                    format!(" loaded ({} core)", at.loads[c.load].0)
                } else {
                    String::new()
                },
                c.slots,
                bytes_label(bytes)
            )
        };
        let packets_of = |c: &Condition| {
            (cfg.bytes_per_run / bytes)
                .min(cfg.max_packets)
                .max(c.slots)
        };
        let model_us = at
            .model
            .map_or(0.0, |c| c.duration(bytes).as_secs_f64() * 1e6);
        let mut costs = vec![Tally::default(); group.len()];
        let mut starved = vec![Starved::default(); group.len()];
        // The device thread's CPU in the timed runs, the driver's own in
        // the burst rows' runs of their own.
        let mut device_cpu = vec![Some(Duration::ZERO); group.len()];
        let mut driver_cpu = vec![Duration::ZERO; group.len()];
        let mut add_device = |k: usize, before: Option<Duration>| {
            device_cpu[k] = match (device_cpu[k], before, device()) {
                (Some(sum), Some(b), Some(a)) => Some(sum + a.saturating_sub(b)),
                _ => None,
            };
        };
        let times = in_turns(group.len(), cfg.rounds.max(1), |k, round| {
            let c = &group[k];
            let what = what(c);
            progress(&format!("{what} run {}", round + 1));
            if c.path == "bare" {
                let work = super::baseline::PacketWork {
                    fill: &fill,
                    intact: &|seq, p| intact(seq, bytes, p),
                };
                let bare = |n| {
                    // SAFETY: `regs` is this engine's register window and the
                    // pool is its pool; `recover` halts that engine.
                    unsafe {
                        super::baseline::sg_stream(
                            regs,
                            engine.pool(),
                            c.slots,
                            bytes,
                            n as u64,
                            &work,
                            || engine.dma().recover(),
                        )
                    }
                };
                bare(c.slots)?;
                let before = device();
                let meter = Meter::start(None);
                let t = bare(packets_of(c));
                costs[k].add(meter.stop());
                add_device(k, before);
                // dmaflow's driver gets the engine back in a known state.
                engine.dma().reset()?;
                return t;
            }
            let mut ring = PacketRing::new(engine, c.slots, bytes, cfg.batch, c.completion)?;
            let _load = c
                .loaded
                .then(|| App::start(Work::Spin, &at.loads[c.load].1))
                .transpose()?;
            // One short run first so the caches and the device thread
            // are warm.
            let copy = c.path == "copy";
            let mut run = |n| {
                if c.path == "burst" {
                    stream_burst(&mut ring, bytes, n, &what)
                } else {
                    stream(&mut ring, bytes, n, copy, &what)
                }
            };
            run(c.slots)?;
            let before = device();
            let meter = Meter::start(None);
            let (t, s) = run(packets_of(c))?;
            costs[k].add(meter.stop());
            add_device(k, before);
            if c.path == "burst" {
                let patience = engine.dma().timeout();
                driver_cpu[k] +=
                    burst_driver_cpu(&mut ring, bytes, packets_of(c), patience, &what)?;
            }
            starved[k].underruns += s.underruns;
            starved[k].overruns += s.overruns;
            Ok::<f64, Error>(t)
        })?;
        let first = rows.len();
        let mut bare_rate = None;
        let results = group
            .into_iter()
            .zip(times)
            .zip(costs)
            .zip(starved)
            .zip(device_cpu.into_iter().zip(driver_cpu));
        for ((((c, times), cost), starved), (device_cpu, driver_cpu)) in results {
            let packets = packets_of(&c);
            let per_packet = |d: Duration| d.as_secs_f64() * 1e6 / (packets * times.len()) as f64;
            let moved = (packets * bytes) as f64;
            let seconds = median(&times);
            let rates: Vec<f64> = times.iter().map(|t| moved / t / 1e6).collect();
            rows.push(Row {
                clock: at.clock.clone(),
                completion: if c.path == "bare" {
                    "bare"
                } else {
                    c.completion.name()
                },
                path: c.path,
                cache_maintenance,
                loaded: c.loaded,
                load_core: if c.loaded { at.loads[c.load].0 } else { "" },
                slots: c.slots,
                underruns: (c.path != "bare").then_some(starved.underruns),
                overruns: (c.path != "bare").then_some(starved.overruns),
                sched: at.sched.clone(),
                bytes,
                packets,
                seconds,
                mbytes_per_s: moved / seconds / 1e6,
                mbytes_spread: Spread::of(&rates),
                packets_per_s: packets as f64 / seconds,
                model_us,
                cpu_us: cost.cost().cpu_us_per(packets * times.len()),
                cpu_share: cost.cpu_share(),
                of_bare: None,
                cpu_cache_us: cache_maintenance
                    .then(|| cpu_cache_us(bytes, 201))
                    .flatten(),
                driver_us: (c.path == "burst").then(|| per_packet(driver_cpu)),
                device_us: device_cpu.map(per_packet),
            });
            if c.path == "bare" {
                bare_rate = Some(packets as f64 / seconds);
            }
        }
        // Each row of this size beside the bare ring of the same turns.
        if let Some(bare) = bare_rate {
            for r in &mut rows[first..] {
                if r.path != "bare" && r.slots == cfg.slots {
                    r.of_bare = Some(r.packets_per_s / bare);
                }
            }
        }
    }
    Ok(rows)
}

/// A count, or `n/a` where nothing was counted.
fn counted(n: Option<u64>) -> String {
    n.map_or("n/a".into(), |n| n.to_string())
}

/// The rows' columns.
fn columns<'a>() -> Columns<'a, Row> {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    Columns::new()
        .plain("clock", "clock", |r: &Row| r.clock.clone())
        .plain("completion", "completion", |r| r.completion)
        .plain("path", "path", |r| r.path)
        .col(
            "cache maint.",
            "cache_maintenance",
            move |r| yes(r.cache_maintenance),
            |r| r.cache_maintenance,
        )
        .col(
            "loaded",
            "loaded",
            move |r| {
                if r.loaded {
                    format!("{} core", r.load_core)
                } else {
                    yes(false)
                }
            },
            |r| r.loaded,
        )
        .kept("load_core", |r| r.load_core)
        .plain("ring", "slots", |r| r.slots)
        .col("size", "bytes", |r| bytes_label(r.bytes), |r| r.bytes)
        .kept("packets", |r| r.packets)
        .kept("seconds", |r| r.seconds)
        .fixed("MB/s", "mbytes_per_s", 0, |r| r.mbytes_per_s)
        .range("runs' range", "mbytes_per_s_spread", 0, |r| r.mbytes_spread)
        .fixed("MiB/s", "mib_per_s", 0, Row::mib_per_s)
        .col(
            "packets/s",
            "packets_per_s",
            |r| format!("{:.0}k", r.packets_per_s / 1e3),
            |r| r.packets_per_s,
        )
        .fixed("model us/pkt", "model_us", 3, |r| r.model_us)
        .fixed("overhead us/pkt", "overhead_us", 3, Row::overhead_us)
        .fixed("CPU us/pkt", "cpu_us", 3, |r| r.cpu_us)
        .percent("CPU share", "cpu_share", |r| r.cpu_share)
        .shown_as("underruns", "underruns", |r| r.underruns, counted)
        .shown_as("overruns", "overruns", |r| r.overruns, counted)
        .kept("sched", |r| r.sched.clone())
        .shown_as(
            "of bare SG ring",
            "of_bare",
            |r| r.of_bare,
            |v| v.map_or("-".into(), |v| format!("{:.0} %", 100.0 * v)),
        )
        .optional("this CPU's cache maint. us/pkt", "cpu_cache_us", 3, |r| {
            r.cpu_cache_us
        })
        .optional("driver's own CPU us/pkt", "driver_us", 3, |r| r.driver_us)
        .optional("device thread CPU us/pkt", "device_us", 3, |r| r.device_us)
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
        let of = (&*r.clock, r.completion, r.path, r.cache_maintenance);
        of == (clock, completion, "zerocopy", false)
            && match load {
                None => !r.loaded && r.slots == cfg.slots,
                Some(core) => r.loaded && r.load_core == core,
            }
    })
}

/// Where the targeted load runs: beside the driver where the emulated device
/// has a core of its own, else wherever the scheduler puts it.
fn driver_load(rows: &[Row]) -> &'static str {
    if rows.iter().any(|r| r.load_core == "driver") {
        "driver"
    } else {
        "any"
    }
}

/// The worst row from 2 KiB up, and its share of the modelled link.
fn worst_large<'a>(rows: impl Iterator<Item = &'a Row>, link: f64) -> Option<(&'a Row, f64)> {
    rows.filter(|r| r.bytes >= 2048)
        .min_by(|a, b| a.mbytes_per_s.total_cmp(&b.mbytes_per_s))
        .map(|r| (r, 100.0 * r.mbytes_per_s * 1e6 / link))
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
                    w.mbytes_per_s,
                    bytes_label(w.bytes),
                    w.cpu_us
                ),
                pct >= 95.0,
            ));
        }
    }
    if let Some(small) = select(cfg, rows, "unlimited", "poll", None).find(|r| r.bytes == 64) {
        out.push(Target::new(
            "64 B packets with the unlimited clock >= 3 M/s",
            format!(
                "{:.2} M/s ({:.3} us per packet)",
                small.packets_per_s / 1e6,
                small.us_per_packet()
            ),
            small.packets_per_s >= 3e6,
        ));
    }
    let burst = rows.iter().find(|r| {
        let of = (&*r.clock, r.path, r.cache_maintenance, r.bytes, r.slots);
        of == ("unlimited", "burst", false, 64, cfg.slots)
    });
    if let Some(b) = burst
        && let Some(share) = b.of_bare
    {
        out.push(Target::new(
            "64 B packets by the burst, unlimited clock: >= 90 % of the bare SG ring's rate",
            format!(
                "{:.1} % ({:.2} M/s; the bare ring {:.2} M/s in the same turns)",
                100.0 * share,
                b.packets_per_s / 1e6,
                b.packets_per_s / share / 1e6
            ),
            share >= 0.90,
        ));
        if let Some(own) = b.driver_us {
            // The bare ring of the same turns: what the emulated device
            // itself allows, and what its thread spends per packet.
            let bare = rows.iter().find(|r| {
                let of = (&*r.clock, r.path, r.cache_maintenance, r.bytes, r.slots);
                of == ("unlimited", "bare", false, 64, cfg.slots)
            });
            let device = |r: &Row| {
                r.device_us
                    .map_or(String::new(), |d| format!(", its device thread {d:.3} us"))
            };
            let limit = bare.map_or(String::new(), |r| {
                format!(
                    "; the bare ring {:.2} M/s{}, so 8 M/s {}",
                    r.packets_per_s / 1e6,
                    device(r),
                    if r.packets_per_s >= 8e6 {
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
                    b.cpu_us,
                    device(b)
                ),
                own <= 0.10,
            ));
        }
    }
    out
}

/// One sentence: what the stream keeps of the modelled link, what a load on
/// one core does to it in each mode, and how many small packets software keeps
/// up with, with and without cache maintenance.
pub fn answer(cfg: &Config, rows: &[Row]) -> String {
    let hp = clock_label(cfg.profile.port);
    let link = cfg.profile.port.bytes_per_s().unwrap_or(f64::INFINITY);
    let mut parts = Vec::new();
    if let Some((w, pct)) = worst_large(select(cfg, rows, &hp, "poll", None), link) {
        parts.push(format!(
            "from 2 KiB up a zero-copy stream keeps at least {pct:.1} % of the modelled {hp} \
             link ({:.0} MB/s, {:.2} us of software overhead per packet)",
            w.mbytes_per_s,
            w.overhead_us()
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
                    bytes_label(w.bytes),
                    counted(w.underruns),
                    counted(w.overruns)
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
    if let Some(r) = rows.iter().find(|r| r.loaded) {
        parts.push(format!("threads' scheduling: {}", r.sched));
    }
    if let Some(small) = select(cfg, rows, "unlimited", "poll", None).find(|r| r.bytes == 64) {
        let maint = rows.iter().find(|r| {
            let of = (&*r.clock, r.path, r.cache_maintenance, r.bytes, r.slots);
            of == ("unlimited", "zerocopy", true, 64, cfg.slots)
        });
        parts.push(format!(
            "with no link limit software moves {:.2} M packets/s of 64 B{}",
            small.packets_per_s / 1e6,
            maint.map_or(String::new(), |m| format!(
                " ({:.2} M/s with the cache maintenance a non-coherent board needs)",
                m.packets_per_s / 1e6
            ))
        ));
    }
    sentence(&parts)
}

/// The run as a report: table, targets, MB/s against buffer size for each clock,
/// packets/s against ring size, CPU per packet.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let hp = clock_label(cfg.profile.port);
    let label = |r: &Row| {
        let maint = if r.cache_maintenance {
            " + cache maintenance"
        } else {
            ""
        };
        let load = if r.loaded {
            format!(" beside a load ({} core)", r.load_core)
        } else {
            String::new()
        };
        format!("{} {}{maint}{load}", r.completion, r.path)
    };
    let by_size = |clock: &str, title: String, y_label: &str, y: fn(&Row) -> f64| {
        let chosen: Vec<Row> = rows
            .iter()
            .filter(|r| r.clock == clock && (r.slots == cfg.slots || r.loaded))
            .cloned()
            .collect();
        LinePlot::new(
            title,
            XAxis::Bytes,
            "packet size",
            y_label,
            series_by(&chosen, label, |r| r.bytes as f64, y),
        )
        .log_y()
    };
    let ring: Vec<Row> = rows
        .iter()
        .filter(|r| {
            let of = (&*r.clock, r.completion, r.path, r.cache_maintenance);
            of == ("unlimited", "poll", "zerocopy", false)
                && cfg.ring_sweep_sizes.contains(&r.bytes)
        })
        .cloned()
        .collect();
    let heading = format!(
        "transfer: packets through a ring of DMA buffers each way (scatter-gather, {} \
         descriptors per TAILDESC write, {} buffers unless swept), link = {} HP port with \
         PG021 latencies or unlimited, median of {} runs",
        cfg.batch, cfg.slots, cfg.profile.description, cfg.rounds
    );
    Report::of("transfer", heading, &columns(), rows)
        .answer(answer(cfg, rows))
        .targets(targets(cfg, rows))
        .plots([
            by_size(
                &hp,
                format!("Packet stream, link {hp} (modelled)"),
                "throughput (MB/s)",
                |r| r.mbytes_per_s,
            ),
            by_size(
                "unlimited",
                "Packet stream, unlimited link: software's own rate".into(),
                "throughput (MB/s)",
                |r| r.mbytes_per_s,
            ),
            by_size(
                "unlimited",
                "Host CPU per packet, unlimited link".into(),
                "CPU time per packet (µs)",
                |r| r.cpu_us.max(1e-3),
            ),
            LinePlot::new(
                "Ring size, unlimited link (paper 004)",
                XAxis::PowersOfTwo,
                "buffers in the ring",
                "packets per second",
                series_by(
                    &ring,
                    |r| format!("zerocopy {}", bytes_label(r.bytes)),
                    |r| r.slots as f64,
                    |r| r.packets_per_s,
                ),
            )
            .log_y(),
        ])
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
        let cfg = Config::at(&Setup::TINY);
        let t0 = Instant::now();
        let rows = run(&cfg, &mut |_| {}).unwrap();
        let elapsed = t0.elapsed().as_secs_f64();
        // Per size: coherent zero-copy, copy, irq, adaptive (both clocks);
        // poll, irq and adaptive beside a load on each core it is put on
        // (HP clock: the driver's and the device's where the device has a
        // core of its own); non-coherent zero-copy and copy (both clocks);
        // burst and the bare SG ring in all four settings; the ring sweep's
        // other sizes at 64 B.
        let loads = if rows.iter().any(|r| r.load_core == "device") {
            2
        } else {
            1
        };
        assert_eq!(rows.len(), 2 * (8 + 3 * loads + 4 + 8) + 2, "{rows:#?}");
        for r in &rows {
            // Every row of a size's turns says its share of the bare ring's
            // rate; the bare rows themselves (and the sweep's) do not.
            let beside = r.path != "bare" && r.slots == cfg.slots;
            assert_eq!(r.of_bare.is_some(), beside, "{r:?}");
            // Every run fits in what the test's own clock saw.
            assert!(r.seconds * cfg.rounds as f64 <= elapsed, "{r:?}");
            assert!(r.packets >= r.slots, "{r:?}");
            if r.clock == "1200MB/s" {
                // The link cannot go faster than its clock (a little slack for
                // the packets already in flight when timing starts).
                assert!(r.mbytes_per_s < 1200.0 * 1.05, "{r:?}");
                assert!(r.overhead_us() > -0.1 * r.model_us, "{r:?}");
            } else {
                assert_eq!(r.model_us, 0.0);
            }
            // At most two cores' worth, with room for the CPU clock's jitter
            // over short runs (as loopback's sweep).
            assert!(r.cpu_us > 0.0 && r.cpu_share <= 2.5, "{r:?}");
            // This CPU's own maintenance is measured beside every maintained
            // row, and only there.
            assert_eq!(r.cpu_cache_us.is_some(), r.cache_maintenance, "{r:?}");
            // The driver's own CPU on the burst rows alone; the emulated
            // device's on every row.
            assert_eq!(r.driver_us.is_some(), r.path == "burst", "{r:?}");
            if let Some(d) = r.driver_us {
                assert!(d > 0.0 && d.is_finite(), "{r:?}");
            }
            assert!(r.device_us.is_some_and(|d| d > 0.0), "{r:?}");
            if let Some(c) = r.cpu_cache_us {
                assert!(c > 0.0 && c.is_finite(), "{r:?}");
            }
        }
        assert!(rows.iter().any(|r| r.slots == 8) && rows.iter().any(|r| r.loaded));
        // Beside a load the ring holds LOADED_RING of the 1200 MB/s link:
        // 4.8 MB, 1172 buffers of 4 KiB (1171.9 up, a whole number of the
        // tiny run's batches of 4).
        for r in rows.iter().filter(|r| r.loaded) {
            let want = if r.bytes == 4096 {
                1172
            } else {
                LOADED_RING_MAX
            };
            assert_eq!(r.slots, want, "{r:?}");
            assert!(!r.sched.is_empty(), "{r:?}");
        }
        let report = report(&cfg, &rows);
        let j = report.json;
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
        assert!(answer(&cfg, &rows).contains("M packets/s"));
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
