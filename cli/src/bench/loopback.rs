//! `dmaflow bench loopback`: two-way loopback transfers on the emulated fabric
//! (paper 002's Figs. 4-5), 8 B to 6 MB, for each completion mode and data path,
//! at the board profile's port clock. Every transfer sends fresh data into a
//! cleared receive buffer, and what comes back is checked. At each size the
//! modes and paths take turns in rounds (a share of the transfers each); the
//! kernel-style proxy, which takes the engine over, runs after them.

use dmaflow::dma::{Completion, Engine, Partition, Timing};
use dmaflow::platform::{IrqLine, MemoryModel, RegisterSpace};
use dmaflow::sim::{Clock, Loopback};

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::dma::{proxy, rig};
use super::error::Error;
use super::harness::{
    OnBoard, OnGpu, Progress, Setup, Spec, Tables, Tier, bytes_label, median, on_board,
};
use super::meter::{Meter, Samples, Tally};
use super::on_board::Mode;
use super::report::{Report, Target, per_mode, sentence, series_by};
use super::spread::{Spread, in_turns};

/// `dmaflow bench loopback`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "loopback",
    on_gpu: Some(OnGpu::Gpu(Tables::MOVED)),
    board: OnBoard::Runs(Mode::Direct, run_on_board),
    question: "Two-way loopback transfers on the emulated fabric (paper 002).",
    keys: "completion (poll|yield|irq|adaptive|proxy|bare: the emulator\n\
          baseline),\n\
          path (zerocopy|copy), over_bare_us (over the baseline),\n\
          buffering (single|double), partition (unique|blocks),\n\
          block_bytes, bytes, median_us (two-way transfer),\n\
          round_median_us_min, round_median_us_max, rounds (the modes\n\
          take turns round by round; proxy's rounds are consecutive\n\
          shares), model_us,\n\
          overhead_us, cpu_us (driver threads and interrupt delivery),\n\
          irq_delivery_us (of cpu_us: the emulated interrupt's eventfd\n\
          write and wake-up, a handler's work on a board), cpu_share,\n\
          tx_us (MM2S start to its completion), rx_us (S2MM start to its\n\
          completion), us_per_byte,\n\
          iterations (times medians, at the profile's port clock)",
    conditions: Conditions {
        timed: "each two-way transfer from the call to its return; TX and RX from their own \
                starts; the modes in turns, five rounds per size",
        against: "the modelled device (model_us) and polling's CPU",
        model: "model_us: PG021's latencies and the HP port's clock; overhead_us also holds \
                the emulator's own work, which the bare rows (the thinnest driver on the same \
                fabric) measure: over_bare_us is dmaflow's",
        paper: USER_X86,
    },
    ..Spec::new(Config::at, run, report)
};

/// What to measure.
#[derive(Debug, Clone)]
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
    /// Rounds per size: the modes and paths take turns, each round a share of
    /// the transfers, the order reversed every other round.
    pub rounds: usize,
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
}

/// One point: median times of a two-way transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `poll`, `yield`, `irq`, `proxy` or `bare`.
    pub completion: &'static str,
    /// How the message moved: path (`zerocopy` or `copy`), buffering
    /// (`single` or `double`: driver buffers the copy goes through) and
    /// partition (`unique`: one transfer, or `blocks` of the configured size).
    pub way: Way,
    /// Block size for `blocks`, the whole message for `unique`.
    pub block_bytes: usize,
    /// Bytes each way.
    pub bytes: usize,
    /// Median microseconds per two-way transfer (call to return).
    pub median_us: f64,
    /// Median microseconds from programming MM2S to its completion.
    pub tx_us: f64,
    /// Median microseconds from programming S2MM (before MM2S) to its completion.
    pub rx_us: f64,
    /// What the modelled device needs to move the message in one transfer
    /// (MM2S start-up, the link, the S2MM write latency), in microseconds.
    pub model_us: f64,
    /// Host CPU of the driver-side threads over the transfers, the emulated
    /// device's interrupt delivery included (the eventfd write and the
    /// waiter's wake-up, an interrupt handler's work on a board).
    pub cost: Tally,
    /// Transfers measured.
    pub iterations: usize,
    /// The medians of the rounds the transfers were measured in
    /// (microseconds).
    pub rounds: Spread,
}

