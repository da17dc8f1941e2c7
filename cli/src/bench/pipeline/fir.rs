//! The FIR core in `bench pipeline`: f32 samples, windows overlapping by
//! `TAPS - 1` samples, one hop of filtered samples per window.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Error, Measured, Rig, Run, SimEngine, queues, run_graph, sink, timed};
use dmaflow::accel::fir::load_taps;
use dmaflow::accel::fir::{FIR_REG_NTAPS, FIR_REG_TAPS};
use dmaflow::accel::stage::{self, StageConfig};
use dmaflow::dma::Completion;
use dmaflow::graph::{Graph, Input, Output};
use dmaflow::mem::CachePolicy;
use dmaflow::sim::{Clock, FirCore, StreamProcessor};

/// Filter taps of the FIR core.
pub const TAPS: usize = 8;

fn taps() -> Vec<f32> {
    (0..TAPS)
        .map(|k| ((k as f32) * 0.37).cos() / TAPS as f32)
        .collect()
}

/// How both FIR pipelines wait for completions: on the interrupt line. Many
/// windows are in flight, so the node has nothing to do until one completes,
/// and blocking leaves the shared core to the source and sink (polling or
/// yielding there takes it from them).
const COMPLETION: Completion = Completion::Irq;

/// Output bytes the accelerator node keeps in flight (at least four windows):
/// the source, node and sink share one core, and the link must have more work
/// queued than the time the source or the sink holds that core (512 KiB is
/// about 440 us at the HP port's 1200 MB/s).
const IN_FLIGHT: usize = 512 << 10;

/// Samples in the source's repeating signal.
const PERIOD: usize = 977;

/// The source: `TAPS - 1` zeros (the filter's initial state), then `samples`
/// samples of a sawtooth written into the queue's slots from one period.
fn source(
    mut out: Output<f32>,
    samples: usize,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        let period: Vec<f32> = (0..PERIOD)
            .map(|i| i as f32 / PERIOD as f32 - 0.5)
            .collect();
        out.write(&[0.0; TAPS - 1])?;
        let chunk = 16 << 10;
        let mut at = 0usize;
        while at < samples {
            let n = chunk.min(samples - at);
            let s = out.reserve(n)?;
            let mut done = 0;
            while done < n {
                let phase = (at + done) % PERIOD;
                let k = (PERIOD - phase).min(n - done);
                s[done..done + k].copy_from_slice(&period[phase..phase + k]);
                done += k;
            }
            out.commit(n)?;
            at += n;
        }
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
            let got = engine.two_way_into(&tx, 4 * n, &mut rx, 4 * hop, COMPLETION)?;
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

/// One run: `window_bytes` of filtered output per window, `samples` samples.
pub(super) fn run_once(
    clock: Clock,
    window_bytes: usize,
    samples: usize,
    zero_copy: bool,
) -> Result<Run, Error> {
    let hop = window_bytes / 4;
    let mut rig = Rig::new(
        64 << 20,
        clock,
        zero_copy,
        CachePolicy::Coherent,
        Box::new(FirCore::new()),
    )?;
    load_taps(&rig.control()?, &taps()).map_err(|e| Error::Peer {
        peer: "FIR coprocessor",
        reason: e.to_string(),
    })?;
    let placed = rig.dedicate_core()?;
    let m = Measured::default();
    let window = hop + TAPS - 1;
    let depth = (IN_FLIGHT / window_bytes).max(4);
    let queue = window + depth * hop + (64 << 10);
    let mut g = Graph::new();
    // For the accelerator node, both queues in the board's DMA memory.
    let memory = if zero_copy {
        let m = rig.engines[0].pool().queue_memory();
        Some(m.map_err(dmaflow::rig::Error::from)?)
    } else {
        None
    };
    let (s, a, b, k) = queues::<f32>(&mut g, "fir", queue, memory)?;
    g.node("source", timed(&m.cpu, source(s, samples)))?;
    let engine = rig.engines.remove(0);
    if zero_copy {
        let cfg = StageConfig {
            window,
            hop,
            out_max: hop,
            min_window: TAPS,
            depth,
            completion: COMPLETION,
        };
        let moved = m.copied.clone();
        g.node(
            "fir",
            timed(&m.cpu, move || {
                let (mut a, mut b) = (a, b);
                let s = stage::run(&engine, &cfg, &mut a, &mut b)?;
                moved.store(s.bytes_copied, Ordering::Relaxed);
                Ok(())
            }),
        )?;
    } else {
        g.node(
            "fir",
            timed(&m.cpu, copying_node(engine, hop, a, b, m.copied.clone())),
        )?;
    }
    g.node("sink", timed(&m.cpu, sink(k, &m)))?;
    let run = run_graph(g, &m);
    drop(placed);
    drop(rig);
    run
}

/// What the modelled link allows, delivered bytes per second: MM2S carries
/// each window's overlap too.
pub(super) fn model(link: f64, window_bytes: usize) -> f64 {
    let hop = window_bytes / 4;
    link * hop as f64 / (hop + TAPS - 1) as f64
}

/// The emulated core's own compute rate on this host, output bytes per
/// second: its `process` called directly on one window, over and over.
pub(super) fn core_rate(window_bytes: usize) -> f64 {
    let mut core = FirCore::new();
    for (k, t) in taps().iter().enumerate() {
        core.control_write(FIR_REG_TAPS + 4 * k, t.to_bits());
    }
    core.control_write(FIR_REG_NTAPS, TAPS as u32);
    let hop = window_bytes / 4;
    let input: Vec<u8> = (0..hop + TAPS - 1)
        .flat_map(|i| ((i % 977) as f32 / 977.0).to_le_bytes())
        .collect();
    super::rate_of(|out| {
        core.process(&[&input], std::slice::from_mut(out));
    })
}
