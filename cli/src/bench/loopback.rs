//! `dmaflow bench loopback`: two-way loopback transfers on the emulated fabric
//! (paper 002's Figs. 4-5), 8 B to 6 MB, for each completion mode and data path.
//! With the clock unlimited, the time is the software's own overhead.

use std::time::Instant;

use serde_json::json;

use super::report::sentence;
use super::{Error, bytes_label, median, table};
use dmaflow::dma::{Completion, Partition, Proxy, Timing};
use dmaflow::platform::MemoryModel;
use dmaflow::sim::Clock;

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
}

impl Config {
    /// The full sweep.
    pub fn full() -> Self {
        Config {
            sizes: vec![8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 6_000_000],
            max_iterations: 20_000,
            bytes_per_point: 256 << 20,
            block: 64 << 10,
            clock: Clock::Unlimited,
            memory: MemoryModel::Coherent,
        }
    }

    /// A shorter sweep.
    pub fn quick() -> Self {
        Config {
            max_iterations: 1_000,
            bytes_per_point: 24 << 20,
            ..Self::full()
        }
    }

    /// A tiny sweep for tests.
    pub fn tiny() -> Self {
        Config {
            sizes: vec![8, 4096],
            max_iterations: 30,
            bytes_per_point: 1 << 20,
            block: 1024,
            clock: Clock::Unlimited,
            memory: MemoryModel::Coherent,
        }
    }
}

/// One point: median times of a two-way transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `poll`, `yield`, `irq` or `proxy`.
    pub completion: &'static str,
    /// `zerocopy` or `copy`.
    pub path: &'static str,
    /// `single` or `double` (driver buffers the copy goes through).
    pub buffering: &'static str,
    /// `unique` (one transfer) or `blocks` (transfers of `block_bytes`).
    pub partition: &'static str,
    /// Block size for `blocks`, the whole message for `unique`.
    pub block_bytes: usize,
    /// Bytes each way.
    pub bytes: usize,
    /// Median microseconds per two-way transfer (call to return).
    pub median_us: f64,
    /// Median microseconds from programming the engine to MM2S completion.
    pub tx_us: f64,
    /// Median microseconds from MM2S completion to S2MM completion.
    pub rx_us: f64,
    /// Transfers measured.
    pub iterations: usize,
}

const MODES: [(&str, Completion); 3] = [
    ("poll", Completion::Poll),
    ("yield", Completion::Yield),
    ("irq", Completion::Irq),
];

/// The ways of moving one message: (path, buffering, partition).
fn ways(bytes: usize, block: usize) -> Vec<(&'static str, &'static str, &'static str)> {
    let mut v = vec![("zerocopy", "single", "unique")];
    for buffering in ["single", "double"] {
        v.push(("copy", buffering, "unique"));
        if bytes > block {
            v.push(("copy", buffering, "blocks"));
        }
    }
    v
}

struct Samples {
    total: Vec<f64>,
    tx: Vec<f64>,
    rx: Vec<f64>,
}

