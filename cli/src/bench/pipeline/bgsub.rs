//! The background-subtraction core in `bench pipeline`: square 8-bit frames
//! in, one mask per frame out, the background kept in DMA memory. Each frame's
//! background is the previous frame's answer, so frames go one at a time.

use std::sync::Arc;

use super::device::{self, Bare};
use super::{Body, Error, Rig, Run, Span, run_pipeline};
use dmaflow::accel::bgsub;
use dmaflow::axi::{Channel, Coalescing};
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{Params, synthetic_frames};
use dmaflow::graph::{Input, Output};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::cpu::thread_cpu_time;
use dmaflow::rig::BgSubCoprocessor;
use dmaflow::sim::{BgSubCore, Clock, StreamProcessor};

/// How the bgsub pipelines and the device-only run wait for completions: a
/// frame waits for the previous frame's answer, so only one is ever in flight
/// and the node's wake-up is on every frame's critical path. Adaptive: a
/// timer nap and a spin until the link says the frame should be over, the
/// interrupt only past that (polling with short sleeps, `Yield`, sleeps in
/// slices of at least 10 us once its 5 us spin is over, and each sleep's
/// wake-up lands on the frame's critical path).
const COMPLETION: Completion = Completion::Adaptive;

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

/// What the accelerator node's pipeline and the device-only run share: the
/// board (the core behind its two scatter-gather engines, memory for both
/// queues, the rendered frames and the backgrounds, the device thread on a
/// core of its own while the placement lives) and the frames: `p`, `n` bytes
/// each, `frames` of them, queues of `queue` bytes.
struct Board {
    rig: Rig,
    _placed: dmaflow::rig::Placement,
    p: Params,
    n: usize,
    frames: usize,
    queue: usize,
}

/// Frames in a run of `bytes` bytes of `n`-byte frames (at least every
/// distinct frame once).
fn frames_of(n: usize, bytes: usize) -> usize {
    (bytes / n).max(DISTINCT)
}

/// Each pipeline's queues for frames of `n` bytes: four frames and 64 KiB.
fn queue_bytes(n: usize) -> usize {
    4 * n + (64 << 10)
}

/// The board and frames for a run of `bytes` bytes of `frame_bytes` frames.
fn board(clock: Clock, frame_bytes: usize, bytes: usize) -> Result<Board, Error> {
    let p = params(frame_bytes)?;
    let n = p.frame_bytes();
    let queue = queue_bytes(n);
    let rig = Rig::new(
        (4 * queue + DISTINCT * n + (4 << 20)).next_power_of_two(),
        clock,
        true,
        CachePolicy::Coherent,
        Box::new(BgSubCore::new(p)),
    )?;
    let _placed = rig.dedicate_core()?;
    rig.fabric.time_work(true);
    Ok(Board {
        rig,
        _placed,
        p,
        n,
        frames: frames_of(n, bytes),
        queue,
    })
}

/// One run: frames of `frame_bytes`, `bytes` bytes of them in all.
pub(super) fn run_once(
    clock: Clock,
    frame_bytes: usize,
    bytes: usize,
    zero_copy: bool,
) -> Result<Run, Error> {
    let body = |p: &Params, n: usize, frames: usize| {
        let rendered = Arc::new(synthetic_frames(p, DISTINCT, 5));
        move |s: Output<u8>| -> Body { Box::new(source(s, rendered, n, frames)) }
    };
    if !zero_copy {
        let p = params(frame_bytes)?;
        let n = p.frame_bytes();
        let source = body(&p, n, frames_of(n, bytes));
        let hw = BgSubCoprocessor::new(p, clock, COMPLETION)?;
        let _placed = hw.rig().dedicate_core()?;
        hw.rig().fabric.time_work(true);
        let meter = hw.rig().fabric.work_meter();
        let node = |a, b| -> Body { Box::new(copying_node(hw, n, a, b)) };
        let run = run_pipeline::<u8>("bgsub", queue_bytes(n), None, source, node)?;
        return Ok(run.with_device(&meter));
    }
    let mut b = board(clock, frame_bytes, bytes)?;
    let (n, queue) = (b.n, b.queue);
    let source = body(&b.p, n, b.frames);
    let memory = b.rig.engines[0].pool().queue_memory();
    let memory = Some(memory.map_err(dmaflow::rig::Error::from)?);
    let (e1, e0) = (b.rig.engines.remove(1), b.rig.engines.remove(0));
    let cfg = bgsub::Config {
        params: b.p,
        completion: COMPLETION,
    };
    let meter = b.rig.fabric.work_meter();
    let run = run_pipeline::<u8>("bgsub", queue, memory, source, |mut input, mut output| {
        Box::new(move || {
            bgsub::run([&e0, &e1], &cfg, &mut input, &mut output)?;
            Ok(())
        })
    })?;
    Ok(run.with_device(&meter))
}

