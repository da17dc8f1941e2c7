//! `dmaflow bench twoway`: paper 000's tables 1-3. Two-way transfers (MM2S out,
//! S2MM back, as the background-subtraction coprocessor is fed) of 640-byte image
//! lines x {1, 10, 100, 480, 1000, 1600} through the fabric at 100 MHz x 1 byte,
//! timed one by one: user-level polling on zero-copy buffers (the paper's "bare
//! metal" column) against the kernel-style [`Proxy`] driver (its "Linux" column).

use std::time::Instant;

use serde_json::json;

use super::meter::{Meter, Tally};
use super::report::{Target, sentence};
use super::{Error, Rig, table};
use dmaflow::dma::{Completion, Proxy};
use dmaflow::platform::MemoryModel;
use dmaflow::sim::{Clock, Loopback};

/// The paper's fabric: 100 MHz, one byte per cycle.
pub const FABRIC: Clock = Clock::Rate {
    mhz: 100.0,
    bytes_per_cycle: 1.0,
};

/// The ideal throughput of that fabric in MiB/s (2^20 B/s): 95.37.
pub const IDEAL_MIB_PER_S: f64 = 100e6 / (1u64 << 20) as f64;

/// Bytes per image line.
pub const LINE: usize = 640;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Image heights (lines of 640 bytes).
    pub lines: Vec<usize>,
    /// Transfers per point.
    pub iterations: usize,
    /// The board's memory (a non-coherent one runs with explicit maintenance).
    pub memory: MemoryModel,
}

impl Config {
    /// The paper's sweep: 1000 transfers per point.
    pub fn full() -> Self {
        Config {
            lines: vec![1, 10, 100, 480, 1000, 1600],
            iterations: 1000,
            memory: MemoryModel::Coherent,
        }
    }

    /// Fewer transfers per point.
    pub fn quick() -> Self {
        Config {
            iterations: 100,
            ..Self::full()
        }
    }

    /// A tiny sweep for tests.
    pub fn tiny() -> Self {
        Config {
            lines: vec![1, 10],
            iterations: 20,
            memory: MemoryModel::Coherent,
        }
    }
}

/// One point: statistics of the per-transfer time.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `poll` or `proxy`.
    pub completion: &'static str,
    /// Image lines.
    pub lines: usize,
    /// Bytes each way.
    pub bytes: usize,
    /// Mean microseconds per two-way transfer.
    pub avg_us: f64,
    /// Fastest transfer.
    pub min_us: f64,
    /// Slowest transfer.
    pub max_us: f64,
    /// Standard deviation (population).
    pub stddev_us: f64,
    /// Bytes / mean time, in MiB/s.
    pub mib_per_s: f64,
    /// Transfers measured.
    pub iterations: usize,
    /// What the modelled device needs per transfer (PG021 latencies and the
    /// 100 MB/s stream), in microseconds.
    pub model_us: f64,
    /// Mean host CPU per transfer of the driver-side threads, in microseconds.
    pub cpu_us: f64,
    /// Host CPU over wall time while the transfers ran.
    pub cpu_share: f64,
    /// Median time to issue one transfer's commands (program S2MM and MM2S,
    /// cache maintenance included), in microseconds; zero-copy paths only
    /// (paper 000 measured 5.68 us on its board).
    pub issue_us: Option<f64>,
}

impl Row {
    /// Mean measured minus modelled time per transfer.
    pub fn overhead_us(&self) -> f64 {
        self.avg_us - self.model_us
    }

    fn new(completion: &'static str, lines: usize, samples: &[f64], cost: &Tally) -> Self {
        let n = samples.len().max(1) as f64;
        let avg = samples.iter().sum::<f64>() / n;
        let var = samples.iter().map(|s| (s - avg) * (s - avg)).sum::<f64>() / n;
        let bytes = lines * LINE;
        Row {
            completion,
            lines,
            bytes,
            avg_us: avg,
            min_us: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max_us: samples.iter().copied().fold(0.0, f64::max),
            stddev_us: var.sqrt(),
            mib_per_s: bytes as f64 / (avg * 1e-6) / (1u64 << 20) as f64,
            iterations: samples.len(),
            model_us: FABRIC.two_way(bytes, false).as_secs_f64() * 1e6,
            cpu_us: cost.cpu_us(),
            cpu_share: cost.cpu_share(),
            issue_us: None,
        }
    }
}

