//! `dmaflow bench pipeline`: an accelerator inside a process network.
//! source -> FIR coprocessor -> sink through the emulated fabric, two ways:
//! - `zerocopy`: the queues live in DMA memory and the accelerator node
//!   ([`dmaflow::accel::stage`]) hands windows to MM2S and output slots to S2MM
//!   in place, several windows in flight;
//! - `copy`: the pipeline a user builds without it: the node copies each window
//!   from an ordinary queue into a `DmaBuf`, runs one two-way transfer, and
//!   copies the answer back into the output queue.
//!
//! Both at the board's HP-port clock and unlimited, interleaved run by run;
//! delivered MB/s (filtered samples out), host CPU per MB of every pipeline
//! thread (source, node, sink; never the emulated device's), and the bytes the
//! CPU copied per byte delivered. Both pipelines' outputs must agree exactly.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::report::{Target, sentence};
use super::{Error, Rig, SimEngine, bytes_label, table};
use dmaflow::accel::fir::load_taps;
use dmaflow::accel::stage::{self, StageConfig};
use dmaflow::dma::Completion;
use dmaflow::graph::{Graph, Input, Output};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::cpu::thread_cpu_time;
use dmaflow::sim::{Clock, FirCore, Profile};

/// Filter taps of the FIR core.
pub const TAPS: usize = 8;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Output bytes per window (the hop, in f32 samples x 4).
    pub windows: Vec<usize>,
    /// Input samples per run.
    pub samples: usize,
    /// Runs per point (each pipeline, interleaved).
    pub runs: usize,
    /// The board whose port clocks the link.
    pub profile: Profile,
}

impl Config {
    /// The full run.
    pub fn full() -> Self {
        Config {
            windows: vec![4 << 10, 16 << 10, 64 << 10],
            samples: 4 << 20,
            runs: 5,
            profile: Profile::ZYNQ7000,
        }
    }

    /// A shorter run.
    pub fn quick() -> Self {
        Config {
            samples: 1 << 20,
            runs: 3,
            ..Self::full()
        }
    }

    /// A tiny run for tests.
    pub fn tiny() -> Self {
        Config {
            windows: vec![4 << 10],
            samples: 50_000,
            runs: 1,
            ..Self::full()
        }
    }
}

/// One point: medians over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `zerocopy` or `copy`.
    pub pipeline: &'static str,
    /// The port's rate (e.g. "1200MB/s") or "unlimited".
    pub clock: String,
    /// Output bytes per window.
    pub window_bytes: usize,
    /// Delivered output, 10^6 B/s.
    pub mb_per_s: f64,
    /// Host CPU of the pipeline's threads per MB delivered, in microseconds.
    pub cpu_us_per_mb: f64,
    /// Bytes the CPU copied per byte delivered.
    pub copied_per_byte: f64,
    /// What the modelled link allows (MM2S carries each window's overlap
    /// too), 10^6 B/s delivered; `None` when unlimited.
    pub model_mb_per_s: Option<f64>,
    /// Runs measured.
    pub runs: usize,
}

impl Row {
    /// Delivered over what the modelled link allows.
    pub fn link_share(&self) -> Option<f64> {
        self.model_mb_per_s.map(|m| self.mb_per_s / m)
    }
}

/// What one run gave.
struct Run {
    wall: Duration,
    cpu: Duration,
    out_bytes: u64,
    copied: u64,
    /// The output's bits, summed (both pipelines must agree).
    digest: u64,
}

fn taps() -> Vec<f32> {
    (0..TAPS)
        .map(|k| ((k as f32) * 0.37).cos() / TAPS as f32)
        .collect()
}

/// A node body that adds its thread's CPU time to `cpu` when it ends.
fn timed(
    cpu: &Arc<AtomicU64>,
    body: impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    let cpu = cpu.clone();
    move || {
        let t0 = thread_cpu_time();
        let r = body();
        cpu.fetch_add(
            (thread_cpu_time() - t0).as_nanos() as u64,
            Ordering::Relaxed,
        );
        r
    }
}

/// The source: `TAPS - 1` zeros (the filter's initial state), then `samples`
/// samples computed in place in the queue's slots.
fn source(
    mut out: Output<f32>,
    samples: usize,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        out.write(&[0.0; TAPS - 1])?;
        let chunk = 16 << 10;
        let mut at = 0usize;
        while at < samples {
            let n = chunk.min(samples - at);
            let s = out.reserve(n)?;
            for (i, x) in s.iter_mut().enumerate() {
                *x = ((at + i) % 977) as f32 / 977.0 - 0.5;
            }
            out.commit(n)?;
            at += n;
        }
        Ok(())
    }
}

