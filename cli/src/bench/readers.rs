//! `dmaflow bench readers`: one writer and 1, 2 or 4 readers of the same
//! queue, in the shape of GNU Radio 4's `bm_Buffer` benchmark: operations per
//! second at 1 item per operation and samples per second at 1024 items per
//! operation. Every reader sees every item (a broadcast, as GNU Radio 4's
//! circular buffer gives each reader the whole stream); the writer waits for
//! the slowest. The peer is vmcircbuffer's lock-free variant, the same
//! double-mapping design with several readers.
//!
//! Items are `f32`, each written with its sequence number as its bits, and
//! every reader's checksum is verified; each operation moves exactly
//! `items_per_op` items on every side. Threads are pinned as `bench ring`
//! pins them ([`together`]: on two cores one reader has a core of its own
//! and more readers share the other with the writer), every side spins then
//! yields; implementations take turns, the order reversed every other round.

use std::fmt;

use dmaflow::ring::{Builder, Reader, Wait};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point, Row};
use super::harness::{Setup, Tier};
use super::peers::{checksum, fill, series};
use super::plot::XAxis;
use super::queues::together;
use super::report::{Target, within};

/// `dmaflow bench readers`.
pub static EXPERIMENT: Bench<Config, At, Sample> = Bench {
    name: "readers",
    question: "One writer, several readers of one queue (GNU Radio 4's bm_Buffer shape).",
    conditions: Conditions {
        timed: "from the first thread's start to the last thread's end",
        against: "vmcircbuffer's lock-free SPMC buffer here, and GNU Radio 4's published \
                  bm_Buffer figures (another CPU, not measured here)",
        model: "none",
        paper: "GNU Radio 4 ran on a many-core desktop; here five threads share two cores",
    },
    emulator_only: "it measures queues on this machine, not a DMA device",
    plots: &[Plot {
        title: "readers: writer operations per second by reader count",
        x: "readers",
        y: "ops_per_s",
        interval: None,
        y_scale: 1e-6,
        lines: &["impl", "items_per_op"],
        axis: XAxis::Linear,
        log_y: true,
    }],
    heading,
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Reader counts.
    pub readers: Vec<usize>,
    /// Items per operation (GNU Radio 4's cases: 1 and 1024).
    pub items_per_op: Vec<usize>,
    /// Operations per measurement at 1 item per operation (scaled down for
    /// larger operations so that a measurement moves at most
    /// `max_items` items).
    pub ops: usize,
    /// Items per measurement at most.
    pub max_items: usize,
    /// Queue capacity in items.
    pub queue_items: usize,
    /// Rounds.
    pub rounds: usize,
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            readers: vec![1, 2, 4],
            items_per_op: vec![1, 1024],
            ops: 1 << 22,
            max_items: 1 << 26,
            queue_items: 1 << 16,
            rounds: 5,
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                ops: 1 << 20,
                max_items: 1 << 24,
                rounds: 3,
                ..full
            },
            Tier::Tiny => Config {
                readers: vec![1, 2],
                items_per_op: vec![1, 64],
                ops: 1 << 12,
                max_items: 1 << 16,
                queue_items: 1 << 10,
                rounds: 1,
            },
        }
    }

    /// Items per measurement for `per_op` items per operation.
    fn items(&self, per_op: usize) -> usize {
        (self.ops.saturating_mul(per_op)).min(self.max_items) / per_op * per_op
    }
}

/// Where a point is: a reader count and an operation size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct At {
    /// Readers.
    pub readers: usize,
    /// Items per operation.
    pub items_per_op: usize,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} readers, {} items per operation",
            self.readers, self.items_per_op
        )
    }
}

/// What one measurement of a point gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Writer operations per second.
    pub ops_per_s: f64,
    /// Samples per second each reader received.
    pub samples_per_s: f64,
}

