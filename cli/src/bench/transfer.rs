//! `dmaflow bench transfer`: a stream of packets through a ring of DMA buffers on
//! a scatter-gather engine (paper 004's tables): zero-copy with and without
//! explicit cache maintenance, and standard I/O (a copy each way), buffer sizes
//! 64 B to 32 KiB, with the fabric clocked at the Zynq HP port rate (150 MHz x 8 B
//! = 1200 MB/s) and unlimited. Every packet carries its sequence number and is
//! checked on the way back.

use std::time::Instant;

use serde_json::json;

use super::report::{Target, sentence};
use super::{Error, Rig, bytes_label, median, table};
use dmaflow::dma::{Completion, PacketRing};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::MemoryModel;
use dmaflow::sim::{Clock, Loopback};

/// The Zynq HP port: 150 MHz x 8 bytes.
pub const HP_PORT: Clock = Clock::Rate {
    mhz: 150.0,
    bytes_per_cycle: 8.0,
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Buffer (packet) sizes in bytes.
    pub sizes: Vec<usize>,
    /// Packets per run at most.
    pub max_packets: usize,
    /// Bytes per run at most (bounds the packets of large sizes).
    pub bytes_per_run: usize,
    /// Runs per point (the median is reported).
    pub runs: usize,
    /// Buffers in the ring per direction.
    pub slots: usize,
    /// Descriptors handed to the engine per TAILDESC write.
    pub batch: usize,
}

impl Config {
    /// The full sweep.
    pub fn full() -> Self {
        Config {
            sizes: (6..=15).map(|s| 1usize << s).collect(),
            max_packets: 400_000,
            bytes_per_run: 128 << 20,
            runs: 5,
            slots: 256,
            batch: 16,
        }
    }

    /// A shorter sweep.
    pub fn quick() -> Self {
        Config {
            max_packets: 100_000,
            bytes_per_run: 24 << 20,
            runs: 3,
            ..Self::full()
        }
    }

    /// A tiny sweep for tests.
    pub fn tiny() -> Self {
        Config {
            sizes: vec![64, 4096],
            max_packets: 2_000,
            bytes_per_run: 1 << 20,
            runs: 1,
            slots: 16,
            batch: 4,
        }
    }
}

/// One point.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `1200MB/s` or `unlimited`.
    pub clock: &'static str,
    /// `zerocopy` or `copy`.
    pub path: &'static str,
    /// Whether buffers were flushed/invalidated around each transfer.
    pub cache_maintenance: bool,
    /// Packet size in bytes.
    pub bytes: usize,
    /// Packets per run.
    pub packets: usize,
    /// Median seconds per run.
    pub seconds: f64,
    /// 10^6 bytes per second (one direction), from the median run.
    pub mbytes_per_s: f64,
    /// Packets per second, from the median run.
    pub packets_per_s: f64,
}

