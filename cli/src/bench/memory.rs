//! `dmaflow bench memory`: memory-bandwidth contention between dmaflow's
//! transfers and a memory-bound application (paper 002's TX/RX DDR
//! contention, paper 004's shared DRAM). The emulated device really copies
//! through this machine's DRAM, so an application streaming through memory
//! competes with it as it would on a board.
//!
//! Two-way loopback transfers run back to back beside nothing, a
//! cache-resident FIR filter (the control: it competes for the core only) or
//! a STREAM-like triad over three 64 MiB arrays (core and memory), on a core
//! of its own where there is one to spare; the triad against the filter is
//! memory contention. The application's rate alone is measured in the same
//! round, just before; the applications' order reversed every other round.

use std::time::{Duration, Instant};

use dmaflow::dma::Completion;
use dmaflow::rig::Rig;
use dmaflow::sim::Clock;

use super::app::{App, TRIAD_UNIT_BYTES, Work};
use super::beside;
use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::harness::{OnBoard, Progress, Setup, Spec, bytes_label, clock_label, ms_label};
use super::meter::Tally;
use super::report::{Report, sentence, series_by};
use super::spread::{Ratio, Spread, in_turns};

/// How the driver waits: asleep on the interrupt line, so that on a shared
/// core the application has the core while the device copies.
const COMPLETION: Completion = Completion::Irq;

/// `dmaflow bench memory`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "memory",
    board: OnBoard::EmulatorOnly("it sets the emulated link's clock and memory model"),
    question: "Memory-bandwidth contention: transfers beside a memory-bound application.",
    keys: "clock, bytes (each way), beside (none|filter|triad), own_core\n\
          (the application on a core of its own), transfers, mb_per_s\n\
          (each way, median), mb_per_s_spread, model_mb_per_s, cpu_us,\n\
          vs_filter (MB/s over the same size's beside the filter, round\n\
          by round), vs_filter_measurable, app_share (beside / alone),\n\
          app_share_spread, triad_gb_per_s_alone, triad_gb_per_s_beside",
    conditions: Conditions {
        timed: "back-to-back two-way transfers over a fixed time on the driver's thread; \
                the application's units of work over the same time, and alone just before",
        against: "the same transfers beside a cache-resident filter (the same sharing of \
                  the core, no memory traffic) and beside nothing; the triad alone",
        model: "model MB/s at the port's clock; the unlimited rows are this machine's own \
                memory (the emulated device copies through it)",
        paper: "papers 002 and 004 contend on a Zynq's DDR controller and the ACP; here a \
                VM's DRAM and shared last-level cache, and on two cores the application \
                shares the driver's core (the filter rows carry that sharing)",
    },
    ..Spec::new(config, run, report)
};

/// What to measure: the sizes (each way), each point's time and the
/// rounds; the link at the board's port clock and unlimited.
pub type Config = beside::Config;

/// The size `setup` asks for, on its board.
pub fn config(setup: &Setup) -> Config {
    Config::at(
        setup,
        vec![256 << 10, 4 << 20],
        Duration::from_millis(60),
        vec![64 << 10],
    )
}

/// The applications beside the transfers: none, the filter, the triad.
const BESIDE: [Option<Work>; 3] = [None, Some(Work::Filter), Some(Work::Triad)];

/// An application's name in tables and JSON (`none` for none).
fn name(beside: Option<Work>) -> &'static str {
    beside.map_or("none", Work::name)
}

/// One point: transfers of one size at one clock beside one application.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The port's rate (e.g. "1200MB/s") or "unlimited".
    pub clock: String,
    /// Bytes each way.
    pub bytes: usize,
    /// `none`, `filter` or `triad`.
    pub beside: &'static str,
    /// Whether the application had a core of its own (else the driver's).
    pub own_core: bool,
    /// Transfers, all rounds.
    pub transfers: usize,
    /// Bytes each way per second of transfer, 10^6 B/s, over the rounds.
    pub mb_per_s: Spread,
    /// What the modelled link allows, 10^6 B/s each way (`None`: unlimited).
    pub model_mb_per_s: Option<f64>,
    /// Driver CPU per transfer, in microseconds (interrupt delivery
    /// included), median of the rounds.
    pub cpu_us: f64,
    /// Round by round, this row's MB/s over the same size's beside the
    /// filter (for the triad: what memory contention costs the transfers).
    pub vs_filter: Option<Ratio>,
    /// The application's rate beside the transfers over alone, the rounds'.
    pub app_share: Option<Spread>,
    /// The triad's memory bandwidth, 10^9 B/s as STREAM counts it: alone, and
    /// beside the transfers (medians of the rounds).
    pub triad_gb_per_s: Option<(f64, f64)>,
}

/// What one measurement of a point gave.
struct Sample {
    transfers: usize,
    mb_per_s: f64,
    cpu_us: f64,
    app_alone: f64,
    app_beside: f64,
}

