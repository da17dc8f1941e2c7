//! `dmaflow bench faults`: a seeded, repeatable fault campaign. Transfers of
//! random sizes go through every safe way of moving data on a coherent and a
//! non-coherent board (seeded random cache eviction) while the emulated
//! fabric injects every fault it has: stalls the engine recovers from and
//! stalls it cannot (a dead engine), DMASR errors, descriptor status errors,
//! lost interrupts, and panicking neighbours of an accelerator node.
//!
//! What must hold whatever fails: no byte delivered as data differs from what
//! was sent, no canary buffer handed out after a failure is written by a
//! device once every stall is over, and no call hangs (every campaign runs
//! under a watchdog).

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use dmaflow::accel::stage::{self, StageConfig, StageStats};
use dmaflow::axi::Config as AxiConfig;
use dmaflow::axi::regs::{DESC_STS_DEC_ERR, DESC_STS_SLV_ERR, DMASR_DMA_SLV_ERR};
use dmaflow::dma::{Completion, PacketRing, Proxy};
use dmaflow::graph::Graph;
use dmaflow::mem::{DmaBuf, DmaPool};
use dmaflow::platform::MemoryModel;
use dmaflow::rig::Rig;
use dmaflow::sim::{Clock, Faults, Loopback};

use super::columns::Columns;
use super::conditions::Conditions;
use super::dma::proxy;
use super::error::Error;
use super::frame::{Bench, Findings, Point};
use super::harness::Setup;
use super::report::Target;

/// `dmaflow bench faults`.
pub static EXPERIMENT: Bench<Config, &'static str, Tally> = Bench {
    name: "faults",
    emulator_only: "it injects faults into the emulated engine",
    question: "A seeded fault campaign through every safe way of moving data: nothing delivered \
               wrong, no late write, no hang.",
    conditions: Conditions {
        timed: "nothing: every figure is a count (transfers, faults injected, recovered, \
                late writes)",
        against: "what every safe API must guarantee: nothing delivered wrong, no late \
                  write, no hang",
        model: "the injected faults",
        paper: "no paper measures this",
    },
    heading: |cfg| {
        format!(
            "{} operations per way of moving data and board (seed {:#x}, driver timeout \
             {:?}), coherent and non-coherent (random eviction) boards; counts added up over \
             the rounds",
            cfg.operations, cfg.seed, cfg.timeout
        )
    },
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// Campaign settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Operations per way of moving data and board (each one or more
    /// transfers).
    pub operations: usize,
    /// Seed of every random choice (sizes, faults, eviction).
    pub seed: u64,
    /// The driver's timeout: stalls are set against it.
    pub timeout: Duration,
    /// Campaigns per way of moving data and board (the same seed each).
    pub rounds: usize,
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        // The tiny run's timeout is well above what a loaded 2-core machine
        // delays a thread, so an operation with no fault never times out.
        let (operations, ms) = setup.tier.pick((400, 40), (80, 40), (20, 80));
        Config {
            operations,
            seed: 0x00D3_FA17,
            timeout: Duration::from_millis(ms),
            rounds: 1,
        }
    }
}

/// Ways of moving data the campaign drives.
const APIS: [&str; 6] = [
    "two_way",
    "owned",
    "dropped",
    "packet_ring",
    "proxy",
    "accelerator_node",
];

/// What one way of moving data on one board went through in one campaign.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// `coherent` or `noncoherent` (with random eviction).
    pub memory: &'static str,
    /// The way of moving data.
    pub api: &'static str,
    /// Transfers asked for (each direction of a two-way transfer counted once).
    pub transfers: u64,
    /// Bytes delivered and checked.
    pub bytes: u64,
    /// Faults injected.
    pub faults: u64,
    /// Faults after which the same engine moved data correctly again.
    pub recovered: u64,
    /// Engines that could not be halted (replaced by a new board).
    pub engines_lost: u64,
    /// Bytes of DMA memory kept by those engines for good.
    pub bytes_lost: u64,
    /// Bytes delivered as data that differ from what was sent (must be 0).
    pub bytes_wrong: u64,
    /// Canary bytes a device wrote after its transfer had ended (must be 0).
    pub late_writes: u64,
    /// Calls that failed with no fault injected (must be 0).
    pub unexpected_errors: u64,
    /// Campaigns stopped by the watchdog (must be 0).
    pub hangs: u64,
    /// Wall time of the campaign.
    pub seconds: f64,
}