/// A run's seconds, once every reader's checksum is that of the `items`
/// items written.
fn checked(name: &str, items: usize, (secs, sums): (f64, Vec<u32>)) -> Result<f64, Error> {
    let expected = series(0, items as u64);
    match sums.into_iter().find(|&s| s != expected) {
        Some(got) => Err(Error::Corrupted {
            what: format!("readers {name}: a reader's checksum"),
            got,
            expected,
        }),
        None => Ok(secs),
    }
}

/// dmaflow's queue, each reader taking up to `per_op` items an operation.
fn dmaflow_point(cfg: &Config, readers: usize, per_op: usize) -> Result<f64, Error> {
    let items = cfg.items(per_op);
    let (mut w, r0) = Builder::<f32>::new(cfg.queue_items)
        .wait(Wait::Yield)
        .build()?;
    let rs: Vec<_> = std::iter::once(r0)
        .chain((1..readers).map(|_| w.add_reader()))
        .collect();
    let read = |mut r: Reader<f32>| {
        let mut sum = 0u32;
        move || loop {
            let s = r.peek(per_op)?;
            let k = s.len().min(per_op);
            if k == 0 {
                return Ok(sum);
            }
            sum = sum.wrapping_add(checksum(&s[..k]));
            r.consume(k)?;
        }
    };
    let write = move || {
        for at in (0..items).step_by(per_op) {
            fill(w.reserve(per_op)?, at as u32);
            w.commit(per_op)?;
        }
        Ok(())
    };
    let readers = rs.into_iter().map(read).collect();
    checked("dmaflow", items, together("dmaflow", write, readers)?)
}

/// vmcircbuffer's lock-free variant, each reader taking a whole operation's
/// items.
#[cfg(feature = "peers")]
fn vmcircbuffer_point(cfg: &Config, readers: usize, per_op: usize) -> Result<f64, Error> {
    let items = cfg.items(per_op);
    let stream = (items / per_op, per_op);
    let run = super::queues::vmcircbuffer(
        super::queues::Waits::Shared,
        cfg.queue_items,
        readers,
        stream,
        (Some(per_op), &std::sync::atomic::AtomicU64::new(0)),
    );
    checked("vmcircbuffer", items, run?)
}

type Measure = fn(&Config, usize, usize) -> Result<f64, Error>;

fn implementations() -> Vec<(&'static str, Measure)> {
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, Measure)> = vec![("dmaflow", dmaflow_point)];
    #[cfg(feature = "peers")]
    v.push(("vmcircbuffer", vmcircbuffer_point));
    v
}

/// Every implementation at every operation size and reader count.
fn points(cfg: &Config) -> Vec<Point<At>> {
    let mut v = Vec::new();
    for &items_per_op in &cfg.items_per_op {
        for &readers in &cfg.readers {
            for (series, _) in implementations() {
                v.push(Point {
                    series,
                    at: At {
                        readers,
                        items_per_op,
                    },
                });
            }
        }
    }
    v
}

/// One run of one point: its rates, the readers' checksums verified.
fn measure(cfg: &Config, p: &Point<At>) -> Result<Sample, Error> {
    let (_, run) = implementations()
        .into_iter()
        .find(|(name, _)| *name == p.series)
        .ok_or(Error::Peer {
            peer: p.series,
            reason: "not built into this tool".into(),
        })?;
    let At {
        readers,
        items_per_op,
    } = p.at;
    let seconds = run(cfg, readers, items_per_op)?;
    let items = cfg.items(items_per_op) as f64;
    Ok(Sample {
        ops_per_s: items / items_per_op as f64 / seconds,
        samples_per_s: items / seconds,
    })
}

/// GNU Radio 4's published `bm_Buffer` figures (one writer; a desktop CPU,
/// not this machine): (readers, items per operation, operations per second).
const GNURADIO4: [(usize, usize, f64); 3] =
    [(1, 1, 62.5e6), (4, 1, 23.6e6), (1, 1024, 11.4e9 / 1024.0)];