/// A way of moving one message: (path, buffering, partition).
pub type Way = (&'static str, &'static str, &'static str);

impl Row {
    /// Measured minus modelled: what software and the emulator added to the
    /// device's time.
    pub fn overhead_us(&self) -> f64 {
        self.median_us - self.model_us
    }

    /// Measured minus the emulator baseline at the same size (the thinnest
    /// driver's time, [`super::baseline`]): what dmaflow's driver added.
    pub fn over_bare_us(&self, rows: &[Row]) -> Option<f64> {
        rows.iter()
            .find(|b| b.completion == "bare" && b.bytes == self.bytes)
            .map(|b| self.median_us - b.median_us)
    }
}

/// The ways of moving one message.
fn ways(bytes: usize, block: usize) -> Vec<Way> {
    let mut v = vec![("zerocopy", "single", "unique")];
    for buffering in ["single", "double"] {
        v.push(("copy", buffering, "unique"));
        if bytes > block {
            v.push(("copy", buffering, "blocks"));
        }
    }
    v
}

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

/// Runs the sweep; every transfer's data is fresh and checked. With two or more
/// cores the emulated device runs on a core of its own.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let largest = cfg.sizes.iter().copied().max().unwrap_or(0);
    let (mut rig, _placed) = rig(8 * largest, cfg.clock, cfg.memory, Box::new(Loopback))?;
    // The same engine's registers for the emulator baseline.
    let regs = rig.board.registers(0)?;
    let engine = rig.engines.remove(0);
    let model_us = |bytes: usize| cfg.clock.two_way(bytes, false).as_secs_f64() * 1e6;
    measure(cfg, engine, &regs, model_us, progress)
}

/// The same sweep on a real board's engine in loopback (`--board`): nothing
/// is modelled, so `model_us` is 0.
pub fn run_on_board(
    cfg: &Config,
    board: super::on_board::BoardRig,
    progress: Progress,
) -> Result<Vec<Row>, Error> {
    measure(cfg, board.engine, &board.registers, |_| 0.0, progress)
}