/// A way of moving data on a board, over the rounds.
pub type Row = super::frame::Row<&'static str, Tally>;

impl Tally {
    /// Nothing counted yet for `api` on a board of memory `model`.
    fn of(model: MemoryModel, api: &'static str) -> Tally {
        Tally {
            memory: match model {
                MemoryModel::Coherent => "coherent",
                MemoryModel::NonCoherent => "noncoherent",
            },
            api,
            ..Tally::default()
        }
    }
}

/// A small xorshift generator: the campaign is repeatable from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (super::peers::xorshift(&mut self.0) % n.max(1) as u64) as usize
    }
}

/// A fault for one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// A stall the engine recovers from (longer than the timeout, shorter than
    /// what recovery waits).
    StallShort,
    /// A stall longer than recovery waits: the engine is lost.
    StallLong,
    /// DMASR error bits on the next completion.
    DmaError,
    /// Error bits in the next descriptor's status (scatter-gather only).
    DescriptorError,
    /// A completion without its interrupt (the operation waits on the line).
    DropIrq,
    /// A neighbour node panics (accelerator nodes only).
    Panic,
}

impl Fault {
    fn draw(rng: &mut Rng, api: &str) -> Fault {
        let sg = matches!(api, "packet_ring" | "accelerator_node");
        match rng.below(16) {
            0..=7 => Fault::None,
            8 | 9 => Fault::StallShort,
            10 => Fault::StallLong,
            11 | 12 => Fault::DmaError,
            13 if sg => Fault::DescriptorError,
            14 => Fault::DropIrq,
            15 if api == "accelerator_node" => Fault::Panic,
            _ => Fault::None,
        }
    }

    /// Whether the operation must still deliver its data correctly.
    fn harmless(self) -> bool {
        matches!(self, Fault::None | Fault::DropIrq)
    }
}

type Eng = dmaflow::rig::SimEngine;

/// One emulated board with one engine around a loopback core.
struct Lab {
    pool: DmaPool,
    engine: Option<Eng>,
    proxy: Option<Proxy>,
    /// The board and its fabric, the engine taken out.
    rig: Rig,
}

impl Lab {
    fn new(cfg: &Config, sg: bool, model: MemoryModel, seed: u64) -> Result<Self, Error> {
        let axi = AxiConfig {
            timeout: cfg.timeout,
            ..AxiConfig::default()
        };
        let mut rig = Rig::configured(
            16 << 20,
            Clock::Unlimited,
            sg,
            dmaflow::rig::policy_for(model),
            model,
            Box::new(Loopback),
            axi,
        )?;
        rig.board
            .set_random_eviction((model == MemoryModel::NonCoherent).then_some(seed));
        let engine = rig.engines.remove(0);
        Ok(Lab {
            pool: engine.pool().clone(),
            engine: Some(engine),
            proxy: None,
            rig,
        })
    }

    fn engine(&self) -> &Eng {
        self.engine
            .as_ref()
            .unwrap_or_else(|| unreachable!("the engine went to the proxy"))
    }

    fn inject(&self, cfg: &Config, fault: Fault, rng: &mut Rng) {
        let mut f = Faults::default();
        match fault {
            Fault::None | Fault::Panic => return,
            Fault::StallShort => f.stall = Some(cfg.timeout * 3 / 2),
            Fault::StallLong => f.stall = Some(cfg.timeout * 4),
            Fault::DmaError => f.force_error = Some((rng.below(2), DMASR_DMA_SLV_ERR)),
            Fault::DescriptorError => {
                let status = [DESC_STS_SLV_ERR, DESC_STS_DEC_ERR];
                f.descriptor_error = Some((rng.below(2), status[rng.below(2)]));
            }
            Fault::DropIrq => f.drop_irq = true,
        }
        self.rig.fabric.inject(f);
    }
}

/// Bytes of `pattern` for operation `op`.
fn data(len: usize, op: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(op * 7) as u8)
        .collect()
}

/// Bytes that differ between what came and what was sent (a length difference
/// counts in full).
fn wrong(got: &[u8], want: &[u8]) -> u64 {
    let differ = got.iter().zip(want).filter(|(a, b)| a != b).count();
    (differ + got.len().abs_diff(want.len())) as u64
}