fn image(lines: usize, salt: usize) -> Vec<u8> {
    (0..lines * LINE)
        .map(|i| ((i / LINE) * 3 + i + salt) as u8)
        .collect()
}

/// Runs the sweep; every transfer's data is checked.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    let largest = cfg.lines.iter().copied().max().unwrap_or(1) * LINE;
    let mut rig = Rig::with_model(
        (4 * largest + (1 << 20)).next_power_of_two(),
        FABRIC,
        false,
        super::policy_for(cfg.memory),
        cfg.memory,
        Box::new(Loopback),
    )?;
    let mut rows = Vec::new();
    let corrupted = |what: String, got: usize, expected: usize| Error::Corrupted {
        what,
        got: got as u32,
        expected: expected as u32,
    };
    let _placed = rig.dedicate_core()?;
    {
        let engine = &rig.engines[0];
        for (name, mode) in [("poll", Completion::Poll), ("irq", Completion::Irq)] {
            for &lines in &cfg.lines {
                let what = format!("twoway 640x{lines} {name}");
                progress(&what);
                let bytes = lines * LINE;
                let mut tx = engine.pool().alloc::<u8>(bytes)?;
                let mut rx = engine.pool().alloc::<u8>(bytes)?;
                let mut samples = Vec::with_capacity(cfg.iterations);
                let mut cost = Tally::default();
                for it in 0..cfg.iterations {
                    let data = image(lines, it);
                    tx.as_mut_slice().copy_from_slice(&data);
                    rx.as_mut_slice().fill(0);
                    let m = Meter::start(None);
                    let n = engine.two_way(&tx, bytes, &mut rx, mode)?;
                    let c = m.stop();
                    samples.push(c.wall.as_secs_f64() * 1e6);
                    cost.add(c);
                    if n != bytes || rx.as_slice() != data.as_slice() {
                        return Err(corrupted(what, n, bytes));
                    }
                }
                // The commands of one transfer, timed on their own: begin
                // programs both channels and returns; the wait is not timed.
                let mut issue = Vec::with_capacity(cfg.iterations);
                for _ in 0..cfg.iterations {
                    let t0 = Instant::now();
                    let flight = engine
                        .begin(tx, bytes, rx, bytes, mode)
                        .map_err(|f| Error::Dma(f.error))?;
                    issue.push(t0.elapsed().as_secs_f64() * 1e6);
                    let done = flight.wait().map_err(|f| Error::Dma(f.error))?;
                    (tx, rx) = (done.tx, done.rx);
                }
                let mut row = Row::new(name, lines, &samples, &cost);
                row.issue_us = Some(super::median(&issue));
                rows.push(row);
            }
        }
    }
    let engine = rig.engines.remove(0);
    let proxy = Proxy::start(engine).map_err(|source| Error::Io {
        path: "proxy driver thread".into(),
        source,
    })?;
    for &lines in &cfg.lines {
        progress(&format!("twoway 640x{lines} proxy"));
        let bytes = lines * LINE;
        let mut samples = Vec::with_capacity(cfg.iterations);
        let mut cost = Tally::default();
        let mut buf = Vec::new();
        for it in 0..cfg.iterations {
            let data = image(lines, it);
            buf.clear();
            buf.extend_from_slice(&data);
            let m = Meter::start(Some(&proxy));
            buf = proxy.transfer(buf, bytes)?;
            let c = m.stop();
            samples.push(c.wall.as_secs_f64() * 1e6);
            cost.add(c);
            if buf != data {
                return Err(corrupted(
                    format!("twoway 640x{lines} proxy"),
                    buf.len(),
                    bytes,
                ));
            }
        }
        rows.push(Row::new("proxy", lines, &samples, &cost));
    }
    Ok(rows)
}

