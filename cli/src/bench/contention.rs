//! `dmaflow bench contention`: what a completion mode leaves for the
//! application (papers 002 and 004's trade-off) when the two share a core: the
//! Linux scheduler's sharing, not memory bandwidth (that is `bench memory`).
//! A cache-resident application (a 64-tap FIR filter over a buffer, again and
//! again) shares the driver's core while two-way transfers of 64 B, 4 KiB and
//! 1 MiB run back to back in each completion mode; its throughput is reported
//! as a share of its throughput alone, measured just before; every mode and
//! size on a fresh board.

use std::time::Duration;

use dmaflow::dma::Completion;

use super::app::{App, SAMPLES, Work};
use super::beside;
use super::columns::Columns;
use super::conditions::Conditions;
use super::dma::proxy;
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point};
use super::harness::{Setup, bytes_label, ms_label};
use super::meter::{Meter, Tally};
use super::peers::{check, mark};
use super::plot::XAxis;
use super::report::{Target, per_mode};

/// `dmaflow bench contention`.
pub static EXPERIMENT: Bench<Config, usize, Sample> = Bench {
    name: "contention",
    emulator_only: "it sets the emulated link's clock and engines",
    question: "What each completion mode leaves an application sharing the driver's core.",
    conditions: Conditions {
        timed: "the application's passes over a fixed time beside back-to-back transfers, \
                against its passes alone just before",
        against: "the application alone on the same core",
        model: "model_us",
        paper: "this measures the Linux scheduler sharing one core between the driver and \
                the application, not the papers' memory-bandwidth contention (that is \
                `memory`)",
    },
    plots: &[Plot {
        title: "What each completion mode leaves the application on its core",
        x: "bytes",
        y: "app_share",
        interval: None,
        y_scale: 100.0,
        lines: &["completion"],
        axis: XAxis::Bytes,
        log_y: false,
    }],
    heading: |cfg| {
        format!(
            "an application (64-tap FIR filter passes over {} samples) shares the driver's \
             core with back-to-back two-way transfers, {} per point on a fresh board, link = \
             {}; its throughput as a share of its throughput alone, measured just before",
            SAMPLES,
            ms_label(cfg.duration),
            cfg.profile.description
        )
    },
    findings,
    ..Bench::new(config, |c| c.rounds, points, measure, columns)
};

/// What to measure: the sizes, each point's time and the rounds.
pub type Config = beside::Config;

/// The size `setup` asks for, on its board.
pub fn config(setup: &Setup) -> Config {
    Config::at(
        setup,
        vec![64, 4096, 1 << 20],
        Duration::from_millis(80),
        vec![64, 4096],
    )
}

/// What one mode and size gave in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Transfers done while the application ran.
    pub transfers: usize,
    /// Wall time per transfer, in microseconds: the mean of the round.
    pub transfer_us: f64,
    /// What the modelled device needs per transfer, in microseconds.
    pub model_us: f64,
    /// Host CPU of the driver-side threads per transfer, in microseconds.
    pub cpu_us: f64,
    /// Driver-side CPU over the point's wall time (of the shared core).
    pub cpu_share: f64,
    /// Application throughput beside the transfers over alone.
    pub app_share: f64,
}

/// A mode at a size, over the rounds.
pub type Row = super::frame::Row<usize, Sample>;

/// Every completion mode at every size.
fn points(cfg: &Config) -> Vec<Point<usize>> {
    let mut v = Vec::new();
    for mode in Completion::ALL {
        for &at in &cfg.sizes {
            v.push(Point {
                series: mode.name(),
                at,
            });
        }
    }
    v
}

/// One mode at one size on a fresh board (the proxy takes its engine over);
/// the driver and the application share one core.
fn measure(cfg: &Config, p: &Point<usize>) -> Result<Sample, Error> {
    let bytes = p.at;
    let mode = Completion::ALL
        .into_iter()
        .find(|c| c.name() == p.series)
        .ok_or_else(|| Error::peer("contention")(format!("no completion mode {}", p.series)))?;
    let (mut rig, _placed, core) = cfg.board(cfg.profile.port)?;
    let proxy = (mode == Completion::Proxy)
        .then(|| proxy(vec![rig.engines.remove(0)]))
        .transpose()?;
    let what = format!("contention {} {}", mode.name(), bytes_label(bytes));
    let app = App::start(Work::Filter, &[core])?;
    let solo = beside::alone(&app, cfg.duration)?;
    let mut tally = Tally::default();
    let point = Meter::start(proxy.as_ref());
    let shared = if let Some(p) = &proxy {
        let mut buf = vec![0u8; bytes];
        app.rate(cfg.duration, || {
            let seq = tally.n as u8;
            buf.resize(bytes, 0);
            mark(&mut buf, seq);
            let m = Meter::start(Some(p));
            buf = p.transfer(std::mem::take(&mut buf), bytes)?;
            tally.add(m.stop());
            check(&what, &buf, bytes, seq)
        })?
    } else {
        let engine = &rig.engines[0];
        let mut tx = engine.pool().alloc::<u8>(bytes)?;
        let mut rx = engine.pool().alloc::<u8>(bytes)?;
        app.rate(cfg.duration, || {
            beside::two_way(engine, (&mut tx, &mut rx), bytes, mode, &mut tally, &what)
        })?
    };
    let whole = point.stop();
    drop(app);
    let cost = tally.cost();
    Ok(Sample {
        transfers: tally.n,
        transfer_us: cost.wall.as_secs_f64() * 1e6 / tally.n.max(1) as f64,
        model_us: cfg.profile.port.two_way(bytes, false).as_secs_f64() * 1e6,
        cpu_us: cost.cpu_us_per(tally.n),
        cpu_share: whole.cpu_share(),
        app_share: shared / solo,
    })
}