/// What one operation did.
#[derive(Default)]
struct Outcome {
    transfers: u64,
    bytes: u64,
    wrong: u64,
    failed: bool,
}

fn filled(pool: &DmaPool, bytes: &[u8]) -> Result<DmaBuf<u8>, Error> {
    let mut b = pool.alloc::<u8>(bytes.len())?;
    b.as_mut_slice().copy_from_slice(bytes);
    Ok(b)
}

/// One operation of `api` with `len` bytes.
fn operate(
    lab: &mut Lab,
    api: &str,
    len: usize,
    op: u64,
    completion: Completion,
    fault: Fault,
) -> Result<Outcome, Error> {
    let sent = data(len, op);
    let mut transfers = 1;
    // What came back as data; `None` when the call failed.
    let got: Option<Vec<u8>> = match api {
        "two_way" => {
            let tx = filled(&lab.pool, &sent)?;
            let mut rx = lab.pool.alloc::<u8>(len)?;
            let n = lab.engine().two_way(&tx, len, &mut rx, completion);
            n.ok().map(|n| rx.as_slice()[..n].to_vec())
        }
        "owned" | "dropped" => {
            let tx = filled(&lab.pool, &sent)?;
            let rx = lab.pool.alloc::<u8>(len)?;
            match lab.engine().begin(tx, len, rx, len, completion) {
                Ok(flight) if api == "dropped" => {
                    // Dropped before it is waited for: the engine is halted
                    // first (or the buffers are lost to it).
                    drop(flight);
                    return Ok(Outcome {
                        transfers,
                        ..Outcome::default()
                    });
                }
                Ok(flight) => flight
                    .wait()
                    .ok()
                    .map(|d| d.rx.as_slice()[..d.received].to_vec()),
                Err(_) => None,
            }
        }
        "packet_ring" => {
            transfers = len.div_ceil(4096) as u64;
            let e = lab.engine();
            let ring = || {
                let mut ring = PacketRing::new(e, 8, 4096, 1, completion)?;
                let mut got = Vec::new();
                let mut buf = vec![0u8; 4096];
                for chunk in sent.chunks(4096) {
                    ring.send(chunk)?;
                    let n = ring.recv(&mut buf)?;
                    got.extend_from_slice(&buf[..n]);
                }
                Ok::<_, dmaflow::dma::Error>(got)
            };
            ring().ok()
        }
        "proxy" => {
            if lab.proxy.is_none() {
                let engine = lab.engine.take().ok_or(Error::Panicked("proxy"))?;
                lab.proxy = Some(proxy(vec![engine])?);
            }
            let proxy = lab.proxy.as_ref();
            proxy.and_then(|p| p.transfer(sent.clone(), len).ok())
        }
        _ => {
            // An accelerator node.
            transfers = len.div_ceil(1024) as u64;
            let engine = lab.engine.take().ok_or(Error::Panicked("node"))?;
            let (got, engine) = node(&lab.pool, engine, &sent, completion, fault)?;
            lab.engine = Some(engine);
            got
        }
    };
    Ok(Outcome {
        transfers,
        bytes: got.as_ref().map_or(0, |g| g.len() as u64),
        wrong: got.as_ref().map_or(0, |g| wrong(g, &sent)),
        failed: got.is_none(),
    })
}

/// source -> accelerator node -> sink over queues in the lab's DMA memory;
/// the engine comes back with what the sink got (`None` when the graph
/// failed). With `Fault::Panic` the sink panics half-way.
fn node(
    pool: &DmaPool,
    engine: Eng,
    sent: &[u8],
    completion: Completion,
    fault: Fault,
) -> Result<(Option<Vec<u8>>, Eng), Error> {
    let memory = pool.queue_memory()?;
    let mut g = Graph::new();
    let (mut src, mut ain) =
        g.connect_in::<u8>(("source", "out"), ("acc", "in"), 16 << 10, memory.clone())?;
    let (mut aout, mut sink) =
        g.connect_in::<u8>(("acc", "out"), ("sink", "in"), 16 << 10, memory)?;
    let input = sent.to_vec();
    g.node("source", move || {
        for c in input.chunks(1500) {
            src.write(c)?;
        }
        Ok(())
    })?;
    // The engine comes back from the node's thread when it is done.
    let (back, returned) = mpsc::channel();
    g.node("acc", move || {
        let cfg = StageConfig {
            window: 1024,
            hop: 1024,
            out_max: 1024,
            min_window: 1,
            depth: 4,
            completion,
        };
        let ran: Result<StageStats, _> = stage::run(&engine, &cfg, &mut ain, &mut aout);
        let _ = back.send(engine);
        ran?;
        Ok(())
    })?;
    // What the sink got comes back when it is done.
    let (into, got) = mpsc::channel();
    let panic_at = (fault == Fault::Panic).then_some(sent.len() / 2);
    g.node("sink", move || {
        let mut all = Vec::new();
        loop {
            let s = sink.peek(1)?;
            if s.is_empty() {
                break;
            }
            all.extend_from_slice(s);
            let k = s.len();
            sink.consume(k)?;
            if panic_at.is_some_and(|at| all.len() >= at) {
                panic!("a neighbour of the accelerator node panics (injected)");
            }
        }
        let _ = into.send(all);
        Ok(())
    })?;
    let ran = g.run();
    let engine = returned
        .try_recv()
        .map_err(|_| Error::Panicked("accelerator node"))?;
    Ok((
        ran.ok().map(|()| got.try_recv().unwrap_or_default()),
        engine,
    ))
}

