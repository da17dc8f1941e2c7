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
//! round, just before; every point on a fresh board.

use std::time::{Duration, Instant};

use dmaflow::dma::Completion;
use dmaflow::sim::Clock;

use super::app::{App, TRIAD_UNIT_BYTES, Work};
use super::beside;
use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point};
use super::harness::{Setup, bytes_label, clock_label, ms_label};
use super::meter::Tally;
use super::plot::XAxis;

/// How the driver waits: asleep on the interrupt line, so that on a shared
/// core the application has the core while the device copies.
const COMPLETION: Completion = Completion::Irq;

/// `dmaflow bench memory`.
pub static EXPERIMENT: Bench<Config, At, Sample> = Bench {
    name: "memory",
    emulator_only: "it sets the emulated link's clock and memory model",
    question: "Memory-bandwidth contention: transfers beside a memory-bound application.",
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
    baseline: Some("filter"),
    plots: &[Plot {
        title: "Transfers beside a memory-bound and a cache-resident application",
        x: "bytes",
        y: "mb_per_s",
        interval: None,
        y_scale: 1.0,
        lines: &["beside", "clock"],
        axis: XAxis::Bytes,
        log_y: false,
    }],
    heading: |cfg| {
        format!(
            "two-way loopback transfers beside nothing, a cache-resident 64-tap FIR filter \
             (the control) and a STREAM-like triad over 3 x 64 MiB (memory-bound), {} per \
             point on a fresh board, driver asleep on the interrupt line; the application on \
             a core of its own where there is one to spare (own_core), else the driver's; \
             link = {} and unlimited",
            ms_label(cfg.duration),
            cfg.profile.description
        )
    },
    findings,
    ..Bench::new(config, |c| c.rounds, points, measure, columns)
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

/// Where a point is: the link's clock and the transfers' size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct At {
    /// The link's clock.
    pub clock: Clock,
    /// Bytes each way.
    pub bytes: usize,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", clock_label(self.clock), bytes_label(self.bytes))
    }
}

/// What one measurement of a point gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Transfers.
    pub transfers: usize,
    /// Bytes each way per second of transfer, 10^6 B/s.
    pub mb_per_s: f64,
    /// What the modelled link allows, 10^6 B/s each way (`NaN`: unlimited).
    pub model_mb_per_s: f64,
    /// Driver CPU per transfer, in microseconds (interrupt delivery
    /// included).
    pub cpu_us: f64,
    /// The application's units of work per second alone (`NaN` beside
    /// nothing).
    pub app_alone: f64,
    /// Its units of work per second beside the transfers (`NaN` beside
    /// nothing).
    pub app_beside: f64,
    /// Whether the application had a core of its own (else the driver's).
    pub own_core: bool,
}

/// A point over the rounds.
pub type Row = super::frame::Row<At, Sample>;

/// Every clock, size and application.
fn points(cfg: &Config) -> Vec<Point<At>> {
    let mut v = Vec::new();
    for clock in [cfg.profile.port, Clock::Unlimited] {
        for &bytes in &cfg.sizes {
            for app in BESIDE {
                v.push(Point {
                    series: name(app),
                    at: At { clock, bytes },
                });
            }
        }
    }
    v
}