/// One point in one round: transfers of `bytes` back to back for the
/// point's time beside `beside` (its rate alone measured first).
fn measure(
    cfg: &Config,
    rig: &Rig,
    app_core: usize,
    bytes: usize,
    beside: Option<Work>,
    what: &str,
) -> Result<Sample, Error> {
    let mut tally = Tally::default();
    let mut transfers = || {
        let engine = &rig.engines[0];
        let mut tx = engine.pool().alloc::<u8>(bytes)?;
        let mut rx = engine.pool().alloc::<u8>(bytes)?;
        let until = Instant::now() + cfg.duration;
        while Instant::now() < until {
            beside::two_way(
                engine,
                (&mut tx, &mut rx),
                bytes,
                COMPLETION,
                &mut tally,
                what,
            )?;
        }
        Ok::<(), Error>(())
    };
    let (app_alone, app_beside) = match beside {
        None => {
            transfers()?;
            (0.0, 0.0)
        }
        Some(work) => {
            let app = App::start(work, &[app_core])?;
            let alone = beside::alone(&app, cfg.duration)?;
            let mut first = true;
            let beside = app.rate(cfg.duration, || {
                if std::mem::take(&mut first) {
                    transfers()
                } else {
                    Ok(())
                }
            })?;
            (alone, beside)
        }
    };
    let cost = tally.cost();
    Ok(Sample {
        transfers: tally.n,
        mb_per_s: (tally.n * bytes) as f64 / cost.wall.as_secs_f64() / 1e6,
        cpu_us: cost.cpu_us_per(tally.n),
        app_alone,
        app_beside,
    })
}

/// Runs every clock, size and application in rounds.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for clock in [cfg.profile.port, Clock::Unlimited] {
        let clock_name = clock_label(clock);
        let (rig, placed, driver) = cfg.board(clock)?;
        let app_core = placed.host_cores.get(1).copied().unwrap_or(driver);
        for &bytes in &cfg.sizes {
            let mut samples: Vec<Vec<Sample>> = BESIDE.iter().map(|_| Vec::new()).collect();
            let mb = in_turns(BESIDE.len(), cfg.rounds, |k, round| {
                let what = format!(
                    "memory {clock_name} {} beside {}",
                    bytes_label(bytes),
                    name(BESIDE[k])
                );
                progress(&format!("{what} round {}", round + 1));
                let sample = measure(cfg, &rig, app_core, bytes, BESIDE[k], &what)?;
                let mb = sample.mb_per_s;
                samples[k].push(sample);
                Ok::<f64, Error>(mb)
            })?;
            let model = clock
                .bytes_per_s()
                .map(|_| bytes as f64 / clock.two_way(bytes, false).as_secs_f64() / 1e6);
            for (k, (&app, ss)) in BESIDE.iter().zip(&samples).enumerate() {
                let of = |f: fn(&Sample) -> f64| beside::spread(ss, f);
                let gb = TRIAD_UNIT_BYTES as f64 / 1e9;
                rows.push(Row {
                    clock: clock_name.clone(),
                    bytes,
                    beside: name(app),
                    own_core: app_core != driver,
                    transfers: ss.iter().map(|s| s.transfers).sum(),
                    mb_per_s: Spread::of(&mb[k]),
                    model_mb_per_s: model,
                    cpu_us: of(|s| s.cpu_us).median,
                    vs_filter: (k != 1).then(|| Ratio::of(&mb[k], &mb[1])),
                    app_share: app.is_some().then(|| of(|s| s.app_beside / s.app_alone)),
                    triad_gb_per_s: (app == Some(Work::Triad)).then(|| {
                        let [alone, beside] = [of(|s| s.app_alone), of(|s| s.app_beside)];
                        (alone.median * gb, beside.median * gb)
                    }),
                });
            }
        }
    }
    Ok(rows)
}

/// A spread's median and range scaled by `k` with `p` decimals, `unit` after
/// the median.
fn around(s: Spread, k: f64, p: usize, unit: &str) -> String {
    let [median, min, max] = [s.median, s.min, s.max].map(|x| k * x);
    format!("{median:.p$}{unit} ({min:.p$}..{max:.p$})")
}