/// Canaries of 256 KiB outstanding at most (a quarter of a lab's 16 MiB).
const MAX_CANARIES: usize = 16;

/// Runs one way of moving data on one board.
fn campaign(cfg: &Config, model: MemoryModel, api: &'static str) -> Result<Tally, Error> {
    let t0 = Instant::now();
    let sg = matches!(api, "packet_ring" | "accelerator_node");
    let seed = cfg.seed ^ (api.len() as u64 * 0x9E37) ^ (model as u64 + 1);
    let mut rng = Rng(seed | 1);
    let mut lab = Lab::new(cfg, sg, model, seed)?;
    let mut row = Tally::of(model, api);
    // Canaries handed out after failures, checked once every stall is over.
    // Each canary has a pattern byte of its own, so filling it changes every
    // line (the emulated cache knows a line is dirty by its bytes).
    let mut canaries: Vec<(DmaBuf<u8>, u8, Instant)> = Vec::new();
    let mut next_pattern = 0u8;
    let mut dead_labs = Vec::new();
    let check = |canaries: &mut Vec<(DmaBuf<u8>, u8, Instant)>, row: &mut Tally, all: bool| {
        canaries.retain(|(b, pattern, until)| {
            if !all && Instant::now() < *until {
                return true;
            }
            let _ = b.sync_for_cpu(b.len());
            row.late_writes += b.as_slice().iter().filter(|&x| x != pattern).count() as u64;
            false
        });
    };
    let modes = [Completion::Poll, Completion::Yield, Completion::Irq];
    for op in 0..cfg.operations as u64 {
        let len = 1 + rng.below(if api == "accelerator_node" {
            48 << 10
        } else {
            20 << 10
        });
        let fault = Fault::draw(&mut rng, api);
        let completion = match fault {
            Fault::DropIrq => Completion::Irq,
            _ => modes[rng.below(3)],
        };
        lab.inject(cfg, fault, &mut rng);
        let armed = Instant::now();
        let o = operate(&mut lab, api, len, op, completion, fault)?;
        // The faults not yet consumed taken back out.
        lab.rig.fabric.inject(Faults::default());
        row.transfers += o.transfers;
        row.bytes += o.bytes;
        row.bytes_wrong += o.wrong;
        row.faults += u64::from(!fault.harmless());
        row.unexpected_errors += u64::from(fault.harmless() && o.failed);
        if fault.harmless() && !o.failed {
            continue;
        }
        // After a failure: what the program is handed next must stay its own
        // once the fault's stall is over.
        let until = armed + cfg.timeout * 5;
        // At most a quarter of the pool in canaries: failures that come fast
        // (an error bit fails a transfer at once) would otherwise fill it
        // with canaries waiting out their stall, and the next operation would
        // find no memory.
        let room = canaries.len() < MAX_CANARIES;
        if let Some(mut c) = room.then(|| lab.pool.alloc::<u8>(256 << 10).ok()).flatten() {
            next_pattern = next_pattern.wrapping_add(97) | 1;
            c.as_mut_slice().fill(next_pattern);
            let _ = c.sync_for_device(c.len());
            canaries.push((c, next_pattern, until));
        }
        // The same engine again, with no fault: recovered, or lost for good.
        let again = operate(
            &mut lab,
            api,
            4096,
            op + 1_000_000,
            Completion::Poll,
            Fault::None,
        )?;
        row.bytes_wrong += again.wrong;
        if !again.failed {
            row.recovered += u64::from(!fault.harmless());
        } else if lab.engine.as_ref().is_some_and(|e| e.dma().is_failed())
            || api == "proxy"
            || fault == Fault::StallLong
        {
            row.engines_lost += 1;
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            check(&mut canaries, &mut row, true);
            row.bytes_lost += lab.pool.lost_bytes() as u64;
            let old = std::mem::replace(
                &mut lab,
                Lab::new(cfg, sg, model, super::peers::xorshift(&mut rng.0))?,
            );
            // The dead board's memory stays mapped: its device may still write.
            dead_labs.push(old);
        } else {
            row.unexpected_errors += 1;
        }
        check(&mut canaries, &mut row, false);
    }
    std::thread::sleep(cfg.timeout * 5);
    check(&mut canaries, &mut row, true);
    row.bytes_lost += lab.pool.lost_bytes() as u64;
    drop(dead_labs);
    row.seconds = t0.elapsed().as_secs_f64();
    Ok(row)
}