/// Tables 1-3 of the paper: time per transfer for both drivers and their
/// difference, throughput against the ideal, and the spread of each.
pub fn render(rows: &[Row]) -> String {
    let find = |c: &str, l: usize| rows.iter().find(|r| r.completion == c && r.lines == l);
    let mut lines: Vec<usize> = rows.iter().map(|r| r.lines).collect();
    lines.sort_unstable();
    lines.dedup();
    let mut out = String::from("Table 1: time per two-way transfer (us, mean)\n");
    let t1: Vec<Vec<String>> = lines
        .iter()
        .filter_map(|&l| {
            let (p, k) = (find("poll", l)?, find("proxy", l)?);
            Some(vec![
                format!("640x{l}"),
                format!("{:.1}", k.avg_us),
                format!("{:.1}", p.avg_us),
                format!("{:.1}", k.avg_us - p.avg_us),
                format!("{:.1}", p.bytes as f64 / 100.0),
            ])
        })
        .collect();
    out += &table(&["size", "proxy", "poll", "difference", "ideal"], &t1);
    out += "\nTable 2: throughput (MiB/s; ideal 95.37)\n";
    let t2: Vec<Vec<String>> = lines
        .iter()
        .filter_map(|&l| {
            let (p, k) = (find("poll", l)?, find("proxy", l)?);
            Some(vec![
                format!("640x{l}"),
                format!("{:.2}", k.mib_per_s),
                format!("{:.2}", p.mib_per_s),
                format!("{IDEAL_MIB_PER_S:.2}"),
                format!("{:.2} %", 100.0 * p.mib_per_s / IDEAL_MIB_PER_S),
            ])
        })
        .collect();
    out += &table(&["size", "proxy", "poll", "ideal", "poll/ideal"], &t2);
    out += "\nTable 3: spread of the time per transfer (us)\n";
    let t3: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("640x{}", r.lines),
                r.completion.to_string(),
                format!("{:.1}", r.avg_us),
                format!("{:.1}", r.min_us),
                format!("{:.1}", r.max_us),
                format!("{:.2}", r.stddev_us),
            ]
        })
        .collect();
    out += &table(&["size", "driver", "avg", "min", "max", "stddev"], &t3);
    out += "\nTable 4: beyond the modelled device, and the host's CPU (us per transfer)\n";
    let t4: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("640x{}", r.lines),
                r.completion.to_string(),
                format!("{:.2}", r.model_us),
                format!("{:.2}", r.overhead_us()),
                format!("{:.2}", r.cpu_us),
                format!("{:.0} %", 100.0 * r.cpu_share),
                r.issue_us.map_or("-".into(), |i| format!("{i:.2}")),
            ]
        })
        .collect();
    out += &table(
        &[
            "size",
            "driver",
            "model",
            "overhead",
            "CPU",
            "CPU share",
            "issue",
        ],
        &t4,
    );
    out
}

/// The largest size's row of a completion mode.
fn largest<'a>(rows: &'a [Row], completion: &str) -> Option<&'a Row> {
    rows.iter()
        .filter(|r| r.completion == completion)
        .max_by_key(|r| r.lines)
}

/// Paper 000's target: polling within 1 % of the modelled link at 640 x 1600
/// (a share of the emulator's clock: what it says is that software's overhead
/// is small next to the link).
pub fn targets(rows: &[Row]) -> Vec<Target> {
    largest(rows, "poll")
        .map(|r| {
            let pct = 100.0 * r.mib_per_s / IDEAL_MIB_PER_S;
            Target::new(
                format!("poll at 640x{} within 1 % of the modelled link", r.lines),
                format!(
                    "{:.2} MiB/s = {pct:.2} % of {IDEAL_MIB_PER_S:.2} MiB/s",
                    r.mib_per_s
                ),
                pct >= 99.0,
            )
        })
        .into_iter()
        .collect()
}

/// One sentence: what each driver adds to the modelled device at the largest
/// size and what it costs the CPU, and the time to issue one transfer.
pub fn answer(rows: &[Row]) -> String {
    let mut clauses: Vec<String> = ["poll", "irq", "proxy"]
        .iter()
        .filter_map(|&c| largest(rows, c))
        .map(|r| {
            format!(
                "at 640x{} {} adds {:.1} us to the modelled {:.0} us ({:.2} % of the link kept, \
                 {:.1} us CPU)",
                r.lines,
                match r.completion {
                    "poll" => "user-level polling",
                    "irq" => "a UIO-style interrupt driver",
                    _ => "the kernel-style proxy driver",
                },
                r.overhead_us(),
                r.model_us,
                100.0 * r.mib_per_s / IDEAL_MIB_PER_S,
                r.cpu_us
            )
        })
        .collect();
    if let Some(i) = rows
        .iter()
        .filter(|r| r.completion == "poll")
        .min_by_key(|r| r.lines)
        .and_then(|r| r.issue_us)
    {
        clauses.push(format!(
            "issuing one transfer's commands takes {i:.2} us (paper 000: 5.68 us on a Zynq-7000)"
        ));
    }
    sentence(&clauses)
}

