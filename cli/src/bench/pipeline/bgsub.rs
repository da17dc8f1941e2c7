//! The background-subtraction core in `bench pipeline`: square 8-bit frames
//! in, one mask per frame out, the background kept in DMA memory. Each frame's
//! background is the previous frame's answer, so frames go one at a time.

use std::sync::Arc;

use super::{Body, Error, Rig, Run, run_pipeline};
use dmaflow::accel::bgsub;
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{Params, synthetic_frames};
use dmaflow::graph::{Input, Output};
use dmaflow::mem::CachePolicy;
use dmaflow::rig::BgSubCoprocessor;
use dmaflow::sim::{BgSubCore, Clock, StreamProcessor};

/// How both bgsub pipelines wait for completions: spin briefly, then yield
/// the shared core between looks. A frame waits for the previous frame's
/// answer, so only one is ever in flight and the node's wake-up is on every
/// frame's critical path: an interrupt's wake-up costs more than it saves.
const COMPLETION: Completion = Completion::Yield;

/// Distinct frames the source cycles through.
const DISTINCT: usize = 8;

/// Square frames of `bytes` bytes (rounded down to a square).
pub(super) fn params(bytes: usize) -> Result<Params, Error> {
    let side = (bytes as f64).sqrt() as usize;
    Params::new(side, side, 20, true).map_err(Error::peer("background subtraction"))
}

/// The source, a camera: `frames` frames, cycling through a few rendered
/// before the run, written in place into the queue's slots (as a camera's
/// own DMA would: not copies on the path, so not the counted `write`).
fn source(
    mut out: Output<u8>,
    rendered: Arc<Vec<u8>>,
    n: usize,
    frames: usize,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        for f in 0..frames {
            let k = f % DISTINCT;
            out.reserve(n)?
                .copy_from_slice(&rendered[k * n..(k + 1) * n]);
            out.commit(n)?;
        }
        Ok(())
    }
}

/// The copying node: frame -> DmaBuf -> both engines -> mask copied out into
/// the output queue ([`BgSubCoprocessor`], which keeps the background in DMA
/// memory too and counts its copies where it makes them).
fn copying_node(
    mut hw: BgSubCoprocessor,
    n: usize,
    mut input: Input<u8>,
    mut output: Output<u8>,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        loop {
            let frame = input.peek(n)?;
            if frame.len() < n {
                break;
            }
            let mask = output.reserve(n)?;
            hw.process(&frame[..n], &mut mask[..n])?;
            output.commit(n)?;
            input.consume(n)?;
        }
        Ok(())
    }
}

/// One run: frames of `frame_bytes`, `bytes` bytes of them in all.
pub(super) fn run_once(
    clock: Clock,
    frame_bytes: usize,
    bytes: usize,
    zero_copy: bool,
) -> Result<Run, Error> {
    let p = params(frame_bytes)?;
    let n = p.frame_bytes();
    let frames = (bytes / n).max(DISTINCT);
    let queue = 4 * n + (64 << 10);
    let rendered = Arc::new(synthetic_frames(&p, DISTINCT, 5));
    let source = |s| -> Body { Box::new(source(s, rendered, n, frames)) };
    if !zero_copy {
        let hw = BgSubCoprocessor::new(p, clock, COMPLETION)?;
        let _placed = hw.rig().dedicate_core()?;
        let node = |a, b| -> Body { Box::new(copying_node(hw, n, a, b)) };
        return run_pipeline::<u8>("bgsub", queue, None, source, node);
    }
    let mut rig = Rig::new(
        (4 * queue + 4 * n + (4 << 20)).next_power_of_two(),
        clock,
        true,
        CachePolicy::Coherent,
        Box::new(BgSubCore::new(p)),
    )?;
    let _placed = rig.dedicate_core()?;
    let memory = rig.engines[0].pool().queue_memory();
    let memory = Some(memory.map_err(dmaflow::rig::Error::from)?);
    let (e1, e0) = (rig.engines.remove(1), rig.engines.remove(0));
    let cfg = bgsub::Config {
        params: p,
        completion: COMPLETION,
    };
    run_pipeline::<u8>("bgsub", queue, memory, source, |mut a, mut b| {
        Box::new(move || {
            bgsub::run([&e0, &e1], &cfg, &mut a, &mut b)?;
            Ok(())
        })
    })
}

/// Bytes delivered by a run of `bytes` bytes of `frame_bytes` frames.
pub(super) fn delivered(frame_bytes: usize, bytes: usize) -> Result<u64, Error> {
    let n = params(frame_bytes)?.frame_bytes();
    Ok(((bytes / n).max(DISTINCT) * n) as u64)
}

/// The emulated core's own compute rate on this host, mask bytes per second:
/// its `process` called directly on one frame and background, over and over.
pub(super) fn core_rate(frame_bytes: usize) -> Result<f64, Error> {
    let p = params(frame_bytes)?;
    let mut core = BgSubCore::new(p);
    let frames = synthetic_frames(&p, 2, 5);
    let (frame, background) = frames.split_at(p.frame_bytes());
    let mut outs = [Vec::new(), Vec::new()];
    Ok(super::rate_of(|out| {
        outs.iter_mut().for_each(Vec::clear);
        core.process(&[frame, background], &mut outs);
        out.extend_from_slice(&outs[1]);
    }))
}
