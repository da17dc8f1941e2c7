//! `dmaflow bench windows`: overlapping windows read from a queue, as a
//! filter with a firing threshold reads them (window `w`, hop `w / 2`). The
//! mirrored queue gives every window as one slice in place; a `VecDeque`
//! gives two slices once the window crosses its end, and a reader that needs
//! the window whole (an FFT's input) copies it first. One thread writes and
//! reads in turn, so what differs is only how a window is reached; every
//! window's checksum is added up and checked against the stream's.

use std::collections::VecDeque;

use dmaflow::ring::Builder;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point, Row};
use super::harness::Setup;
use super::peers::{checksum, fill, series};
use super::plot::XAxis;
use super::report::Target;

/// `dmaflow bench windows`.
pub static EXPERIMENT: Bench<Config, usize, Sample> = Bench {
    name: "windows",
    question: "Overlapping windows read in place from the mirrored queue vs assembled from a \
               VecDeque.",
    conditions: Conditions {
        timed: "one thread writing hops and reading windows until the stream ends",
        against: "std's VecDeque of the same capacity, a window copied whole when it crosses \
                  the end",
        model: "none",
        paper: "paper 001's firing thresholds without the FFT: only the window's reach is timed",
    },
    baseline: Some("vecdeque"),
    plots: &[Plot {
        title: "windows: items per second by window length",
        x: "window_items",
        y: "items_per_s",
        interval: None,
        y_scale: 1e-6,
        lines: &["path"],
        axis: XAxis::PowersOfTwo,
        log_y: false,
    }],
    heading: |c| {
        format!(
            "{} f32 items a measurement, windows of {:?} items, hop half a window",
            c.items, c.windows
        )
    },
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Window lengths in items.
    pub windows: Vec<usize>,
    /// Items streamed per measurement.
    pub items: usize,
    /// Rounds.
    pub rounds: usize,
}

impl Config {
    /// The size `setup` asks for.
    pub fn at(setup: &Setup) -> Self {
        let (items, rounds) = setup.tier.pick((1 << 25, 7), (1 << 23, 3), (1 << 14, 2));
        Config {
            windows: setup
                .tier
                .pick(vec![64, 4096, 65536], vec![64, 4096, 65536], vec![64, 1024]),
            items,
            rounds,
        }
    }
}

/// What one measurement gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Items streamed per second.
    pub items_per_s: f64,
    /// Every window's checksum added up equals the stream's.
    pub verified: bool,
}

/// Both paths at every window length.
fn points(cfg: &Config) -> Vec<Point<usize>> {
    let mut v = Vec::new();
    for &at in &cfg.windows {
        for series in ["vecdeque", "dmaflow"] {
            v.push(Point { series, at });
        }
    }
    v
}

/// The checksums of every window of `w` items at hop `w / 2` of a stream of
/// `n` items numbered from 0, added up.
fn expected(n: usize, w: usize) -> u32 {
    let hop = w / 2;
    let Some(last) = n.checked_sub(w) else {
        return 0;
    };
    (0..=last / hop).fold(0u32, |a, k| {
        a.wrapping_add(series((k * hop) as u64, w as u64))
    })
}

/// One stream through one path.
fn measure(cfg: &Config, p: &Point<usize>) -> Result<Sample, Error> {
    let (w, n) = (p.at, cfg.items);
    let hop = w / 2;
    let start = std::time::Instant::now();
    let mut sum = 0u32;
    if p.series == "dmaflow" {
        let (mut tx, mut rx) = Builder::<f32>::new(2 * w).build()?;
        for at in (0..n).step_by(hop) {
            fill(tx.reserve(hop)?, at as u32);
            tx.commit(hop)?;
            if let Some(s) = rx.try_peek(w)? {
                sum = sum.wrapping_add(checksum(&s[..w]));
                rx.consume(hop)?;
            }
        }
    } else {
        let mut q = VecDeque::<f32>::with_capacity(2 * w);
        let mut whole = vec![0f32; w];
        for at in (0..n).step_by(hop) {
            q.extend((0..hop).map(|k| f32::from_bits((at + k) as u32)));
            if q.len() >= w {
                let (a, b) = q.as_slices();
                let window = if a.len() >= w {
                    &a[..w]
                } else {
                    whole[..a.len()].copy_from_slice(a);
                    whole[a.len()..].copy_from_slice(&b[..w - a.len()]);
                    &whole[..]
                };
                sum = sum.wrapping_add(checksum(window));
                q.drain(..hop);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Sample {
        items_per_s: n as f64 / secs,
        verified: sum == expected(n, w),
    })
}

/// The rows' columns.
fn columns() -> Columns<'static, Row<usize, Sample>> {
    Columns::new()
        .series("path", "path", "dmaflow (in place) or vecdeque (copied)")
        .plain("window", "window_items", |r: &Row<usize, Sample>| {
            r.point.at
        })
        .doc("items a window holds; the hop is half")
        .measured(
            "M items/s",
            "items_per_s",
            "items streamed per second",
            (1e-6, 1),
            |s| s.items_per_s,
        )
        .ratio(
            "vs vecdeque",
            "vs_vecdeque",
            "items_per_s over vecdeque's in the same round",
            |s| s.items_per_s,
        )
        .checked(
            "verified",
            "verified",
            "every window's checksum added up is the stream's",
            |s| s.verified,
        )
        .rounds()
}

/// Per window: dmaflow against the copy, and a target that it is not slower.
fn findings(_: &Config, rows: &[Row<usize, Sample>]) -> Findings {
    let mut found = Findings::default();
    for r in rows.iter().filter(|r| r.point.series == "dmaflow") {
        let Some(q) = r.ratio(|s| s.items_per_s) else {
            continue;
        };
        found.clauses.push(format!(
            "at {} items a window dmaflow streams {}",
            r.point.at,
            q.text_with_verdict()
        ));
        found.targets.push(Target::new(
            format!(
                "windows of {} items: in place not slower than copied",
                r.point.at
            ),
            q.text_with_verdict(),
            q.verdict() != "slower",
        ));
    }
    found.targets.push(Target::new(
        "every window's data as written",
        format!("{} points checked", rows.len()),
        rows.iter().all(|r| r.every(|s| s.verified)),
    ));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_see_every_window_and_the_sum_of_windows_is_right() {
        // Two windows of 4 at hop 2 over 6 items: 0..4 and 2..6.
        assert_eq!(expected(6, 4), (1 + 2 + 3) + (2 + 3 + 4 + 5));
        let cfg = Config::at(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * cfg.windows.len());
        assert!(rows.iter().all(|r| r.every(|s| s.verified)), "{rows:?}");
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert!(
            rep.targets
                .iter()
                .any(|t| t.what.contains("as written") && t.met)
        );
        assert_eq!(rep.plots.len(), 1);
        assert!(rep.json["rows"][1]["vs_vecdeque"].is_number());
    }
}
