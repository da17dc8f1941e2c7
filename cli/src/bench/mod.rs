//! The experiments behind `dmaflow bench`: each measures dmaflow and its comparison
//! point in the same run and reports medians.

pub mod app;
pub mod baseline;
pub mod bgsub;
pub mod cnn;
pub mod conditions;
pub mod contention;
pub mod faults;
pub mod fir;
pub mod gpu;
pub mod loopback;
pub mod memory;
pub mod meter;
pub mod net;
pub mod on_board;
pub mod pipeline;
pub mod plot;
pub mod readers;
pub mod report;
pub mod ring;
pub mod sched;
pub mod spread;
pub mod transfer;
pub mod twoway;

use std::fmt::Write as _;

use dmaflow::platform::MemoryModel;

/// What went wrong while running an experiment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue under test failed.
    #[error("queue under test failed: {0}")]
    Ring(#[from] dmaflow::ring::Error),
    /// A process network under test failed.
    #[error("graph under test failed: {0}")]
    Graph(#[from] dmaflow::graph::Error),
    /// A plot could not be written.
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
    /// A report file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A peer implementation failed.
    #[error("{peer} failed: {reason}")]
    Peer {
        /// Name of the implementation.
        peer: &'static str,
        /// What it reported.
        reason: String,
    },
    /// The data that came out was not the data that went in.
    #[error("{what}: checksum {got:#010x}, expected {expected:#010x}")]
    Corrupted {
        /// Which measurement.
        what: String,
        /// Checksum of the data received.
        got: u32,
        /// Checksum of the data sent.
        expected: u32,
    },
    /// The emulated board could not be set up.
    #[error("emulated board: {0}")]
    Platform(#[from] dmaflow::platform::Error),
    /// DMA memory ran out or failed.
    #[error(transparent)]
    Mem(#[from] dmaflow::mem::Error),
    /// The DMA engine failed.
    #[error(transparent)]
    Axi(#[from] dmaflow::axi::Error),
    /// A transfer failed.
    #[error(transparent)]
    Dma(#[from] dmaflow::dma::Error),
    /// An emulated board could not be set up or driven.
    #[error(transparent)]
    Rig(#[from] dmaflow::rig::Error),
    /// A GPU failed or refused what was asked.
    #[error("GPU: {0}")]
    Gpu(#[from] dmaflow::gpu::Error),
    /// A worker thread panicked.
    #[error("worker thread of {0} panicked")]
    Panicked(&'static str),
    /// A real board (`--board ROOT`) lacks what the experiment needs.
    #[error("board under {root}: not ready for this experiment:\n  {}", advice.join("\n  "))]
    Board {
        /// Where the board was looked for.
        root: String,
        /// What is missing, each with what to add (`dmaflow info`'s advice).
        advice: Vec<String>,
    },
    /// The experiment runs on the emulated fabric only.
    #[error(
        "`bench {0}` needs the emulated fabric ({1}): it has no --board form (transfer, twoway and loopback have)"
    )]
    EmulatorOnly(&'static str, &'static str),
}

pub use dmaflow::rig::{Rig, SimEngine, policy_for};

/// Where the DMA experiments put their threads on this machine, for a report's
/// header (see [`dmaflow::rig::Rig::dedicate_core`]).
pub fn placement_here() -> String {
    match dmaflow::platform::cpu::allowed_cores(None) {
        Ok(cores) => match cores.split_last() {
            Some((d, host)) if !host.is_empty() => format!(
                "DMA experiments run the emulated device thread on core {d} and the driver and \
                 application threads on core(s) {}",
                host.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            _ => "one core: the emulated device thread takes turns with the driver".into(),
        },
        Err(e) => format!("cores unknown ({e})"),
    }
}

/// Says in a report's heading which board memory it ran on, when not coherent.
pub fn on_board(heading: String, model: MemoryModel) -> String {
    match model {
        MemoryModel::Coherent => heading,
        MemoryModel::NonCoherent => {
            format!("{heading} [non-coherent board, explicit cache maintenance]")
        }
    }
}

/// Median of a non-empty set of samples (mean of the middle two for even counts);
/// `NaN` for an empty set.
pub fn median(samples: &[f64]) -> f64 {
    spread::Spread::of(samples).median
}

/// Renders rows as a text table with right-aligned columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, &mut headers.iter().copied());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let _ = writeln!(out, "{}", rule.join("  "));
    for row in rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

/// A duration in whole milliseconds: `150 ms`.
pub fn ms_label(d: std::time::Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// Human-readable byte count: `64 B`, `4 KiB`, `6 MiB`.
pub fn bytes_label(b: usize) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
    } else {
        format!("{b} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(&["a", "bbb"], &[vec!["xx".into(), "y".into()]]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], " a  bbb");
        assert_eq!(lines[1], "--  ---");
        assert_eq!(lines[2], "xx    y");
    }

    #[test]
    fn byte_labels() {
        assert_eq!(bytes_label(64), "64 B");
        assert_eq!(bytes_label(4096), "4 KiB");
        assert_eq!(bytes_label(6 << 20), "6 MiB");
        assert_eq!(bytes_label(1000), "1000 B");
    }
}

#[cfg(test)]
mod on_boards {
    use super::*;

    /// The DMA experiments on the non-coherent board, with explicit cache
    /// maintenance: every transfer's data is checked by the run (a missing cache
    /// operation fails it with stale data), and no row says otherwise.
    #[test]
    fn dma_experiments_run_on_the_non_coherent_board_with_their_data_checked() {
        macro_rules! on_noncoherent {
            ($m:ident) => {{
                let cfg = $m::Config {
                    memory: MemoryModel::NonCoherent,
                    ..$m::Config::tiny()
                };
                let rows = $m::run(&cfg, |_| {}).unwrap();
                let json = $m::report(&cfg, &rows).json;
                let rows = json["rows"].as_array().cloned().unwrap_or_default();
                assert!(!rows.is_empty(), stringify!($m));
                for r in rows {
                    assert_ne!(
                        r.get("verified"),
                        Some(&serde_json::Value::Bool(false)),
                        "{r}"
                    );
                }
            }};
        }
        on_noncoherent!(loopback);
        on_noncoherent!(twoway);
        on_noncoherent!(bgsub);
        on_noncoherent!(cnn);
    }
}