/// Both boards, every way of moving data.
fn points(_: &Config) -> Vec<Point<&'static str>> {
    let mut v = Vec::new();
    for series in ["coherent", "noncoherent"] {
        for at in APIS {
            v.push(Point { series, at });
        }
    }
    v
}

/// One campaign through one way of moving data on one board, under a
/// watchdog, the injected panics not printed.
fn measure(cfg: &Config, p: &Point<&'static str>) -> Result<Tally, Error> {
    type Hook = dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync;
    let previous: Arc<Hook> = Arc::from(std::panic::take_hook());
    let hook = previous.clone();
    std::panic::set_hook(Box::new(move |info| {
        let injected = info
            .payload()
            .downcast_ref::<&str>()
            .is_some_and(|m| m.contains("(injected)"));
        if !injected {
            hook(info);
        }
    }));
    let tally = watched(cfg, p);
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| previous(info)));
    tally
}

/// The campaign of `p` on a thread of its own: a hang if it outlives every
/// timeout it could add up to.
fn watched(cfg: &Config, p: &Point<&'static str>) -> Result<Tally, Error> {
    let model = match p.series {
        "coherent" => MemoryModel::Coherent,
        _ => MemoryModel::NonCoherent,
    };
    let api = p.at;
    let (tx, rx) = mpsc::channel();
    let c = cfg.clone();
    std::thread::Builder::new()
        .name(format!("faults-{api}"))
        .spawn(move || {
            let _ = tx.send(campaign(&c, model, api));
        })
        .map_err(Error::io("fault campaign thread"))?;
    // Every operation is bounded by the driver's timeouts: far more than they
    // add up to means something waits for ever.
    let limit = cfg.timeout * 40 * cfg.operations as u32 + Duration::from_secs(60);
    match rx.recv_timeout(limit) {
        Ok(tally) => tally,
        Err(RecvTimeoutError::Timeout) => Ok(Tally {
            hangs: 1,
            seconds: limit.as_secs_f64(),
            ..Tally::of(model, api)
        }),
        Err(RecvTimeoutError::Disconnected) => Err(Error::Panicked("the fault campaign")),
    }
}

/// `count` added up over the rounds.
fn sum(r: &Row, count: impl Fn(&Tally) -> u64) -> u64 {
    r.samples.iter().map(count).sum()
}

/// Totals over every round of every row.
fn total(rows: &[Row]) -> Tally {
    let sum = |count: fn(&Tally) -> u64| rows.iter().map(|r| sum(r, count)).sum();
    Tally {
        memory: "both",
        api: "all",
        transfers: sum(|r| r.transfers),
        bytes: sum(|r| r.bytes),
        faults: sum(|r| r.faults),
        recovered: sum(|r| r.recovered),
        engines_lost: sum(|r| r.engines_lost),
        bytes_lost: sum(|r| r.bytes_lost),
        bytes_wrong: sum(|r| r.bytes_wrong),
        late_writes: sum(|r| r.late_writes),
        unexpected_errors: sum(|r| r.unexpected_errors),
        hangs: sum(|r| r.hangs),
        seconds: rows.iter().flat_map(|r| r.each(|t| t.seconds)).sum(),
    }
}