/// The rows' columns.
fn columns<'a>() -> Columns<'a, Row> {
    let dash = |x: Option<String>| x.unwrap_or_else(|| "-".into());
    Columns::new()
        .plain("clock", "clock", |r: &Row| r.clock.clone())
        .col("size", "bytes", |r| bytes_label(r.bytes), |r| r.bytes)
        .plain("beside", "beside", |r| r.beside)
        .kept("own_core", |r| r.own_core)
        .kept("transfers", |r| r.transfers)
        .col(
            "MB/s each way (rounds)",
            "mb_per_s",
            |r| around(r.mb_per_s, 1.0, 0, ""),
            |r| r.mb_per_s.median,
        )
        .kept("mb_per_s_spread", |r| r.mb_per_s.json())
        .optional("model MB/s", "model_mb_per_s", 0, |r| r.model_mb_per_s)
        .col(
            "vs filter",
            "vs_filter",
            move |r| dash(r.vs_filter.map(|Ratio(v)| around(v, 1.0, 2, "x"))),
            |r| r.vs_filter.map(|Ratio(v)| v.json()),
        )
        .kept("vs_filter_measurable", |r| {
            r.vs_filter.map(|v| v.measurable())
        })
        .col(
            "app keeps (rounds)",
            "app_share",
            move |r| dash(r.app_share.map(|s| around(s, 100.0, 0, " %"))),
            |r| r.app_share.map(|s| s.median),
        )
        .kept("app_share_spread", |r| r.app_share.map(|s| s.json()))
        .shown("triad GB/s alone -> beside", move |r| {
            dash(r.triad_gb_per_s.map(|(a, b)| format!("{a:.2} -> {b:.2}")))
        })
        .kept("triad_gb_per_s_alone", |r| r.triad_gb_per_s.map(|t| t.0))
        .kept("triad_gb_per_s_beside", |r| r.triad_gb_per_s.map(|t| t.1))
        .fixed("driver CPU us", "cpu_us", 1, |r| r.cpu_us)
        .shown("transfers", |r| r.transfers.to_string())
}

/// One sentence per clock at the largest size.
fn answer(rows: &[Row]) -> String {
    let Some(large) = rows.iter().map(|r| r.bytes).max() else {
        return String::new();
    };
    let mut clauses = Vec::new();
    for unlimited in [false, true] {
        let find = |beside: &str| {
            rows.iter().find(|r| {
                (r.clock == "unlimited") == unlimited && r.bytes == large && r.beside == beside
            })
        };
        let (Some(t), Some(f), Some(n)) = (find("triad"), find("filter"), find("none")) else {
            continue;
        };
        let Some(Ratio(v)) = t.vs_filter else {
            continue;
        };
        let effect = if Ratio(v).measurable() {
            format!("{:.2}x", v.median)
        } else {
            format!("{:.2}x, no measurable difference", v.median)
        };
        let app = match (&t.app_share, &f.app_share, t.triad_gb_per_s) {
            (Some(ts), Some(fs), Some((alone, beside))) => format!(
                "; the triad keeps {:.0} % of its rate alone ({alone:.2} -> {beside:.2} GB/s) \
                 where the cache-resident filter keeps {:.0} %",
                100.0 * ts.median,
                100.0 * fs.median
            ),
            _ => String::new(),
        };
        clauses.push(format!(
            "at the {} clock, {} transfers run at {:.0} MB/s each way beside the memory-bound \
             triad against {:.0} beside the cache-resident filter ({effect}; {:.0} with \
             nothing beside){app}",
            t.clock,
            bytes_label(large),
            t.mb_per_s.median,
            f.mb_per_s.median,
            n.mb_per_s.median
        ));
    }
    sentence(&clauses)
}
/// The run as a report.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let own = rows.first().is_some_and(|r| r.own_core);
    let heading = format!(
        "memory: two-way loopback transfers beside nothing, a cache-resident 64-tap FIR \
         filter (the control) and a STREAM-like triad over 3 x 64 MiB (memory-bound), {} \
         per point in each of {} rounds (order reversed every other round), driver asleep \
         on the interrupt line; the application {}; link = {} and unlimited",
        ms_label(cfg.duration),
        cfg.rounds,
        if own {
            "on a core of its own"
        } else {
            "shares the driver's core (this machine has no third core)"
        },
        cfg.profile.description
    );
    // No target: what contention costs each side is the machine's figure,
    // reported as measured.
    Report::of("memory", heading, &columns(), rows)
        .answer(answer(rows))
        .plots([beside::plot(
            "Transfers beside a memory-bound and a cache-resident application",
            "MB/s each way",
            series_by(
                rows,
                |r| format!("{} {}", r.beside, r.clock),
                |r| r.bytes as f64,
                |r| r.mb_per_s.median,
            ),
        )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_measures_each_application_beside_the_transfers() {
        let cfg = config(&Setup::TINY);
        let rows = run(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 3);
        for r in &rows {
            assert!(r.transfers > 0, "{r:?}");
            assert_eq!(r.mb_per_s.n, cfg.rounds, "{r:?}");
            assert!(r.mb_per_s.median > 0.0, "{r:?}");
            if let Some(m) = r.model_mb_per_s {
                // The emulated link never runs faster than its model.
                assert!(r.mb_per_s.max <= m * 1.01, "{r:?}");
            }
            assert_eq!(r.app_share.is_some(), r.beside != "none", "{r:?}");
            if let Some(s) = r.app_share {
                assert!(s.median > 0.0 && s.median.is_finite(), "{r:?}");
            }
        }
        let triad = rows.iter().find(|r| r.beside == "triad").unwrap();
        let (alone, _) = triad.triad_gb_per_s.unwrap();
        assert!(alone > 0.1, "a triad below 0.1 GB/s: {triad:?}");
        assert_eq!(report(&cfg, &rows).json["experiment"], "memory");
        assert!(answer(&rows).contains("triad"));
    }
}
