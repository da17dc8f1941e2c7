//! `dmaflow bench contention`: what a completion mode leaves for the
//! application (papers 002 and 004's trade-off) when the two share a core: the
//! Linux scheduler's sharing, not memory bandwidth (that is `bench memory`).
//! A cache-resident application (a 64-tap FIR filter over a buffer, again and
//! again) shares the driver's core while two-way transfers of 64 B, 4 KiB and
//! 1 MiB run back to back in each completion mode; its throughput is reported
//! as a share of its throughput alone, measured just before. Rounds: every
//! mode and size in each, the modes' order reversed every other round.

use std::time::Duration;

use dmaflow::dma::Completion;

use super::app::{App, SAMPLES, Work};
use super::beside;
use super::columns::Columns;
use super::conditions::Conditions;
use super::dma::proxy;
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
    /// Wall time per transfer, in microseconds: the rounds' means.
    pub transfer_us: Spread,
    /// What the modelled device needs per transfer, in microseconds.
    pub model_us: f64,
    /// Host CPU of the driver-side threads per transfer, in microseconds.
    pub cpu_us: f64,
    /// Driver-side CPU over the point's wall time (of the shared core).
    pub cpu_share: f64,
    /// Application throughput beside the transfers over alone, the rounds'.
    pub app_share: Spread,
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
/// engine over); the driver and the application share one core.
fn round_of(
    cfg: &Config,
    mode: Completion,
    round: usize,
    progress: Progress,
) -> Result<Vec<Sample>, Error> {
    let (mut rig, _placed, core) = cfg.board(cfg.profile.port)?;
    let proxy = (mode == Completion::Proxy)
        .then(|| proxy(vec![rig.engines.remove(0)]))
        .transpose()?;
    let mut samples = Vec::new();
    for &bytes in &cfg.sizes {
        let what = format!("contention {} {}", mode.name(), bytes_label(bytes));
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
    Ok(samples)
}

/// Runs every mode and size in `cfg.rounds` rounds, the modes' order
/// reversed every other round.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let modes = Completion::ALL;
    // Per mode, per round, per size.
    let mut samples: Vec<Vec<Vec<Sample>>> = modes.iter().map(|_| Vec::new()).collect();
    in_turns(modes.len(), cfg.rounds, |m, round| {
        samples[m].push(round_of(cfg, modes[m], round, &mut *progress)?);
        Ok::<f64, Error>(0.0)
    })?;
    let mut rows = Vec::new();
    for (mode, rounds) in modes.iter().zip(&samples) {
        for (k, &bytes) in cfg.sizes.iter().enumerate() {
            let ss: Vec<&Sample> = rounds.iter().map(|r| &r[k]).collect();
            let of = |f: fn(&&Sample) -> f64| beside::spread(&ss, f);
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
    let range = |s: Spread| format!("{:.0}..{:.0} %", 100.0 * s.min, 100.0 * s.max);
    Columns::new()
        .col("size", "bytes", |r: &Row| bytes_label(r.bytes), |r| r.bytes)
        .plain("completion", "completion", |r| r.completion)
        .percent("app keeps", "app_share", |r| r.app_share.median)
        .shown_as("rounds' range", "app_share_spread", |r| r.app_share, range)
        .fixed("us/transfer", "transfer_us", 2, |r| r.transfer_us.median)
        .range("rounds' range", "transfer_us_spread", 2, |r| r.transfer_us)
        .fixed("model us", "model_us", 2, |r| r.model_us)
        .fixed("overhead us", "overhead_us", 2, |r| {
            r.transfer_us.median - r.model_us
        })
        .fixed("driver CPU us", "cpu_us", 2, |r| r.cpu_us)
        .percent("driver CPU share", "cpu_share", |r| r.cpu_share)
        .plain("transfers", "transfers", |r| r.transfers)
}

/// The run as a report: one sentence per size of what each mode leaves the
/// application, and the target (with interrupts the application
/// keeps >= 80 % of its solo throughput at the largest transfers).
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let find = |c: &str, b: usize| rows.iter().find(|r| r.completion == c && r.bytes == b);
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let clauses: Vec<String> = sizes
        .iter()
        .map(|&b| {
            let modes = per_mode(|c| {
                find(c, b).map(|r| {
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
    let large = sizes.last().copied().unwrap_or(0);
    let targets = find("irq", large).zip(find("poll", large)).map(|(i, p)| {
        Target::new(
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
        )
    });
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
        .answer(sentence(&clauses))
        .targets(targets.into_iter().collect())
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
        // Five completion modes (poll, yield, irq, adaptive, proxy), two sizes.
        assert_eq!(rows.len(), 5 * 2);
        for r in &rows {
            assert!(r.transfers > 0, "{r:?}");
            let share = r.app_share.median;
            assert!(share > 0.0 && share.is_finite(), "{r:?}");
            assert!(r.transfer_us.median >= r.model_us, "{r:?}");
        }
        let report = report(&config(&Setup::TINY), &rows);
        assert_eq!(report.json["experiment"], "contention");
        assert!(report.json["rows"][0]["app_share"].is_number());
        assert!(report.answer.contains("application keeps"));
    }
}