/// dmaflow's writer operations per second (median) to `readers` readers at
/// `per_op` items per operation.
fn dmaflow_ops(rows: &[Row<At, Sample>], readers: usize, per_op: usize) -> Option<f64> {
    let at = At {
        readers,
        items_per_op: per_op,
    };
    rows.iter()
        .find(|r| r.point.series == "dmaflow" && r.point.at == at)
        .map(|r| r.median(|s| s.ops_per_s))
}

/// The rows' columns, with GNU Radio 4's published figure beside dmaflow's.
fn columns() -> Columns<'static, Row<At, Sample>> {
    let gr = |r: &Row<At, Sample>| {
        GNURADIO4
            .iter()
            .find(|g| g.0 == r.point.at.readers && g.1 == r.point.at.items_per_op)
            .filter(|_| r.point.series == "dmaflow")
            .map_or(String::new(), |g| {
                format!(
                    "{:.1} M ops/s, {:.2} G samples/s",
                    g.2 / 1e6,
                    g.2 * g.1 as f64 / 1e9
                )
            })
    };
    Columns::new()
        .plain("readers", "readers", |r: &Row<At, Sample>| {
            r.point.at.readers
        })
        .doc("readers, each receiving every item")
        .plain("items/op", "items_per_op", |r| r.point.at.items_per_op)
        .doc("items per operation on every side")
        .series("impl", "impl", "dmaflow or vmcircbuffer")
        .measured(
            "M ops/s",
            "ops_per_s",
            "writer operations per second",
            (1e-6, 1),
            |s| s.ops_per_s,
        )
        .col(
            "G samples/s per reader",
            "samples_per_s_per_reader",
            |r| format!("{:.3}", r.median(|s| s.samples_per_s) / 1e9),
            |r| r.median(|s| s.samples_per_s),
        )
        .doc("samples per second each reader received, median")
        .rounds()
        .shown("GNU Radio 4 bm_Buffer (published, other CPU)", gr)
}

/// What was measured.
fn heading(cfg: &Config) -> String {
    let top = cfg.readers.iter().copied().max().unwrap_or(1);
    format!(
        "one writer, 1..{top} readers each receiving every item, queue of {} items; GNU Radio \
         4's bm_Buffer shape; writer pinned to the first core, reader i to core i + 1 (modulo \
         the cores)",
        cfg.queue_items
    )
}

/// More readers against one at the largest operation, and the answer.
fn findings(cfg: &Config, rows: &[Row<At, Sample>]) -> Findings {
    let mut found = Findings::default();
    let top = cfg.readers.iter().copied().max().unwrap_or(1);
    let big = cfg.items_per_op.iter().copied().max().unwrap_or(1);
    if let (Some(one), Some(many)) = (dmaflow_ops(rows, 1, big), dmaflow_ops(rows, top, big))
        && top > 1
    {
        let ratio = one / many;
        found.notes += &format!(
            "{top} readers at {big} items per operation: {ratio:.2}x slower than 1 reader\n"
        );
        // Within 2x on both sides: more readers running much faster than one
        // would say the measurement is wrong, not that the queue is good.
        found.targets.push(Target::new(
            format!("{top} readers within 2x of 1 reader at {big} items per operation"),
            format!("{ratio:.2}x slower"),
            within(ratio, 0.5, 2.0),
        ));
    }
    found.clauses = cfg
        .items_per_op
        .iter()
        .filter_map(|&n| {
            let one = dmaflow_ops(rows, 1, n)? / 1e6;
            let many = dmaflow_ops(rows, top, n)? / 1e6;
            Some(format!(
                "at {n} items per operation dmaflow's writer makes {one:.1} M operations per \
                 second to 1 reader and {many:.1} M to {top}"
            ))
        })
        .collect();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_gets_every_item_and_the_report_names_the_target() {
        let cfg = Config::at(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 2 * implementations().len());
        assert!(
            rows.iter()
                .all(|r| r.rounds() == 1 && r.samples[0].ops_per_s > 0.0)
        );
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert!(
            rep.text.contains("2 readers within 2x of 1 reader"),
            "{}",
            rep.text
        );
        assert_eq!(rep.json["rows"].as_array().unwrap().len(), rows.len());
    }
}