/// One point in one round, on a fresh board: transfers back to back for
/// the point's time beside the point's application (its rate alone
/// measured first).
fn measure(cfg: &Config, p: &Point<At>) -> Result<Sample, Error> {
    let At { clock, bytes } = p.at;
    let beside = BESIDE.into_iter().find(|&b| name(b) == p.series).flatten();
    let what = format!("memory {} beside {}", p.at, p.series);
    let (rig, placed, driver) = cfg.board(clock)?;
    let app_core = placed.host_cores.get(1).copied().unwrap_or(driver);
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
                &what,
            )?;
        }
        Ok::<(), Error>(())
    };
    let (app_alone, app_beside) = match beside {
        None => {
            transfers()?;
            (f64::NAN, f64::NAN)
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
    let model = clock.bytes_per_s().map_or(f64::NAN, |_| {
        bytes as f64 / clock.two_way(bytes, false).as_secs_f64() / 1e6
    });
    Ok(Sample {
        transfers: tally.n,
        mb_per_s: (tally.n * bytes) as f64 / cost.wall.as_secs_f64() / 1e6,
        model_mb_per_s: model,
        cpu_us: cost.cpu_us_per(tally.n),
        app_alone,
        app_beside,
        own_core: app_core != driver,
    })
}

/// The triad's memory bandwidth in 10^9 B/s as STREAM counts it, from its
/// units of work per second (`NaN` for the other applications).
fn triad_gb(r: &Row, rate: f64) -> f64 {
    match r.point.series {
        "triad" => rate * TRIAD_UNIT_BYTES as f64 / 1e9,
        _ => f64::NAN,
    }
}

/// A number or null.
fn known(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

/// The rows' columns.
fn columns() -> Columns<'static, Row> {
    let mb = |s: &Sample| s.mb_per_s;
    let alone = |r: &Row| triad_gb(r, r.median(|s| s.app_alone));
    let beside = |r: &Row| triad_gb(r, r.median(|s| s.app_beside));
    Columns::new()
        .plain("clock", "clock", |r: &Row| clock_label(r.point.at.clock))
        .doc("the port's rate (e.g. 1200MB/s) or unlimited")
        .bytes("size", "bytes", |r| r.point.at.bytes)
        .doc("bytes each way")
        .series("beside", "beside", "none, filter or triad")
        .kept("own_core", |r| r.samples.iter().any(|s| s.own_core))
        .doc("the application on a core of its own")
        .kept("transfers", |r| {
            r.samples.iter().map(|s| s.transfers).sum::<usize>()
        })
        .doc("transfers, all rounds")
        .summary(
            ("MB/s each way (rounds)", "mb_per_s", "mb_per_s_spread"),
            "bytes each way per second of transfer, 10^6 B/s",
            (1.0, 0, ""),
            mb,
        )
        .typical(
            "model MB/s",
            "model_mb_per_s",
            "what the modelled link allows each way, null unlimited",
            (1.0, 0),
            |s| s.model_mb_per_s,
        )
        .col(
            "vs filter",
            "vs_filter",
            move |r| r.ratio(mb).map_or("-".into(), |q| q.text()),
            move |r| r.ratio(mb).map(|q| q.0.json()),
        )
        .doc(
            "mb_per_s over the same size's beside the filter, round by round (median, p25, \
             p75, min, max, n)",
        )
        .kept("vs_filter_measurable", move |r| {
            r.ratio(mb).map(|q| q.measurable())
        })
        .doc("whether every round agrees on the ratio's side of 1")
        .summary(
            ("app keeps (rounds)", "app_share", "app_share_spread"),
            "the application's rate beside the transfers over alone",
            (100.0, 0, " %"),
            |s| s.app_beside / s.app_alone,
        )
        .shown("triad GB/s alone -> beside", move |r| {
            match r.point.series {
                "triad" => format!("{:.2} -> {:.2}", alone(r), beside(r)),
                _ => "-".into(),
            }
        })
        .kept("triad_gb_per_s_alone", move |r| known(alone(r)))
        .doc("the triad's memory bandwidth alone, 10^9 B/s as STREAM counts it")
        .kept("triad_gb_per_s_beside", move |r| known(beside(r)))
        .doc("the same beside the transfers")
        .typical(
            "driver CPU us",
            "cpu_us",
            "driver CPU per transfer (interrupt delivery included)",
            (1.0, 1),
            |s| s.cpu_us,
        )
        .shown("transfers", |r| {
            r.samples
                .iter()
                .map(|s| s.transfers)
                .sum::<usize>()
                .to_string()
        })
}

/// One sentence per clock at the largest size; no target: what contention
/// costs each side is the machine's figure, reported as measured.
fn findings(cfg: &Config, rows: &[Row]) -> Findings {
    let Some(large) = cfg.sizes.iter().copied().max() else {
        return Findings::default();
    };
    let mut clauses = Vec::new();
    for clock in [cfg.profile.port, Clock::Unlimited] {
        let find = |beside: &str| {
            rows.iter().find(|r| {
                r.point.series == beside
                    && r.point.at
                        == At {
                            clock,
                            bytes: large,
                        }
            })
        };
        let (Some(t), Some(f), Some(n)) = (find("triad"), find("filter"), find("none")) else {
            continue;
        };
        let Some(q) = t.ratio(|s| s.mb_per_s) else {
            continue;
        };
        let effect = if q.measurable() {
            format!("{:.2}x", q.0.median)
        } else {
            format!("{:.2}x, no measurable difference", q.0.median)
        };
        let share = |r: &Row| r.median(|s| s.app_beside / s.app_alone);
        let mb = |r: &Row| r.median(|s| s.mb_per_s);
        let app = format!(
            "; the triad keeps {:.0} % of its rate alone ({:.2} -> {:.2} GB/s) where the \
             cache-resident filter keeps {:.0} %",
            100.0 * share(t),
            triad_gb(t, t.median(|s| s.app_alone)),
            triad_gb(t, t.median(|s| s.app_beside)),
            100.0 * share(f)
        );
        clauses.push(format!(
            "at the {} clock, {} transfers run at {:.0} MB/s each way beside the memory-bound \
             triad against {:.0} beside the cache-resident filter ({effect}; {:.0} with \
             nothing beside){app}",
            clock_label(clock),
            bytes_label(large),
            mb(t),
            mb(f),
            mb(n)
        ));
    }
    Findings {
        clauses,
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_measures_each_application_beside_the_transfers() {
        let cfg = config(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 3);
        for r in &rows {
            assert_eq!(r.rounds(), cfg.rounds, "{r:?}");
            for s in &r.samples {
                assert!(s.transfers > 0 && s.mb_per_s > 0.0, "{r:?}");
                // The emulated link never runs faster than its model.
                assert!(
                    s.model_mb_per_s.is_nan() || s.mb_per_s <= s.model_mb_per_s * 1.01,
                    "{r:?}"
                );
            }
            let share = r.median(|s| s.app_beside / s.app_alone);
            assert_eq!(share.is_nan(), r.point.series == "none", "{r:?}");
            assert!(share.is_nan() || share > 0.0, "{r:?}");
        }
        let triad = rows.iter().find(|r| r.point.series == "triad").unwrap();
        let alone = triad_gb(triad, triad.median(|s| s.app_alone));
        assert!(alone > 0.1, "a triad below 0.1 GB/s: {triad:?}");
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert_eq!(rep.json["experiment"], "memory");
        assert!(rep.answer.contains("triad"), "{}", rep.answer);
        let none = &rep.json["rows"][0];
        assert_eq!(none["beside"], "none");
        assert!(none["app_share"].is_null() && none["vs_filter"].is_object());
        assert!(rep.json["rows"][1]["vs_filter"].is_null());
        assert_eq!(rep.plots.len(), 1);
    }
}