impl Samples {
    fn new(n: usize) -> Self {
        Samples {
            total: Vec::with_capacity(n),
            tx: Vec::with_capacity(n),
            rx: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, total: std::time::Duration, t: Timing) {
        self.total.push(total.as_secs_f64() * 1e6);
        self.tx.push(t.tx.as_secs_f64() * 1e6);
        self.rx.push(t.rx.as_secs_f64() * 1e6);
    }
}

fn check(what: String, n: usize, got: &[u8], data: &[u8]) -> Result<(), Error> {
    if n != data.len() || got[..n] != data[..] {
        return Err(Error::Corrupted {
            what,
            got: n as u32,
            expected: data.len() as u32,
        });
    }
    Ok(())
}

/// Runs the sweep; every transfer's data is checked.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    let largest = cfg.sizes.iter().copied().max().unwrap_or(0);
    let mut rig = super::Rig::with_model(
        (8 * largest + (1 << 20)).next_power_of_two(),
        cfg.clock,
        false,
        super::policy_for(cfg.memory),
        cfg.memory,
        Box::new(dmaflow::sim::Loopback),
    )?;
    let engine = &rig.engines[0];
    let mut rows = Vec::new();
    let mut row = |completion, (path, buffering, partition), block_bytes, bytes, s: &Samples| {
        rows.push(Row {
            completion,
            path,
            buffering,
            partition,
            block_bytes,
            bytes,
            median_us: median(&s.total),
            tx_us: median(&s.tx),
            rx_us: median(&s.rx),
            iterations: s.total.len(),
        })
    };
    for &bytes in &cfg.sizes {
        let iterations = (cfg.bytes_per_point / bytes).clamp(5, cfg.max_iterations);
        let mut tx = engine.pool().alloc::<u8>(bytes)?;
        for (i, b) in tx.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 253) as u8;
        }
        let mut rx = engine.pool().alloc::<u8>(bytes)?;
        let data = tx.as_slice().to_vec();
        let mut out = vec![0u8; bytes];
        for (name, c) in MODES {
            for way in ways(bytes, cfg.block) {
                let (path, buffering, partition) = way;
                let what = format!(
                    "loopback {} {name} {path} {buffering} {partition}",
                    bytes_label(bytes)
                );
                progress(&what);
                let depth = if buffering == "double" { 2 } else { 1 };
                let split = if partition == "blocks" {
                    Partition::Blocks(cfg.block)
                } else {
                    Partition::Unique
                };
                let mut s = Samples::new(iterations);
                for _ in 0..iterations {
                    let t0 = Instant::now();
                    if path == "zerocopy" {
                        let n = engine.two_way(&tx, bytes, &mut rx, c)?;
                        s.push(t0.elapsed(), engine.last_timing());
                        check(what.clone(), n, rx.as_slice(), &data)?;
                    } else {
                        let n = engine.send_message(&data, &mut out, split, depth, c)?;
                        s.push(t0.elapsed(), engine.last_timing());
                        check(what.clone(), n, &out, &data)?;
                    }
                }
                let block_bytes = if partition == "blocks" {
                    cfg.block
                } else {
                    bytes
                };
                row(name, way, block_bytes, bytes, &s);
            }
        }
    }
    // The kernel-style driver thread takes the engine over: standard I/O only.
    let proxy = Proxy::start(rig.engines.remove(0)).map_err(|source| Error::Io {
        path: "proxy driver thread".into(),
        source,
    })?;
    for &bytes in &cfg.sizes {
        let iterations = (cfg.bytes_per_point / bytes).clamp(5, cfg.max_iterations);
        progress(&format!("loopback {} proxy copy", bytes_label(bytes)));
        let data: Vec<u8> = (0..bytes).map(|i| (i % 253) as u8).collect();
        let mut buf = data.clone();
        let mut s = Samples::new(iterations);
        for _ in 0..iterations {
            let t0 = Instant::now();
            buf = proxy.transfer(buf, bytes)?;
            s.push(t0.elapsed(), proxy.last_timing());
            check(
                format!("loopback {bytes} B proxy copy"),
                buf.len(),
                &buf,
                &data,
            )?;
        }
        row("proxy", ("copy", "single", "unique"), bytes, bytes, &s);
    }
    Ok(rows)
}

/// The result as a table.
pub fn render(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                bytes_label(r.bytes),
                r.completion.to_string(),
                r.path.to_string(),
                r.buffering.to_string(),
                r.partition.to_string(),
                format!("{:.2}", r.median_us),
                format!("{:.2}", r.tx_us),
                format!("{:.2}", r.rx_us),
                format!("{:.4}", r.median_us / r.bytes as f64),
                format!("{:.1}", r.bytes as f64 / r.median_us),
                r.iterations.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "bytes",
            "completion",
            "path",
            "buffering",
            "partition",
            "us (median)",
            "TX us",
            "RX us",
            "us/byte",
            "MB/s each way",
            "transfers",
        ],
        &cells,
    )
}

/// The unique zero-copy (or, for `proxy`, copying) row of a mode at a size.
fn point<'a>(rows: &'a [Row], completion: &str, bytes: usize) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.completion == completion
            && r.bytes == bytes
            && r.partition == "unique"
            && (r.path == "zerocopy" || completion == "proxy")
    })
}