/// The sink: reads everything, digests the bits.
fn sink(
    mut input: Input<f32>,
    digest: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        let (mut d, mut n) = (0u64, 0u64);
        loop {
            let s = input.peek(1)?;
            if s.is_empty() {
                break;
            }
            for x in s {
                d = d.wrapping_mul(31).wrapping_add(u64::from(x.to_bits()));
            }
            n += 4 * s.len() as u64;
            let k = s.len();
            input.consume(k)?;
        }
        digest.store(d, Ordering::Relaxed);
        bytes.store(n, Ordering::Relaxed);
        Ok(())
    }
}

/// The copying node: window -> DmaBuf -> two-way transfer -> output queue.
fn copying_node(
    engine: SimEngine,
    hop: usize,
    mut input: Input<f32>,
    mut output: Output<f32>,
    copied: Arc<AtomicU64>,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        let window = hop + TAPS - 1;
        let mut tx = engine.pool().alloc::<u8>(4 * window)?;
        let mut rx = engine.pool().alloc::<u8>(4 * hop)?;
        let mut moved = 0u64;
        loop {
            let w = input.peek(window)?;
            let last = w.len() < window;
            let n = w.len().min(window);
            if n < TAPS {
                break;
            }
            tx.as_mut_slice()[..4 * n].copy_from_slice(bytemuck::cast_slice(&w[..n]));
            moved += 4 * n as u64;
            input.consume(if last { n } else { hop })?;
            let got = engine.two_way_into(&tx, 4 * n, &mut rx, 4 * hop, Completion::Poll)?;
            let out = output.reserve(got / 4)?;
            bytemuck::cast_slice_mut::<f32, u8>(out).copy_from_slice(&rx.as_slice()[..got]);
            output.commit(got / 4)?;
            moved += got as u64;
            if last {
                break;
            }
        }
        copied.store(moved, Ordering::Relaxed);
        Ok(())
    }
}

/// One run of one pipeline.
fn run_once(clock: Clock, hop: usize, samples: usize, zero_copy: bool) -> Result<Run, Error> {
    let taps = taps();
    let mut rig = Rig::new(
        64 << 20,
        clock,
        zero_copy,
        CachePolicy::Coherent,
        Box::new(FirCore::new()),
    )?;
    load_taps(&rig.control()?, &taps).map_err(|e| Error::Peer {
        peer: "FIR coprocessor",
        reason: e.to_string(),
    })?;
    let placed = rig.dedicate_core()?;
    let cpu = Arc::new(AtomicU64::new(0));
    let copied = Arc::new(AtomicU64::new(0));
    let digest = Arc::new(AtomicU64::new(0));
    let out_bytes = Arc::new(AtomicU64::new(0));
    let window = hop + TAPS - 1;
    let queue = 4 * window + (64 << 10);
    let mut g = Graph::new();
    let (s, a, b, k) = if zero_copy {
        // Both queues in the board's DMA memory, for the accelerator node.
        let memory = rig.engines[0]
            .pool()
            .queue_memory()
            .map_err(dmaflow::rig::Error::from)?;
        let (s, a) =
            g.connect_in::<f32>(("source", "out"), ("fir", "in"), queue, memory.clone())?;
        let (b, k) = g.connect_in::<f32>(("fir", "out"), ("sink", "in"), queue, memory)?;
        (s, a, b, k)
    } else {
        let (s, a) = g.connect_with_capacity::<f32>(("source", "out"), ("fir", "in"), queue)?;
        let (b, k) = g.connect_with_capacity::<f32>(("fir", "out"), ("sink", "in"), queue)?;
        (s, a, b, k)
    };
    g.node("source", timed(&cpu, source(s, samples)))?;
    let engine = rig.engines.remove(0);
    if zero_copy {
        let cfg = StageConfig {
            window,
            hop,
            out_max: hop,
            min_window: TAPS,
            depth: 4,
            completion: Completion::Poll,
        };
        let moved = copied.clone();
        g.node(
            "fir",
            timed(&cpu, move || {
                let (mut a, mut b) = (a, b);
                let s = stage::run(&engine, &cfg, &mut a, &mut b)?;
                moved.store(s.bytes_copied, Ordering::Relaxed);
                Ok(())
            }),
        )?;
    } else {
        g.node(
            "fir",
            timed(&cpu, copying_node(engine, hop, a, b, copied.clone())),
        )?;
    }
    g.node(
        "sink",
        timed(&cpu, sink(k, digest.clone(), out_bytes.clone())),
    )?;
    let t0 = Instant::now();
    g.run()?;
    let wall = t0.elapsed();
    drop(placed);
    drop(rig);
    Ok(Run {
        wall,
        cpu: Duration::from_nanos(cpu.load(Ordering::Relaxed)),
        out_bytes: out_bytes.load(Ordering::Relaxed),
        copied: copied.load(Ordering::Relaxed),
        digest: digest.load(Ordering::Relaxed),
    })
}