/// The result as `{"experiment":"twoway","rows":[...]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "twoway",
        "rows": rows.iter().map(|r| json!({
            "completion": r.completion,
            "lines": r.lines,
            "bytes": r.bytes,
            "avg_us": r.avg_us,
            "min_us": r.min_us,
            "max_us": r.max_us,
            "stddev_us": r.stddev_us,
            "mib_per_s": r.mib_per_s,
            "iterations": r.iterations,
            "model_us": r.model_us,
            "overhead_us": r.overhead_us(),
            "cpu_us": r.cpu_us,
            "cpu_share": r.cpu_share,
            "issue_us": r.issue_us,
        })).collect::<Vec<_>>(),
    })
}

/// The run as a report: tables 1-3, the target, throughput against size.
pub fn report(cfg: &Config, rows: &[Row]) -> super::report::Report {
    let mut series = super::report::series_by(
        rows,
        |r| r.completion.to_string(),
        |r| r.bytes as f64,
        |r| r.mib_per_s,
    );
    if let (Some(lo), Some(hi)) = (
        rows.iter().map(|r| r.bytes).min(),
        rows.iter().map(|r| r.bytes).max(),
    ) {
        series.push(super::plot::Series::new(
            "ideal",
            vec![(lo as f64, IDEAL_MIB_PER_S), (hi as f64, IDEAL_MIB_PER_S)],
        ));
    }
    super::report::Report {
        experiment: "twoway",
        heading: super::on_board(
            format!(
                "twoway: two-way transfers of 640-byte lines at 100 MHz x 1 B, {} per size, \
             user-level polling (bare-metal column) vs kernel-style proxy driver (Linux column)",
                cfg.iterations
            ),
            cfg.memory,
        ),
        answer: answer(rows),
        targets: targets(rows),
        text: render(rows) + &Target::lines(&targets(rows)),
        json: json(rows),
        plots: vec![super::plot::LinePlot {
            title: "Two-way transfer throughput (paper 000, Fig. 5)".into(),
            x_label: "transfer size, each way".into(),
            y_label: "throughput (MiB/s)".into(),
            x: super::plot::XAxis::Bytes,
            log_y: false,
            series,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_those_of_the_samples() {
        let r = Row::new("poll", 1, &[10.0, 20.0, 30.0], &Tally::default());
        assert_eq!((r.min_us, r.max_us, r.avg_us), (10.0, 30.0, 20.0));
        assert!((r.stddev_us - (200.0f64 / 3.0).sqrt()).abs() < 1e-9);
        // 640 B in a mean of 20 us: 32 MB/s = 30.52 MiB/s.
        assert!((r.mib_per_s - 30.5176).abs() < 1e-3, "{}", r.mib_per_s);
    }

    #[test]
    fn tiny_sweep_is_bounded_by_the_fabric_clock() {
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        assert_eq!(rows.len(), 6);
        for r in &rows {
            // No transfer beats the clock: 640 B at 100 MB/s is 6.4 us, and the
            // PG021 latencies come on top.
            assert!(r.min_us >= r.bytes as f64 / 100.0, "{r:?}");
            assert!(r.model_us > r.bytes as f64 / 100.0, "{r:?}");
            assert!(r.min_us >= r.model_us, "{r:?}");
            assert!(r.min_us <= r.avg_us && r.avg_us <= r.max_us, "{r:?}");
            assert!(r.mib_per_s <= IDEAL_MIB_PER_S, "{r:?}");
            assert!(r.cpu_us > 0.0, "{r:?}");
            // Issuing the commands is a small part of a whole transfer.
            match r.issue_us {
                Some(i) => assert!(i > 0.0 && i < r.avg_us, "{r:?}"),
                None => assert_eq!(r.completion, "proxy"),
            }
        }
        let text = render(&rows);
        assert!(text.contains("Table 3") && text.contains("640x10"));
        assert_eq!(json(&rows)["rows"][0]["completion"], "poll");
    }
}
