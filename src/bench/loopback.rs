//! `dmaflow bench loopback`: two-way loopback transfers on the emulated fabric
//! (paper 002's Figs. 4-5), 8 B to 6 MB, for each completion mode and data path.
//! With the clock unlimited, the time is the software's own overhead.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::{Error, bytes_label, median, table};
use crate::axi::{AxiDma, Config as AxiConfig};
use crate::dma::{Completion, Engine, Proxy};
use crate::mem::{CachePolicy, DmaPool};
use crate::platform::sim::{DEFAULT_DDR_BASE, SimBoard};
use crate::sim::{Clock, Fabric};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Transfer sizes in bytes.
    pub sizes: Vec<usize>,
    /// Transfers per point at most (fewer for large sizes).
    pub max_iterations: usize,
    /// Bytes moved per point at most, which bounds the iterations of large sizes.
    pub bytes_per_point: usize,
    /// The fabric's stream rate.
    pub clock: Clock,
}

impl Config {
    /// The full sweep.
    pub fn full() -> Self {
        Config {
            sizes: vec![8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 6_000_000],
            max_iterations: 20_000,
            bytes_per_point: 256 << 20,
            clock: Clock::Unlimited,
        }
    }

    /// A shorter sweep.
    pub fn quick() -> Self {
        Config {
            max_iterations: 2_000,
            bytes_per_point: 32 << 20,
            ..Self::full()
        }
    }

    /// A tiny sweep for tests.
    pub fn tiny() -> Self {
        Config {
            sizes: vec![8, 4096],
            max_iterations: 50,
            bytes_per_point: 1 << 20,
            clock: Clock::Unlimited,
        }
    }
}

/// One point: the median time of a two-way transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `poll`, `yield`, `irq` or `proxy`.
    pub completion: &'static str,
    /// `zerocopy` or `copy`.
    pub path: &'static str,
    /// Bytes each way.
    pub bytes: usize,
    /// Median microseconds per two-way transfer.
    pub median_us: f64,
    /// Transfers measured.
    pub iterations: usize,
}

const MODES: [(&str, Completion); 3] = [
    ("poll", Completion::Poll),
    ("yield", Completion::Yield),
    ("irq", Completion::Irq),
];

/// Runs the sweep; every transfer's data is checked.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    let largest = cfg.sizes.iter().copied().max().unwrap_or(0);
    let board = SimBoard::new(
        1,
        (4 * largest + (1 << 20)).next_power_of_two(),
        DEFAULT_DDR_BASE,
        2,
    )
    .map_err(crate::Error::from)
    .map_err(fail)?;
    let _fabric = Fabric::start(&board, cfg.clock)
        .map_err(crate::Error::from)
        .map_err(fail)?;
    let dma = AxiDma::new(
        board
            .registers(0)
            .map_err(crate::Error::from)
            .map_err(fail)?,
        AxiConfig::default(),
    )
    .map_err(crate::Error::from)
    .map_err(fail)?;
    let pool = DmaPool::new(
        Arc::new(board.memory().map_err(crate::Error::from).map_err(fail)?),
        CachePolicy::Coherent,
    );
    let irq = |i| board.irq(i).map_err(crate::Error::from).map_err(fail);
    let engine = Engine::new(dma, irq(0)?, irq(1)?, pool);
    let mut rows = Vec::new();
    for &bytes in &cfg.sizes {
        let iterations = (cfg.bytes_per_point / bytes).clamp(5, cfg.max_iterations);
        let mut tx = engine
            .pool()
            .alloc::<u8>(bytes)
            .map_err(crate::Error::from)
            .map_err(fail)?;
        for (i, b) in tx.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 253) as u8;
        }
        let mut rx = engine
            .pool()
            .alloc::<u8>(bytes)
            .map_err(crate::Error::from)
            .map_err(fail)?;
        let data = tx.as_slice().to_vec();
        let mut out = vec![0u8; bytes];
        for (name, c) in MODES {
            for path in ["zerocopy", "copy"] {
                progress(&format!("loopback {} {name} {path}", bytes_label(bytes)));
                let mut samples = Vec::with_capacity(iterations);
                for _ in 0..iterations {
                    let t0 = Instant::now();
                    let n = if path == "zerocopy" {
                        engine.two_way(&tx, bytes, &mut rx, c)
                    } else {
                        engine.write_read(&data, &mut out, c)
                    }
                    .map_err(crate::Error::from)
                    .map_err(fail)?;
                    samples.push(t0.elapsed().as_secs_f64() * 1e6);
                    let got = if path == "zerocopy" {
                        rx.as_slice()
                    } else {
                        &out[..]
                    };
                    if n != bytes || got[..n] != data[..] {
                        return Err(Error::Corrupted {
                            what: format!("loopback {bytes} B {name} {path}"),
                            got: n as u32,
                            expected: bytes as u32,
                        });
                    }
                }
                rows.push(Row {
                    completion: name,
                    path,
                    bytes,
                    median_us: median(&samples),
                    iterations,
                });
            }
        }
    }
    // The kernel-style driver thread takes the engine over: standard I/O only.
    let proxy = Proxy::start(engine).map_err(|e| {
        fail(crate::Error::Platform(crate::platform::Error::Io {
            path: "proxy driver thread".into(),
            source: e,
        }))
    })?;
    for &bytes in &cfg.sizes {
        let iterations = (cfg.bytes_per_point / bytes).clamp(5, cfg.max_iterations);
        progress(&format!("loopback {} proxy copy", bytes_label(bytes)));
        let data: Vec<u8> = (0..bytes).map(|i| (i % 253) as u8).collect();
        let mut buf = data.clone();
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t0 = Instant::now();
            buf = proxy
                .transfer(buf, bytes)
                .map_err(crate::Error::from)
                .map_err(fail)?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
            if buf != data {
                return Err(Error::Corrupted {
                    what: format!("loopback {bytes} B proxy copy"),
                    got: buf.len() as u32,
                    expected: bytes as u32,
                });
            }
        }
        rows.push(Row {
            completion: "proxy",
            path: "copy",
            bytes,
            median_us: median(&samples),
            iterations,
        });
    }
    Ok(rows)
}

fn fail(e: crate::Error) -> Error {
    Error::Peer {
        peer: "fabric",
        reason: e.to_string(),
    }
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
                format!("{:.2}", r.median_us),
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
            "us (median)",
            "MB/s each way",
            "transfers",
        ],
        &cells,
    )
}

/// The result as `{"experiment":"loopback","rows":[...]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "loopback",
        "rows": rows.iter().map(|r| json!({
            "completion": r.completion,
            "path": r.path,
            "bytes": r.bytes,
            "median_us": r.median_us,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_sweep_checks_its_data_and_reports_every_point() {
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * 3 * 2 + 2);
        assert_eq!(rows.iter().filter(|r| r.completion == "proxy").count(), 2);
        for r in &rows {
            assert!(r.median_us > 0.0 && r.median_us.is_finite(), "{r:?}");
        }
        let j = json(&rows);
        assert_eq!(j["experiment"], "loopback");
        assert_eq!(j["rows"][0]["bytes"], 8);
        assert!(render(&rows).contains("zerocopy"));
    }
}