/// Runs every point, the two pipelines interleaved run by run; the outputs of
/// every run must agree.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for clock in [cfg.profile.port, Clock::Unlimited] {
        let clock_name = match clock.bytes_per_s() {
            Some(b) => format!("{:.0}MB/s", b / 1e6),
            None => "unlimited".into(),
        };
        for &window_bytes in &cfg.windows {
            let hop = window_bytes / 4;
            let mut runs: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
            for r in 0..cfg.runs {
                for k in 0..2 {
                    // Alternate which goes first.
                    let zero_copy = (k + r) % 2 == 0;
                    progress(&format!(
                        "pipeline {clock_name} {} {} run {}",
                        bytes_label(window_bytes),
                        if zero_copy { "zerocopy" } else { "copy" },
                        r + 1
                    ));
                    let run = run_once(clock, hop, cfg.samples, zero_copy)?;
                    runs[usize::from(!zero_copy)].push(run);
                }
            }
            let reference = runs[0][0].digest;
            let want_bytes = 4 * cfg.samples as u64;
            for run in runs.iter().flatten() {
                if run.digest != reference || run.out_bytes != want_bytes {
                    return Err(Error::Corrupted {
                        what: format!("pipeline {clock_name} {}", bytes_label(window_bytes)),
                        got: run.digest as u32,
                        expected: reference as u32,
                    });
                }
            }
            for (i, name) in ["zerocopy", "copy"].into_iter().enumerate() {
                let rs = &runs[i];
                let mb: Vec<f64> = rs
                    .iter()
                    .map(|r| r.out_bytes as f64 / r.wall.as_secs_f64() / 1e6)
                    .collect();
                let cpu: Vec<f64> = rs
                    .iter()
                    .map(|r| r.cpu.as_secs_f64() * 1e6 / (r.out_bytes as f64 / 1e6))
                    .collect();
                let copied: Vec<f64> = rs
                    .iter()
                    .map(|r| r.copied as f64 / r.out_bytes as f64)
                    .collect();
                rows.push(Row {
                    pipeline: name,
                    clock: clock_name.clone(),
                    window_bytes,
                    mb_per_s: super::median(&mb),
                    cpu_us_per_mb: super::median(&cpu),
                    copied_per_byte: super::median(&copied),
                    model_mb_per_s: clock
                        .bytes_per_s()
                        .map(|b| b / 1e6 * hop as f64 / (hop + TAPS - 1) as f64),
                    runs: rs.len(),
                });
            }
        }
    }
    Ok(rows)
}

/// The table.
pub fn render(rows: &[Row]) -> String {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.clock.clone(),
                bytes_label(r.window_bytes),
                r.pipeline.to_string(),
                format!("{:.0}", r.mb_per_s),
                r.model_mb_per_s.map_or("-".into(), |m| format!("{m:.0}")),
                r.link_share()
                    .map_or("-".into(), |s| format!("{:.1} %", 100.0 * s)),
                format!("{:.0}", r.cpu_us_per_mb),
                format!("{:.2}", r.copied_per_byte),
            ]
        })
        .collect();
    table(
        &[
            "clock",
            "window",
            "pipeline",
            "MB/s",
            "model MB/s",
            "link share",
            "CPU us/MB",
            "copied B/B",
        ],
        &body,
    )
}

fn find<'a>(rows: &'a [Row], pipeline: &str, unlimited: bool, window: usize) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.pipeline == pipeline && (r.clock == "unlimited") == unlimited && r.window_bytes == window
    })
}