/// The sweep over `engine` (its MM2S stream looped back to its S2MM), whose
/// register window `regs` also is, for the bare baseline; `model_us` gives
/// what the device needs for a transfer of so many bytes.
fn measure<R, I>(
    cfg: &Config,
    engine: Engine<R, I>,
    regs: &dyn RegisterSpace,
    model_us: impl Fn(usize) -> f64,
    mut progress: impl FnMut(&str),
) -> Result<Vec<Row>, Error>
where
    R: RegisterSpace + Send + 'static,
    I: IrqLine + Send + 'static,
{
    let mut rows = Vec::new();
    let mut row = |completion, way: Way, bytes, s: Samples, rounds: &[f64]| {
        rows.push(Row {
            completion,
            way,
            block_bytes: if way.2 == "blocks" { cfg.block } else { bytes },
            bytes,
            median_us: median(&s.total),
            tx_us: median(&s.tx),
            rx_us: median(&s.rx),
            model_us: model_us(bytes),
            cost: s.cost,
            iterations: s.total.len(),
            rounds: Spread::of(rounds),
        })
    };
    let iterations = |bytes: usize| (cfg.bytes_per_point / bytes).clamp(5, cfg.max_iterations);
    let mut seq = 0u64;
    for &bytes in &cfg.sizes {
        let iterations = iterations(bytes);
        let mut tx = engine.pool().alloc::<u8>(bytes)?;
        let mut rx = engine.pool().alloc::<u8>(bytes)?;
        let mut data = vec![0u8; bytes];
        let mut out = vec![0u8; bytes];
        // Proxy takes the engine over: it runs after these. The others take
        // turns, a share of the transfers per round.
        // The emulator baseline (`bare`: the thinnest driver, a spin on
        // DMASR) takes its turns among them.
        let mut points: Vec<(Completion, Way)> = [
            Completion::Poll,
            Completion::Yield,
            Completion::Irq,
            Completion::Adaptive,
        ]
        .into_iter()
        .flat_map(|c| ways(bytes, cfg.block).into_iter().map(move |w| (c, w)))
        .collect();
        points.push((Completion::Poll, ("bare", "single", "unique")));
        let rounds = cfg.rounds.clamp(1, iterations);
        let mut samples = vec![Samples::default(); points.len()];
        let medians = in_turns(points.len(), rounds, |i, round| {
            let (c, (path, buffering, partition)) = points[i];
            let what = format!(
                "loopback {} {} {path} {buffering} {partition}",
                bytes_label(bytes),
                c.name()
            );
            progress(&format!("{what} round {}", round + 1));
            let depth = if buffering == "double" { 2 } else { 1 };
            let split = if partition == "blocks" {
                Partition::Blocks(cfg.block)
            } else {
                Partition::Unique
            };
            // This round's share of the transfers.
            let share = iterations / rounds + usize::from(round < iterations % rounds);
            let s = &mut samples[i];
            let from = s.total.len();
            for _ in 0..share {
                seq += 1;
                if path == "copy" {
                    fill(seq, &mut data);
                    out.fill(0);
                    let m = Meter::start(None);
                    let n = engine.send_message(&data, &mut out, split, depth, c)?;
                    s.push(&m, engine.last_timing());
                    check(&what, seq, bytes, n, &out)?;
                    continue;
                }
                fill(seq, tx.as_mut_slice());
                rx.as_mut_slice().fill(0);
                let m = Meter::start(None);
                let (n, timing) = if path == "bare" {
                    // SAFETY: `regs` is engine 0's register window and `tx`,
                    // `rx` come from that engine's pool; `recover` halts that
                    // engine.
                    unsafe {
                        super::baseline::two_way(regs, &tx, &mut rx, bytes, || {
                            engine.dma().recover()
                        })
                    }?;
                    (bytes, Timing::default())
                } else {
                    (
                        engine.two_way(&tx, bytes, &mut rx, c)?,
                        engine.last_timing(),
                    )
                };
                s.push(&m, timing);
                check(&what, seq, bytes, n, rx.as_slice())?;
            }
            if path == "bare" {
                // dmaflow's driver gets the engine back in a known state
                // (its register cache forgotten).
                engine.dma().reset()?;
            }
            Ok::<_, Error>(median(&s.total[from..]))
        })?;
        for ((c, way), (s, m)) in points.into_iter().zip(samples.into_iter().zip(&medians)) {
            match way {
                ("bare", ..) => row("bare", ("zerocopy", way.1, way.2), bytes, s, m),
                _ => row(c.name(), way, bytes, s, m),
            }
        }
    }
    // The kernel-style driver thread takes the engine over: standard I/O only.
    // It starts on the driver's cores (threads inherit the caller's).
    let proxy = proxy(vec![engine])?;
    for &bytes in &cfg.sizes {
        let iterations = iterations(bytes);
        let what = format!("loopback {} proxy copy", bytes_label(bytes));
        progress(&what);
        let mut buf = vec![0u8; bytes];
        let mut s = Samples::default();
        for _ in 0..iterations {
            seq += 1;
            buf.resize(bytes, 0);
            fill(seq, &mut buf);
            let m = Meter::start(Some(&proxy));
            buf = proxy.transfer(buf, bytes)?;
            s.push(&m, proxy.last_timing());
            check(&what, seq, bytes, buf.len(), &buf)?;
        }
        // The proxy's transfers in one block (it holds the engine): its
        // rounds are consecutive shares of them.
        let shares: Vec<f64> = s
            .total
            .chunks(iterations.div_ceil(cfg.rounds.clamp(1, iterations)))
            .map(median)
            .collect();
        row("proxy", ("copy", "single", "unique"), bytes, s, &shares);
    }
    Ok(rows)
}

/// The rows' columns.
fn columns(rows: &[Row]) -> Columns<'_, Row> {
    Columns::<Row>::new()
        .col("bytes", "bytes", |r| bytes_label(r.bytes), |r| r.bytes)
        .plain("completion", "completion", |r| r.completion)
        .plain("path", "path", |r| r.way.0)
        .plain("buffering", "buffering", |r| r.way.1)
        .plain("partition", "partition", |r| r.way.2)
        .kept("block_bytes", |r| r.block_bytes)
        .fixed("us (median)", "median_us", 2, |r| r.median_us)
        .shown("rounds' medians", |r| {
            format!("{:.2}..{:.2}", r.rounds.min, r.rounds.max)
        })
        .kept("round_median_us_min", |r| r.rounds.min)
        .kept("round_median_us_max", |r| r.rounds.max)
        .kept("rounds", |r| r.rounds.n)
        .fixed("model us", "model_us", 2, |r| r.model_us)
        .fixed("overhead us", "overhead_us", 2, Row::overhead_us)
        .col(
            "over bare us",
            "over_bare_us",
            |r| {
                r.over_bare_us(rows)
                    .filter(|_| r.completion != "bare")
                    .map_or("-".into(), |d| format!("{d:+.2}"))
            },
            |r| r.over_bare_us(rows),
        )
        .fixed("CPU us", "cpu_us", 2, |r| r.cost.cpu_us())
        .fixed("of it irq delivery", "irq_delivery_us", 2, |r| {
            r.cost.delivery_us()
        })
        .percent("CPU share", "cpu_share", |r| r.cost.cpu_share())
        .fixed("TX us", "tx_us", 2, |r| r.tx_us)
        .fixed("RX us", "rx_us", 2, |r| r.rx_us)
        .shown("MB/s each way", |r| {
            format!("{:.1}", r.bytes as f64 / r.median_us)
        })
        .kept("us_per_byte", |r| r.median_us / r.bytes as f64)
        .plain("transfers", "iterations", |r| r.iterations)
}