/// The rows' columns: every count added up over the rounds.
fn columns() -> Columns<'static, Row> {
    macro_rules! count {
        ($c:expr, $header:expr, $key:ident, $doc:expr) => {
            $c.plain($header, stringify!($key), |r: &Row| sum(r, |t| t.$key))
                .doc($doc)
        };
    }
    let c = Columns::new()
        .series(
            "memory",
            "memory",
            "coherent or noncoherent (random eviction)",
        )
        .plain("api", "api", |r: &Row| r.point.at)
        .doc("two_way, owned, dropped, packet_ring, proxy or accelerator_node");
    let c = count!(c, "transfers", transfers, "transfers asked for");
    let c = count!(c, "bytes", bytes, "bytes delivered and checked");
    let c = count!(c, "faults", faults, "faults injected");
    let c = count!(
        c,
        "recovered",
        recovered,
        "faults after which the same engine moved data right"
    );
    let c = count!(
        c,
        "lost",
        engines_lost,
        "engines that could not be halted (replaced)"
    );
    let c = count!(
        c,
        "bytes_lost",
        bytes_lost,
        "DMA memory kept for good by engines that could not be halted in time"
    );
    let c = count!(
        c,
        "wrong",
        bytes_wrong,
        "bytes delivered as data that differ from what was sent"
    );
    let c = count!(
        c,
        "late",
        late_writes,
        "canary bytes a device wrote after its transfer ended"
    );
    let c = count!(
        c,
        "unexp",
        unexpected_errors,
        "failures with no fault injected"
    );
    count!(c, "hangs", hangs, "campaigns stopped by the watchdog")
        .kept("seconds", |r| r.each(|t| t.seconds).iter().sum::<f64>())
        .doc("wall seconds of the campaigns")
}

/// What the campaign must show: nothing wrong, nothing written late, no
/// hang, no error without a fault; the totals under the table.
fn findings(_: &Config, rows: &[Row]) -> Findings {
    let t = total(rows);
    let targets = [
        ("bytes delivered wrong = 0", t.bytes_wrong),
        ("late writes into reachable memory = 0", t.late_writes),
        ("hangs = 0", t.hangs),
        ("errors with no fault injected = 0", t.unexpected_errors),
    ];
    Findings {
        clauses: vec![format!(
            "{} transfers ({:.1} MB) with {} faults injected: {} recovered on the same engine, \
             {} engines lost ({} bytes of DMA memory kept by them), {} bytes delivered wrong, \
             {} late writes into reachable memory, {} hangs",
            t.transfers,
            t.bytes as f64 / 1e6,
            t.faults,
            t.recovered,
            t.engines_lost,
            t.bytes_lost,
            t.bytes_wrong,
            t.late_writes,
            t.hangs
        )],
        notes: format!(
            "all, both boards: {} transfers, {} bytes, {} faults, {} recovered, {} engines \
             lost, {} bytes lost, {} wrong, {} late, {} unexpected, {} hangs\n",
            t.transfers,
            t.bytes,
            t.faults,
            t.recovered,
            t.engines_lost,
            t.bytes_lost,
            t.bytes_wrong,
            t.late_writes,
            t.unexpected_errors,
            t.hangs
        ),
        targets: (targets.into_iter())
            .map(|(what, n)| Target::new(what, n.to_string(), n == 0))
            .collect(),
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The campaign at CI's size: every fault the fabric has, through every
    /// way of moving data, on both boards: no byte delivered wrong, no late
    /// write into reachable memory, no hang, no error without a fault; and
    /// the faults are really there (some recovered, some engines lost).
    #[test]
    fn a_small_campaign_finds_nothing_wrong() {
        let cfg = Config::at(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * APIS.len());
        let (t, report) = (total(&rows), EXPERIMENT.report(&cfg, &rows));
        let table = &report.text;
        assert_eq!(t.bytes_wrong, 0, "{table}");
        assert_eq!(t.late_writes, 0, "{table}");
        assert_eq!(t.hangs, 0, "{table}");
        assert_eq!(t.unexpected_errors, 0, "{table}");
        assert!(t.faults > 0 && t.recovered > 0, "{table}");
        assert!(t.bytes > 0);
        assert!(report.targets.iter().all(|x| x.met));
        assert_eq!(
            report.json["rows"][0]["faults"],
            sum(&rows[0], |t| t.faults)
        );
    }
}