fn fill(seq: u64, p: &mut [u8]) {
    let n = p.len().min(8);
    p[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    p[n..].fill(seq as u8 ^ 0x5A);
}

fn intact(seq: u64, len: usize, p: &[u8]) -> bool {
    let n = len.min(8);
    p.len() == len
        && p[..n] == seq.to_le_bytes()[..n]
        // An OR of differences, without early exit, so that it vectorises.
        && p[n..].iter().fold(0u8, |acc, &b| acc | (b ^ (seq as u8 ^ 0x5A))) == 0
}

/// Streams `packets` packets of `bytes` through `ring`; returns the seconds taken.
fn stream(
    ring: &mut PacketRing<'_, dmaflow::platform::sim::SimRegisters, dmaflow::platform::sim::SimIrq>,
    bytes: usize,
    packets: usize,
    copy: bool,
    what: &str,
) -> Result<f64, Error> {
    let slots = ring.slots() as u64;
    let mut src = vec![0u8; bytes];
    let mut dst = vec![0u8; bytes];
    let (mut sent, mut received) = (0u64, 0u64);
    let total = packets as u64;
    let bad = |seq: u64| Error::Corrupted {
        what: format!("{what}: packet {seq}"),
        got: 0,
        expected: seq as u32,
    };
    let t0 = Instant::now();
    while received < total {
        while sent < total && sent - received < slots {
            if copy {
                fill(sent, &mut src);
                ring.send(&src)?;
            } else {
                ring.send_with(bytes, |p| fill(sent, p))?;
            }
            sent += 1;
        }
        let mut first = true;
        loop {
            let seq = received;
            let ok = if copy {
                let got = if first {
                    Some(ring.recv(&mut dst)?)
                } else {
                    ring.try_recv_with(|p| {
                        dst[..p.len()].copy_from_slice(p);
                        p.len()
                    })?
                };
                got.map(|n| intact(seq, bytes, &dst[..n]))
            } else if first {
                Some(ring.recv_with(|p| intact(seq, bytes, p))?)
            } else {
                ring.try_recv_with(|p| intact(seq, bytes, p))?
            };
            match ok {
                Some(true) => received += 1,
                Some(false) => return Err(bad(seq)),
                None => break,
            }
            first = false;
            if received == total {
                break;
            }
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs the sweep.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    let largest = cfg.sizes.iter().copied().max().unwrap_or(64);
    let ddr = (2 * cfg.slots * largest + (1 << 20)).next_power_of_two();
    let mut rows = Vec::new();
    for (clock_name, clock) in [("1200MB/s", HP_PORT), ("unlimited", Clock::Unlimited)] {
        for cache_maintenance in [false, true] {
            // Paper 004's two conditions: a coherent port with no maintenance, and
            // a non-coherent one with explicit cache control.
            let (policy, model) = if cache_maintenance {
                (CachePolicy::Explicit, MemoryModel::NonCoherent)
            } else {
                (CachePolicy::Coherent, MemoryModel::Coherent)
            };
            let rig = Rig::with_model(ddr, clock, true, policy, model, Box::new(Loopback))?;
            let engine = &rig.engines[0];
            for &bytes in &cfg.sizes {
                let packets = (cfg.bytes_per_run / bytes).clamp(cfg.slots, cfg.max_packets);
                for (path, copy) in [("zerocopy", false), ("copy", true)] {
                    let what = format!(
                        "transfer {clock_name} {path} cache={cache_maintenance} {}",
                        bytes_label(bytes)
                    );
                    progress(&what);
                    let mut ring =
                        PacketRing::new(engine, cfg.slots, bytes, cfg.batch, Completion::Poll)?;
                    // One short run first so the caches and the device thread are warm.
                    stream(&mut ring, bytes, cfg.slots, copy, &what)?;
                    let mut times = Vec::with_capacity(cfg.runs);
                    for _ in 0..cfg.runs.max(1) {
                        times.push(stream(&mut ring, bytes, packets, copy, &what)?);
                    }
                    let seconds = median(&times);
                    rows.push(Row {
                        clock: clock_name,
                        path,
                        cache_maintenance,
                        bytes,
                        packets,
                        seconds,
                        mbytes_per_s: (packets * bytes) as f64 / seconds / 1e6,
                        packets_per_s: packets as f64 / seconds,
                    });
                }
            }
        }
    }
    Ok(rows)
}

/// The result as a table.
pub fn render(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.clock.to_string(),
                r.path.to_string(),
                if r.cache_maintenance { "yes" } else { "no" }.to_string(),
                bytes_label(r.bytes),
                format!("{:.0}", r.mbytes_per_s),
                format!("{:.0}k", r.packets_per_s / 1e3),
            ]
        })
        .collect();
    table(
        &["clock", "path", "cache maint.", "size", "MB/s", "packets/s"],
        &cells,
    )
}

/// The zero-copy rows without cache maintenance at `clock`.
fn zero_copy<'a>(rows: &'a [Row], clock: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
    rows.iter()
        .filter(move |r| r.clock == clock && r.path == "zerocopy" && !r.cache_maintenance)
}

/// The worst zero-copy row from 2 KiB up at the 1200 MB/s clock.
fn worst_large(rows: &[Row]) -> Option<&Row> {
    zero_copy(rows, "1200MB/s")
        .filter(|r| r.bytes >= 2048)
        .min_by(|a, b| a.mbytes_per_s.total_cmp(&b.mbytes_per_s))
}

/// The targets: a steady zero-copy stream keeps up with the modelled HP-port
/// link from 2 KiB up, and software handles 64 B packets fast enough when the
/// link is unlimited.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    if let Some(w) = worst_large(rows) {
        out.push(Target::new(
            "zero-copy stream from 2 KiB up >= 95 % of the modelled 1200 MB/s link",
            format!(
                "at least {:.0} MB/s = {:.1} % (worst at {})",
                w.mbytes_per_s,
                w.mbytes_per_s / 12.0,
                bytes_label(w.bytes)
            ),
            w.mbytes_per_s >= 0.95 * 1200.0,
        ));
    }
    if let Some(small) = zero_copy(rows, "unlimited").find(|r| r.bytes == 64) {
        out.push(Target::new(
            "64 B packets with the unlimited clock >= 3 M/s",
            format!("{:.2} M/s", small.packets_per_s / 1e6),
            small.packets_per_s >= 3e6,
        ));
    }
    out
}

