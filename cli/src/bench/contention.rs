//! `dmaflow bench contention`: what a completion mode leaves for the
//! application (papers 002 and 004's trade-off) when the two share a core: the
//! Linux scheduler's sharing, not memory bandwidth (that is `bench memory`).
//! An application thread doing fixed, cache-resident work (a 64-tap FIR
//! filter over a buffer of samples, again and again) shares the driver's core
//! while two-way transfers of 64 B, 4 KiB and 1 MiB run back to back in each
//! completion mode; the application's throughput is reported as a share of
//! its throughput alone on that core, measured just before, beside the
//! transfers' time and the driver's CPU. Rounds: every mode and size in each,
//! the modes' order reversed every other round; each figure is the median of
//! the rounds with their range. The emulated device runs on a core of its own
//! when there are two or more.

use std::time::Duration;

use dmaflow::dma::{Completion, Proxy};

use super::app::{App, SAMPLES, Work};
use super::beside;
use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::harness::{OnBoard, Progress, Setup, Spec, bytes_label, ms_label};
use super::meter::{Meter, Tally};
use super::peers::{check, mark};
use super::report::{Report, Target, per_mode, sentence, series_by};
use super::spread::{Spread, in_turns};

/// `dmaflow bench contention`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "contention",
    board: OnBoard::EmulatorOnly("it sets the emulated link's clock and engines"),
    question: "What each completion mode leaves an application sharing the driver's core.",
    keys: "completion (poll|yield|irq|proxy), bytes, transfers,\n\
          transfer_us (median of the rounds' means), model_us,\n\
          overhead_us, cpu_us, cpu_share (of the shared core), app_share\n\
          (application throughput beside the transfers / alone),\n\
          app_share_spread, transfer_us_spread",
    conditions: Conditions {
        timed: "the application's passes over a fixed time beside back-to-back transfers, \
                against its passes alone just before",
        against: "the application alone on the same core",
        model: "model_us",
        paper: "this measures the Linux scheduler sharing one core between the driver and \
                the application, not the papers' memory-bandwidth contention (that is \
                `memory`)",
    },
    ..Spec::new(config, run, report)
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

/// One point.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `poll`, `yield`, `irq` or `proxy`.
    pub completion: &'static str,
    /// Bytes each way.
    pub bytes: usize,
    /// Transfers done while the application ran, all rounds.
    pub transfers: usize,
    /// Wall time per transfer, in microseconds: the rounds' means (the
    /// figure is their median).
    pub transfer_us: Spread,
    /// What the modelled device needs per transfer, in microseconds.
    pub model_us: f64,
    /// Host CPU of the driver-side threads per transfer, in microseconds.
    pub cpu_us: f64,
    /// Driver-side CPU over the point's wall time: the share of the shared
    /// core the driver took while the application ran.
    pub cpu_share: f64,
    /// Application throughput beside the transfers over its throughput alone,
    /// over the rounds (the figure is their median).
    pub app_share: Spread,
}

impl Row {
    /// Measured minus modelled time per transfer.
    pub fn overhead_us(&self) -> f64 {
        self.transfer_us.median - self.model_us
    }
}

/// What one mode and size gave in one round.
struct Sample {
    transfers: usize,
    transfer_us: f64,
    cpu_us: f64,
    cpu_share: f64,
    app_share: f64,
}

/// One mode's sizes in one round, on a fresh board (the proxy takes its
/// engine over).
fn round_of(
    cfg: &Config,
    mode: Completion,
    round: usize,
    progress: Progress,
) -> Result<Vec<Sample>, Error> {
    let name = mode.name();
    // The driver and the application share one core.
    let (mut rig, placed, core) = cfg.board(cfg.profile.port)?;
    let proxy = (mode == Completion::Proxy)
        .then(|| Proxy::start(rig.engines.remove(0)))
        .transpose()
        .map_err(|source| Error::Io {
            path: "proxy driver thread".into(),
            source,
        })?;
    let mut samples = Vec::new();
    for &bytes in &cfg.sizes {
        let what = format!("contention {name} {}", bytes_label(bytes));
        progress(&format!("{what} round {}", round + 1));
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
        samples.push(Sample {
            transfers: tally.n,
            transfer_us: cost.wall.as_secs_f64() * 1e6 / tally.n.max(1) as f64,
            cpu_us: cost.cpu_us_per(tally.n),
            cpu_share: whole.cpu_share(),
            app_share: shared / solo,
        });
    }
    drop(proxy);
    drop(placed);
    Ok(samples)
}