/// The targets.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut t = Vec::new();
    let zc: Vec<&Row> = rows.iter().filter(|r| r.pipeline == "zerocopy").collect();
    if !zc.is_empty() {
        let worst = zc.iter().map(|r| r.copied_per_byte).fold(0.0, f64::max);
        t.push(Target::new(
            "the zero-copy pipeline copies 0 bytes per byte delivered".to_string(),
            format!("{worst:.3} at most"),
            worst == 0.0,
        ));
    }
    if let Some(worst) = zc
        .iter()
        .filter(|r| r.window_bytes >= 4096)
        .filter_map(|r| r.link_share().map(|s| (s, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
    {
        t.push(Target::new(
            format!(
                "zero-copy at the {} port from 4 KiB windows up >= 95 % of the modelled link",
                worst.1.clock
            ),
            format!(
                "at least {:.1} % ({:.0} MB/s, worst at {})",
                100.0 * worst.0,
                worst.1.mb_per_s,
                bytes_label(worst.1.window_bytes)
            ),
            worst.0 >= 0.95,
        ));
    }
    if let (Some(z), Some(c)) = (
        find(rows, "zerocopy", true, 64 << 10),
        find(rows, "copy", true, 64 << 10),
    ) {
        let ratio = z.mb_per_s / c.mb_per_s;
        t.push(Target::new(
            "unlimited clock, 64 KiB windows: zero-copy >= 1.5x the copying pipeline".to_string(),
            format!(
                "{ratio:.2}x ({:.0} against {:.0} MB/s)",
                z.mb_per_s, c.mb_per_s
            ),
            ratio >= 1.5,
        ));
    }
    t
}

/// One sentence.
pub fn answer(rows: &[Row]) -> String {
    let mut clauses = Vec::new();
    if let (Some(z), Some(c)) = (
        rows.iter()
            .filter(|r| r.pipeline == "zerocopy" && r.clock == "unlimited")
            .max_by_key(|r| r.window_bytes),
        rows.iter()
            .filter(|r| r.pipeline == "copy" && r.clock == "unlimited")
            .max_by_key(|r| r.window_bytes),
    ) {
        clauses.push(format!(
            "with the link unlimited, the accelerator node delivers {:.0} MB/s of filtered \
             samples at {} windows against {:.0} MB/s for the copying pipeline ({:.2}x), \
             for {:.0} against {:.0} us of host CPU per MB and {:.2} against {:.2} bytes \
             copied per byte",
            z.mb_per_s,
            bytes_label(z.window_bytes),
            c.mb_per_s,
            z.mb_per_s / c.mb_per_s,
            z.cpu_us_per_mb,
            c.cpu_us_per_mb,
            z.copied_per_byte,
            c.copied_per_byte
        ));
    }
    if let Some(z) = rows
        .iter()
        .filter(|r| r.pipeline == "zerocopy" && r.model_mb_per_s.is_some())
        .min_by_key(|r| r.window_bytes)
    {
        clauses.push(format!(
            "at the {} port it keeps {:.1} % of the modelled link from {} windows",
            z.clock,
            100.0 * z.link_share().unwrap_or(0.0),
            bytes_label(z.window_bytes)
        ));
    }
    sentence(&clauses)
}

/// The rows as JSON.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "pipeline",
        "rows": rows.iter().map(|r| json!({
            "core": "fir",
            "pipeline": r.pipeline,
            "clock": r.clock,
            "window_bytes": r.window_bytes,
            "mb_per_s": r.mb_per_s,
            "model_mb_per_s": r.model_mb_per_s,
            "link_share": r.link_share(),
            "cpu_us_per_mb": r.cpu_us_per_mb,
            "copied_per_byte": r.copied_per_byte,
            "runs": r.runs,
        })).collect::<Vec<_>>(),
    })
}

/// The run as a report.
pub fn report(cfg: &Config, rows: &[Row]) -> super::report::Report {
    let series = super::report::series_by(
        rows,
        |r| format!("{} {}", r.pipeline, r.clock),
        |r| r.window_bytes as f64,
        |r| r.mb_per_s,
    );
    super::report::Report {
        experiment: "pipeline",
        heading: format!(
            "pipeline: source -> {TAPS}-tap FIR coprocessor -> sink on the emulated fabric \
             ({} samples per run, median of {} runs each, interleaved): the accelerator node \
             on queues in DMA memory (zerocopy) against copying through DmaBufs (copy); \
             device thread on {}",
            cfg.samples,
            cfg.runs,
            super::placement_here()
        ),
        answer: answer(rows),
        targets: targets(rows),
        text: render(rows) + &Target::lines(&targets(rows)),
        json: json(rows),
        plots: vec![super::plot::LinePlot {
            title: "Accelerator in a process network: delivered throughput".into(),
            x_label: "window (output bytes)".into(),
            y_label: "delivered MB/s".into(),
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
    fn both_pipelines_deliver_the_same_filtered_stream() {
        let t0 = Instant::now();
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        let wall = t0.elapsed().as_secs_f64();
        assert_eq!(rows.len(), 4);
        for r in &rows {
            assert!(r.mb_per_s > 0.0 && r.cpu_us_per_mb > 0.0, "{r:?}");
            // The whole output went through in less than the test's time.
            assert!(4.0 * 50_000.0 / (r.mb_per_s * 1e6) < wall, "{r:?}");
        }
        for r in rows.iter().filter(|r| r.pipeline == "zerocopy") {
            assert_eq!(r.copied_per_byte, 0.0, "{r:?}");
        }
        // The copying pipeline copies each window in and each answer out: at
        // least two bytes per byte delivered.
        for r in rows.iter().filter(|r| r.pipeline == "copy") {
            assert!(r.copied_per_byte >= 2.0, "{r:?}");
        }
        assert_eq!(json(&rows)["rows"][0]["core"], "fir");
        assert!(render(&rows).contains("copied B/B"));
    }
}