/// One sentence: what the stream reaches against the modelled link, and how
/// many small packets software keeps up with.
pub fn answer(rows: &[Row]) -> String {
    let mut parts = Vec::new();
    if let Some(w) = worst_large(rows) {
        parts.push(format!(
            "from 2 KiB up a zero-copy packet stream keeps at least {:.1} % of the modelled \
             1200 MB/s link ({:.0} MB/s)",
            w.mbytes_per_s / 12.0,
            w.mbytes_per_s
        ));
    }
    if let Some(small) = zero_copy(rows, "unlimited").find(|r| r.bytes == 64) {
        let maint = rows.iter().find(|r| {
            r.clock == "unlimited" && r.path == "zerocopy" && r.cache_maintenance && r.bytes == 64
        });
        parts.push(format!(
            "with no link limit software moves {:.2} M packets/s of 64 B{}",
            small.packets_per_s / 1e6,
            maint.map_or(String::new(), |m| format!(
                " ({:.2} M/s with the cache maintenance a non-coherent board needs)",
                m.packets_per_s / 1e6
            ))
        ));
    }
    sentence(&parts)
}

/// The result as `{"experiment":"transfer","rows":[...]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "transfer",
        "rows": rows.iter().map(|r| json!({
            "clock": r.clock,
            "path": r.path,
            "cache_maintenance": r.cache_maintenance,
            "bytes": r.bytes,
            "packets": r.packets,
            "seconds": r.seconds,
            "mbytes_per_s": r.mbytes_per_s,
            "packets_per_s": r.packets_per_s,
        })).collect::<Vec<_>>(),
    })
}

/// The run as a report: table, targets, MB/s against buffer size for each clock.
pub fn report(cfg: &Config, rows: &[Row]) -> super::report::Report {
    let plot = |clock: &str| super::plot::LinePlot {
        title: format!("Packet stream through a DMA buffer ring, clock {clock}"),
        x_label: "packet size".into(),
        y_label: "throughput (MB/s)".into(),
        x: super::plot::XAxis::Bytes,
        log_y: true,
        series: super::report::series_by(
            &rows
                .iter()
                .filter(|r| r.clock == clock)
                .cloned()
                .collect::<Vec<_>>(),
            |r| {
                format!(
                    "{} {}",
                    r.path,
                    if r.cache_maintenance {
                        "+ cache maintenance"
                    } else {
                        "coherent"
                    }
                )
            },
            |r| r.bytes as f64,
            |r| r.mbytes_per_s,
        ),
    };
    super::report::Report {
        experiment: "transfer",
        heading: format!(
            "transfer: packets through a ring of {} DMA buffers each way (scatter-gather, polling, \
             {} descriptors per TAILDESC write), median of {} runs",
            cfg.slots, cfg.batch, cfg.runs
        ),
        answer: answer(rows),
        targets: targets(rows),
        text: render(rows) + &Target::lines(&targets(rows)),
        json: json(rows),
        plots: vec![plot("1200MB/s"), plot("unlimited")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_sweep_is_consistent_and_bounded_by_the_clock() {
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 2 * 2 * 2);
        for r in &rows {
            let mb = (r.packets * r.bytes) as f64 / r.seconds / 1e6;
            assert!((mb - r.mbytes_per_s).abs() < 1e-6 * mb, "{r:?}");
            assert!(
                (r.packets as f64 / r.seconds - r.packets_per_s).abs() < 1e-6 * r.packets_per_s
            );
            if r.clock == "1200MB/s" {
                // The link cannot go faster than its clock (a little slack for
                // the packets already in flight when timing starts).
                assert!(r.mbytes_per_s < 1200.0 * 1.05, "{r:?}");
            }
        }
        let j = json(&rows);
        assert_eq!(j["experiment"], "transfer");
        assert_eq!(j["rows"][0]["clock"], "1200MB/s");
        assert!(render(&rows).contains("zerocopy"));
        let t = targets(&rows);
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(t[1].what.contains("64 B"));
        assert!(answer(&rows).contains("M packets/s"));
    }

    #[test]
    fn corrupted_packets_are_caught() {
        assert!(intact(7, 64, &{
            let mut p = vec![0u8; 64];
            fill(7, &mut p);
            p
        }));
        let mut p = vec![0u8; 64];
        fill(7, &mut p);
        p[40] ^= 1;
        assert!(!intact(7, 64, &p));
        assert!(!intact(8, 64, &p));
    }
}