/// Runs every mode and size in `cfg.rounds` rounds, the modes' order
/// reversed every other round.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let modes = Completion::ALL;
    // samples[mode][size] over the rounds.
    let mut samples: Vec<Vec<Vec<Sample>>> = modes
        .iter()
        .map(|_| cfg.sizes.iter().map(|_| Vec::new()).collect())
        .collect();
    in_turns(modes.len(), cfg.rounds, |m, round| {
        for (k, s) in round_of(cfg, modes[m], round, &mut *progress)?
            .into_iter()
            .enumerate()
        {
            samples[m][k].push(s);
        }
        Ok::<f64, Error>(0.0)
    })?;
    let mut rows = Vec::new();
    for (m, mode) in modes.iter().enumerate() {
        for (k, &bytes) in cfg.sizes.iter().enumerate() {
            let ss = &samples[m][k];
            let of = |f: fn(&Sample) -> f64| beside::spread(ss, f);
            rows.push(Row {
                completion: mode.name(),
                bytes,
                transfers: ss.iter().map(|s| s.transfers).sum(),
                transfer_us: of(|s| s.transfer_us),
                model_us: cfg.profile.port.two_way(bytes, false).as_secs_f64() * 1e6,
                cpu_us: of(|s| s.cpu_us).median,
                cpu_share: of(|s| s.cpu_share).median,
                app_share: of(|s| s.app_share),
            });
        }
    }
    Ok(rows)
}

/// The rows' columns.
fn columns<'a>() -> Columns<'a, Row> {
    Columns::new()
        .col("size", "bytes", |r: &Row| bytes_label(r.bytes), |r| r.bytes)
        .plain("completion", "completion", |r| r.completion)
        .percent("app keeps", "app_share", |r| r.app_share.median)
        .col(
            "rounds' range",
            "app_share_spread",
            |r| {
                format!(
                    "{:.0}..{:.0} %",
                    100.0 * r.app_share.min,
                    100.0 * r.app_share.max
                )
            },
            |r| r.app_share,
        )
        .fixed("us/transfer", "transfer_us", 2, |r| r.transfer_us.median)
        .range("rounds' range", "transfer_us_spread", 2, |r| r.transfer_us)
        .fixed("model us", "model_us", 2, |r| r.model_us)
        .fixed("overhead us", "overhead_us", 2, Row::overhead_us)
        .fixed("driver CPU us", "cpu_us", 2, |r| r.cpu_us)
        .percent("driver CPU share", "cpu_share", |r| r.cpu_share)
        .plain("transfers", "transfers", |r| r.transfers)
}

fn find<'a>(rows: &'a [Row], completion: &str, bytes: usize) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.completion == completion && r.bytes == bytes)
}

/// The target: with interrupts the application keeps >= 80 % of its
/// solo throughput at 1 MiB transfers (and what polling leaves it, beside).
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let large = rows.iter().map(|r| r.bytes).max().unwrap_or(0);
    match (find(rows, "irq", large), find(rows, "poll", large)) {
        (Some(i), Some(p)) => vec![Target::new(
            format!(
                "{} transfers with irq: the application keeps >= 80 % of its solo throughput",
                bytes_label(large)
            ),
            format!(
                "{:.0} % (poll leaves it {:.0} %)",
                100.0 * i.app_share.median,
                100.0 * p.app_share.median
            ),
            i.app_share.median >= 0.8,
        )],
        _ => Vec::new(),
    }
}

/// One sentence per size extreme: what each mode leaves the application.
pub fn answer(rows: &[Row]) -> String {
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let clauses: Vec<String> = sizes
        .iter()
        .map(|&b| {
            let modes = per_mode(|c| {
                find(rows, c, b).map(|r| {
                    format!(
                        "{c} {:.0} % ({:.1} us/transfer)",
                        100.0 * r.app_share.median,
                        r.transfer_us.median
                    )
                })
            });
            format!(
                "with {} transfers on its core the application keeps {modes}",
                bytes_label(b),
            )
        })
        .collect();
    sentence(&clauses)
}

/// The run as a report.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let heading = format!(
        "contention: an application (64-tap FIR filter passes over {} samples) shares the \
         driver's core with back-to-back two-way transfers, {} per point in each of {} \
         rounds (modes' order reversed every other round), link = {}; its throughput as a \
         share of its throughput alone, measured just before; medians of the rounds",
        SAMPLES,
        ms_label(cfg.duration),
        cfg.rounds,
        cfg.profile.description
    );
    Report::of("contention", heading, &columns(), rows)
        .answer(answer(rows))
        .targets(targets(rows))
        .plots([beside::plot(
            "What each completion mode leaves the application on its core",
            "application throughput kept (%)",
            series_by(
                rows,
                |r| r.completion.to_string(),
                |r| r.bytes as f64,
                |r| 100.0 * r.app_share.median,
            ),
        )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_measures_every_mode_and_size() {
        let rows = run(&config(&Setup::TINY), &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 4 * 2);
        for r in &rows {
            assert!(r.transfers > 0, "{r:?}");
            let share = r.app_share.median;
            assert!(share > 0.0 && share.is_finite(), "{r:?}");
            assert!(r.transfer_us.median >= r.model_us, "{r:?}");
        }
        let j = report(&config(&Setup::TINY), &rows).json;
        assert_eq!(j["experiment"], "contention");
        assert!(j["rows"][0]["app_share"].is_number());
        assert!(answer(&rows).contains("application keeps"));
    }
}