/// The rows' columns.
fn columns() -> Columns<'static, Row> {
    Columns::new()
        .bytes("size", "bytes", |r: &Row| r.point.at)
        .doc("bytes each way")
        .series(
            "completion",
            "completion",
            "poll, yield, irq, adaptive or proxy",
        )
        .summary(
            ("app keeps", "app_share", "app_share_spread"),
            "application throughput beside the transfers over alone",
            (100.0, 0, " %"),
            |s| s.app_share,
        )
        .summary(
            ("us/transfer", "transfer_us", "transfer_us_spread"),
            "wall time per transfer (the round's mean)",
            (1.0, 2, ""),
            |s| s.transfer_us,
        )
        .typical(
            "model us",
            "model_us",
            "what the modelled device needs per transfer",
            (1.0, 2),
            |s| s.model_us,
        )
        .typical(
            "overhead us",
            "overhead_us",
            "transfer_us over model_us",
            (1.0, 2),
            |s| s.transfer_us - s.model_us,
        )
        .typical(
            "driver CPU us",
            "cpu_us",
            "host CPU of the driver-side threads per transfer",
            (1.0, 2),
            |s| s.cpu_us,
        )
        .typical(
            "driver CPU share",
            "cpu_share",
            "driver-side CPU over the point's wall time (of the shared core)",
            (1.0, 2),
            |s| s.cpu_share,
        )
        .plain("transfers", "transfers", |r| {
            r.samples.iter().map(|s| s.transfers).sum::<usize>()
        })
        .doc("transfers done while the application ran, all rounds")
}

/// One sentence per size of what each mode leaves the application, and the
/// issue's target (with interrupts the application keeps >= 80 % of its solo
/// throughput at the largest transfers).
fn findings(cfg: &Config, rows: &[Row]) -> Findings {
    let find = |c: &str, b: usize| rows.iter().find(|r| r.point.series == c && r.point.at == b);
    let share = |r: &Row| r.median(|s| s.app_share);
    let clauses = cfg
        .sizes
        .iter()
        .map(|&b| {
            let modes = per_mode(|c| {
                find(c, b).map(|r| {
                    format!(
                        "{c} {:.0} % ({:.1} us/transfer)",
                        100.0 * share(r),
                        r.median(|s| s.transfer_us)
                    )
                })
            });
            format!(
                "with {} transfers on its core the application keeps {modes}",
                bytes_label(b),
            )
        })
        .collect();
    let large = cfg.sizes.iter().copied().max().unwrap_or(0);
    let targets = find("irq", large).zip(find("poll", large)).map(|(i, p)| {
        Target::new(
            format!(
                "{} transfers with irq: the application keeps >= 80 % of its solo throughput",
                bytes_label(large)
            ),
            format!(
                "{:.0} % (poll leaves it {:.0} %)",
                100.0 * share(i),
                100.0 * share(p)
            ),
            share(i) >= 0.8,
        )
    });
    Findings {
        clauses,
        targets: targets.into_iter().collect(),
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_measures_every_mode_and_size() {
        let cfg = config(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        // Five completion modes (poll, yield, irq, adaptive, proxy), two sizes.
        assert_eq!(rows.len(), 5 * 2);
        for r in &rows {
            assert!(r.samples.iter().all(|s| s.transfers > 0), "{r:?}");
            let share = r.median(|s| s.app_share);
            assert!(share > 0.0 && share.is_finite(), "{r:?}");
            assert!(r.every(|s| s.transfer_us >= s.model_us), "{r:?}");
        }
        let report = EXPERIMENT.report(&cfg, &rows);
        assert_eq!(report.json["experiment"], "contention");
        assert!(report.json["rows"][0]["app_share"].is_number());
        assert!(report.answer.contains("application keeps"));
        assert!(report.json["rows"][0]["app_share_spread"]["n"] == cfg.rounds);
        assert_eq!(report.plots.len(), 1);
    }
}