/// Bytes delivered by a run of `bytes` bytes of `frame_bytes` frames.
pub(super) fn delivered(frame_bytes: usize, bytes: usize) -> Result<u64, Error> {
    let n = params(frame_bytes)?.frame_bytes();
    Ok((frames_of(n, bytes) * n) as u64)
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

/// The device-only baseline: the same core and engines as the accelerator
/// node, their channels driven bare ([`Bare`]) and no graph: the source's
/// frames rendered into DMA memory before the clock starts, then frame after
/// frame the new background and the mask landed and the frame and the
/// background sent (the first frame standing in for its own background, as
/// the node does), each answer's length checked; nothing reads the masks.
/// The waits go as the node's do (the mask, then the background, then both
/// MM2S), and the next frame is posted as soon as the last has landed, with
/// nothing to hand over in between: the most the bare engines do for the
/// node, which posts the next frame before it hands the last one over.
pub(super) fn device_once(clock: Clock, frame_bytes: usize, bytes: usize) -> Result<Run, Error> {
    let b = board(clock, frame_bytes, bytes)?;
    let (p, n, frames) = (b.p, b.n, b.frames);
    let (e0, e1) = (&b.rig.engines[0], &b.rig.engines[1]);
    let pool = e0.pool();
    let mut video = pool.alloc::<u8>(DISTINCT * n)?;
    video
        .as_mut_slice()
        .copy_from_slice(&synthetic_frames(&p, DISTINCT, 5));
    video.sync_for_device(DISTINCT * n)?;
    let (mut bg0, mut bg1, mut mask) = (
        pool.alloc::<u8>(n)?,
        pool.alloc::<u8>(n)?,
        pool.alloc::<u8>(n)?,
    );
    for b in [&bg0, &bg1, &mask] {
        b.sync_for_device(n)?;
    }
    let (mut span, c0) = (Span::new(), thread_cpu_time());
    let result = (|| -> Result<u64, Error> {
        let none = Coalescing::NONE;
        let mut bare = [
            Bare::new(e0, 2, COMPLETION, none)?,
            Bare::new(e1, 2, COMPLETION, none)?,
        ];
        let mut backgrounds = [bg0.bus_addr(), bg1.bus_addr()];
        let mut delivered = 0u64;
        for f in 0..frames {
            let frame = video.bus_addr() + ((f % DISTINCT) * n) as u64;
            let bg_in = if f == 0 { frame } else { backgrounds[0] };
            // SAFETY: every buffer lives until the run's end, and on an
            // error `device::stop` halts the engines or surrenders them.
            // One frame is in flight at a time: the landings (the other
            // background, the mask) are read by nothing meanwhile, and the
            // frame and background sent are only read.
            unsafe {
                bare[0].push(Channel::S2mm, backgrounds[1], n)?;
                bare[1].push(Channel::S2mm, mask.bus_addr(), n)?;
                bare[0].push(Channel::Mm2s, frame, n)?;
                bare[1].push(Channel::Mm2s, bg_in, n)?;
            }
            for b in &mut bare {
                b.flush(Channel::S2mm)?;
            }
            for b in &mut bare {
                b.flush(Channel::Mm2s)?;
            }
            // The mask first, as the node waits: it lands last, so only
            // that wait sleeps.
            let mask = bare[1].landed(n)? as u64;
            span.answer(mask);
            delivered += mask;
            bare[0].landed(n)?;
            for b in &mut bare {
                b.sent()?;
            }
            backgrounds.swap(0, 1);
        }
        Ok(delivered)
    })();
    let ended = result.as_ref().map_or(0, |d| *d);
    let (rate, cpu) = (span.rate(ended), thread_cpu_time() - c0);
    let out_bytes = result.inspect_err(|_| {
        device::stop(&[e0, e1], &mut [&mut video, &mut bg0, &mut bg1, &mut mask]);
    })?;
    Ok(Run {
        rate,
        cpu,
        node_cpu: cpu,
        out_bytes,
        copied: 0,
        digest: 0,
        device: b.rig.fabric.work().total(),
    })
}