/// One sentence: at the smallest size what each completion mode adds to a
/// polled transfer, at the largest what copying adds to zero-copy.
pub fn answer(rows: &[Row]) -> String {
    let mut clauses = Vec::new();
    if let Some(small) = rows.iter().map(|r| r.bytes).min()
        && let Some(poll) = point(rows, "poll", small)
    {
        let extra: Vec<String> = [
            ("yield", "yield"),
            ("irq", "irq"),
            ("proxy", "the proxy driver"),
        ]
        .iter()
        .filter_map(|&(c, name)| {
            point(rows, c, small).map(|r| format!("{name} {:+.1} us", r.median_us - poll.median_us))
        })
        .collect();
        clauses.push(format!(
            "at {} a polled zero-copy two-way transfer takes {:.1} us; against it {}",
            bytes_label(small),
            poll.median_us,
            extra.join(", ")
        ));
    }
    if let Some(large) = rows.iter().map(|r| r.bytes).max()
        && let Some(zero) = point(rows, "poll", large)
        && let Some(copy) = rows.iter().find(|r| {
            r.completion == "poll"
                && r.bytes == large
                && r.path == "copy"
                && r.buffering == "single"
                && r.partition == "unique"
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

/// The result as `{"experiment":"loopback","rows":[...]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "loopback",
        "rows": rows.iter().map(|r| json!({
            "completion": r.completion,
            "path": r.path,
            "buffering": r.buffering,
            "partition": r.partition,
            "block_bytes": r.block_bytes,
            "bytes": r.bytes,
            "median_us": r.median_us,
            "tx_us": r.tx_us,
            "rx_us": r.rx_us,
            "us_per_byte": r.median_us / r.bytes as f64,
            "iterations": r.iterations,
        })).collect::<Vec<_>>(),
    })
}

/// The run as a report: table, time and time per byte against size (paper
/// 002's Figs. 4-5).
pub fn report(cfg: &Config, rows: &[Row]) -> super::report::Report {
    let label = |r: &Row| {
        if r.path == "zerocopy" || r.completion == "proxy" {
            format!("{} {}", r.completion, r.path)
        } else {
            format!("{} copy {} {}", r.completion, r.buffering, r.partition)
        }
    };
    let plot = |title: &str, y_label: &str, y: fn(&Row) -> f64| super::plot::LinePlot {
        title: title.into(),
        x_label: "transfer size, each way".into(),
        y_label: y_label.into(),
        x: super::plot::XAxis::Bytes,
        log_y: true,
        series: super::report::series_by(rows, label, |r| r.bytes as f64, y),
    };
    super::report::Report {
        experiment: "loopback",
        heading: super::on_board(
            format!(
                "loopback: two-way transfers on the emulated fabric ({}), median per transfer; \
             blocks of {}",
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
        ),
        answer: answer(rows),
        targets: Vec::new(),
        text: render(rows),
        json: json(rows),
        plots: vec![
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
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_sweep_checks_its_data_and_reports_every_point() {
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        // 8 B: zerocopy + copy single/double; 4096 B adds blocks of 1 KiB for both.
        assert_eq!(rows.len(), 3 * 3 + 3 * 5 + 2);
        for r in rows.iter().filter(|r| r.partition == "blocks") {
            assert_eq!((r.bytes, r.block_bytes), (4096, 1024));
        }
        for r in &rows {
            // TX and RX are parts of the whole call.
            assert!(r.tx_us + r.rx_us <= r.median_us * 1.5 + 1.0, "{r:?}");
        }
        assert_eq!(rows.iter().filter(|r| r.completion == "proxy").count(), 2);
        for r in &rows {
            assert!(r.median_us > 0.0 && r.median_us.is_finite(), "{r:?}");
        }
        let j = json(&rows);
        assert_eq!(j["experiment"], "loopback");
        assert_eq!(j["rows"][0]["bytes"], 8);
        assert_eq!(j["rows"][0]["buffering"], "single");
        assert_eq!(j["rows"][0]["partition"], "unique");
        assert!(render(&rows).contains("zerocopy"));
    }
}