/// The unique zero-copy (or, for `proxy`, copying) row of a mode at a size.
fn point<'a>(rows: &'a [Row], completion: &str, bytes: usize) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.completion == completion
            && r.bytes == bytes
            && r.way.2 == "unique"
            && (r.way.0 == "zerocopy" || completion == "proxy")
    })
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
                    r.overhead_us(),
                    r.median_us,
                    r.model_us
                ),
                r.overhead_us() < limit,
            ));
        }
    }
    // Adaptive completion: polling's latency, interrupts' CPU.
    if let (Some(a), Some(b)) = (point(rows, "adaptive", 64), point(rows, "bare", 64)) {
        let over = a.median_us - b.median_us;
        out.push(Target::new(
            "64 B two-way, adaptive: < 3 us over the bare driver in the same run",
            format!(
                "{over:+.2} us ({:.2} us against {:.2} us)",
                a.median_us, b.median_us
            ),
            over < 3.0,
        ));
    }
    for (bytes, limit) in [(4096, 1.05), (64 << 10, 0.25)] {
        let cpu = |mode| Some(point(rows, mode, bytes)?.cost.cpu_us());
        if let (Some(a), Some(p)) = (cpu("adaptive"), cpu("poll")) {
            out.push(Target::new(
                format!(
                    "host CPU per {} transfer (interrupt delivery included): adaptive <= {:.0} % \
                     of poll's",
                    bytes_label(bytes),
                    100.0 * limit
                ),
                format!("{a:.2} us against {p:.2} us = {:.0} %", 100.0 * a / p),
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

/// Host CPU per 4 KiB transfer (us): waiting on the interrupt, and polling.
fn cpu_at_4k(rows: &[Row]) -> Option<(f64, f64)> {
    let cpu = |mode| Some(point(rows, mode, 4096)?.cost.cpu_us());
    Some((cpu("irq")?, cpu("poll")?))
}

/// One sentence: at 64 B what software adds to the modelled device in each
/// mode and what it costs the CPU; at the largest size what copying adds.
pub fn answer(rows: &[Row]) -> String {
    let mut clauses = Vec::new();
    let sizes = || rows.iter().map(|r| r.bytes);
    if let Some(small) = sizes().find(|&b| b == 64).or_else(|| sizes().min()) {
        let modes = per_mode(|c| {
            point(rows, c, small).map(|r| {
                format!(
                    "{c} +{:.1} us ({:.1} us CPU)",
                    r.overhead_us(),
                    r.cost.cpu_us()
                )
            })
        });
        if let Some(model) = point(rows, "poll", small).map(|r| r.model_us) {
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
                    Some(format!("{c} {:+.2} us", r.over_bare_us(rows)?))
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
    if let Some((i, p)) = cpu_at_4k(rows) {
        clauses.push(format!(
            "at 4 KiB waiting on the interrupt costs {:.0} % of polling's CPU ({i:.1} against \
             {p:.1} us)",
            100.0 * i / p
        ));
    }
    if let Some(large) = sizes().max()
        && let Some(zero) = point(rows, "poll", large)
        && let Some(copy) = rows.iter().find(|r| {
            (r.completion, r.bytes, r.way) == ("poll", large, ("copy", "single", "unique"))
        })
    {
        clauses.push(format!(
            "at {} copying through driver buffers takes {:.0} us against {:.0} us zero-copy",
            bytes_label(large),
            copy.median_us,
            zero.median_us
        ));
    }
    sentence(&clauses)
}

/// The run as a report: table, time and time per byte against size (paper
/// 002's Figs. 4-5).
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let label = |r: &Row| {
        if r.way.0 == "zerocopy" || r.completion == "proxy" {
            format!("{} {}", r.completion, r.way.0)
        } else {
            format!("{} copy {} {}", r.completion, r.way.1, r.way.2)
        }
    };
    let plot = |title: &str, y_label: &str, y: fn(&Row) -> f64| {
        super::beside::plot(
            title,
            y_label,
            series_by(rows, label, |r| r.bytes as f64, y),
        )
        .log_y()
    };
    let heading = on_board(
        format!(
            "loopback: two-way transfers on the emulated fabric ({}, PG021 latencies), \
             median per transfer; blocks of {}; fresh data every transfer, checked",
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
    );
    Report::of("loopback", heading, &columns(rows), rows)
        .answer(answer(rows))
        .targets(targets(rows))
        .plots([
            plot(
                "Two-way transfer time (paper 002, Fig. 4)",
                "time per transfer (µs)",
                |r| r.median_us,
            ),
            plot(
                "Time per byte (paper 002, Fig. 5)",
                "time per byte (µs/B)",
                |r| r.median_us / r.bytes as f64,
            ),
            plot(
                "What software adds to the modelled device",
                "overhead per transfer (µs)",
                |r| r.overhead_us().max(1e-3),
            ),
            plot(
                "Host CPU per transfer (driver-side threads)",
                "CPU time per transfer (µs)",
                |r| r.cost.cpu_us().max(1e-3),
            ),
        ])
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let rows = run(&cfg, &mut |_| {}).unwrap();
        // Per completion mode (poll, yield, irq, adaptive): 8 B zerocopy + copy
        // single/double; 4096 B adds blocks of 1 KiB for both; one proxy and one
        // emulator baseline row per size.
        assert_eq!(rows.len(), 4 * 3 + 4 * 5 + 2 + 2);
        // The baseline moved checked data too, and every driver row is set
        // against it.
        let bare: Vec<&Row> = rows.iter().filter(|r| r.completion == "bare").collect();
        assert_eq!(bare.len(), 2);
        assert!(bare.iter().all(|b| b.median_us > 0.0));
        assert!(rows.iter().all(|r| r.over_bare_us(&rows).is_some()));
        for r in rows.iter().filter(|r| r.way.2 == "blocks") {
            assert_eq!((r.bytes, r.block_bytes), (4096, 1024));
        }
        // The tiny run's link is the Zynq-7000's HP port, clocked.
        assert_eq!(cfg.clock, dmaflow::sim::Profile::ZYNQ7000.port);
        for r in &rows {
            // Each direction is timed inside the whole call.
            assert!(r.tx_us <= r.median_us * 1.5 + 1.0, "{r:?}");
            assert!(r.rx_us <= r.median_us * 1.5 + 1.0, "{r:?}");
            assert!(r.median_us > 0.0 && r.median_us.is_finite(), "{r:?}");
            // On a clocked link the device time is a floor: 4 KiB at
            // 1200 MB/s is 3.41 us; no transfer beats the device.
            assert!(r.bytes != 4096 || r.model_us > 3.41, "{r:?}");
            assert!(r.median_us >= r.model_us, "{r:?}");
            // The driver's threads cannot use more CPU than two cores' worth
            // of the time they ran (with room for the CPU clock's jitter over
            // a few microseconds: 2.09 was seen on an idle machine), and
            // polling is never free.
            assert!(r.cost.cpu_share() <= 2.5, "{r:?}");
            if r.completion == "poll" {
                assert!(r.cost.cpu_us() > 0.0, "{r:?}");
            }
        }
        assert_eq!(rows.iter().filter(|r| r.completion == "proxy").count(), 2);
        let report = report(&cfg, &rows);
        let j = report.json;
        assert_eq!(j["experiment"], "loopback");
        assert_eq!(j["rows"][0]["bytes"], 8);
        assert_eq!(j["rows"][0]["buffering"], "single");
        assert_eq!(j["rows"][0]["partition"], "unique");
        for k in ["cpu_us", "model_us", "overhead_us", "cpu_share"] {
            assert!(j["rows"][0][k].is_number(), "no {k}");
        }
        assert!(report.text.contains("zerocopy"));
    }
}
