//! The FIR core in `bench pipeline`: f32 samples, windows overlapping by
//! `TAPS - 1` samples, one hop of filtered samples per window.

use super::device::{self, Bare};
use super::{Body, Error, Rig, Run, SimEngine, Span, delivered_of, run_pipeline};
use dmaflow::accel::fir::load_taps;
use dmaflow::accel::fir::{FIR_REG_NTAPS, FIR_REG_TAPS};
use dmaflow::accel::stage::{self, StageConfig};
use dmaflow::axi::Channel;
use dmaflow::dma::{Completion, PacketRing};
use dmaflow::graph::{Input, Output};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::cpu::thread_cpu_time;
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

/// One period of the source's sawtooth.
fn period() -> Vec<f32> {
    (0..PERIOD)
        .map(|i| i as f32 / PERIOD as f32 - 0.5)
        .collect()
}

/// Samples `first..first + dst.len()` of the source's signal, copied from
/// one `period` in runs.
fn sawtooth(dst: &mut [f32], first: usize, period: &[f32]) {
    let mut done = 0;
    while done < dst.len() {
        let phase = (first + done) % PERIOD;
        let k = (PERIOD - phase).min(dst.len() - done);
        dst[done..done + k].copy_from_slice(&period[phase..phase + k]);
        done += k;
    }
}

/// Positions `from..from + dst.len()` of the stream the filter reads: the
/// source's `TAPS - 1` zeros, then its signal.
fn stream_at(dst: &mut [f32], from: usize, period: &[f32]) {
    let zeros = (TAPS - 1).saturating_sub(from).min(dst.len());
    dst[..zeros].fill(0.0);
    sawtooth(&mut dst[zeros..], from + zeros - (TAPS - 1), period);
}

/// The source: `TAPS - 1` zeros (the filter's initial state), then `samples`
/// samples of a sawtooth written into the queue's slots from one period.
fn source(
    mut out: Output<f32>,
    samples: usize,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        let period = period();
        out.reserve(TAPS - 1)?.fill(0.0);
        out.commit(TAPS - 1)?;
        let chunk = 16 << 10;
        let mut at = 0usize;
        while at < samples {
            let n = chunk.min(samples - at);
            sawtooth(out.reserve(n)?, at, &period);
            out.commit(n)?;
            at += n;
        }
        Ok(())
    }
}

/// The copying node, with the accelerator node's engine, windows in flight
/// and completion: each window copied into a TX buffer of a [`PacketRing`]
/// and each answer out of its RX buffer by the library's standard I/O.
fn copying_node(
    engine: SimEngine,
    hop: usize,
    depth: usize,
    mut input: Input<f32>,
    mut output: Output<f32>,
) -> impl FnOnce() -> dmaflow::graph::NodeResult + Send + 'static {
    move || {
        let window = hop + TAPS - 1;
        let mut ring = PacketRing::new(&engine, depth, 4 * window, 1, COMPLETION)?;
        let (mut in_flight, mut ended) = (0usize, false);
        loop {
            // Every whole window readable goes out while a buffer is free;
            // with none in flight, wait for one (or for the end).
            while !ended && in_flight < depth {
                let w = if in_flight == 0 {
                    input.peek(window)?
                } else {
                    match input.try_peek(window)? {
                        Some(w) => w,
                        None => break,
                    }
                };
                let last = w.len() < window;
                let n = w.len().min(window);
                if n < TAPS {
                    ended = true;
                    break;
                }
                ring.send(bytemuck::cast_slice(&w[..n]))?;
                input.consume(if last { n } else { hop })?;
                in_flight += 1;
                ended = last;
            }
            if in_flight == 0 {
                break;
            }
            ring.recv_with(|answer| output.write(bytemuck::cast_slice(answer)))??;
            in_flight -= 1;
        }
        Ok(())
    }
}

/// What the FIR pipelines and their device-only run share: the board (the
/// FIR core, its taps loaded, behind one scatter-gather engine, the device
/// thread on a core of its own while the placement lives) and the windows:
/// `hop` samples of output each, `window` samples in, `depth` in flight.
struct Board {
    rig: Rig,
    _placed: dmaflow::rig::Placement,
    hop: usize,
    window: usize,
    depth: usize,
}

/// The board and windows for `window_bytes` of filtered output per window.
fn board(clock: Clock, window_bytes: usize) -> Result<Board, Error> {
    let hop = window_bytes / 4;
    let rig = Rig::new(
        64 << 20,
        clock,
        true,
        CachePolicy::Coherent,
        Box::new(FirCore::new()),
    )?;
    load_taps(&rig.control()?, &taps()).map_err(Error::peer("FIR coprocessor"))?;
    let _placed = rig.dedicate_core()?;
    rig.fabric.time_work(true);
    Ok(Board {
        rig,
        _placed,
        hop,
        window: hop + TAPS - 1,
        depth: (IN_FLIGHT / window_bytes).max(4),
    })
}

/// One run: `window_bytes` of filtered output per window, `samples` samples.
pub(super) fn run_once(
    clock: Clock,
    window_bytes: usize,
    samples: usize,
    zero_copy: bool,
) -> Result<Run, Error> {
    let mut b = board(clock, window_bytes)?;
    let (hop, window, depth) = (b.hop, b.window, b.depth);
    let queue = window + depth * hop + (64 << 10);
    // For the accelerator node, both queues in the board's DMA memory.
    let memory = if zero_copy {
        let m = b.rig.engines[0].pool().queue_memory();
        Some(m.map_err(dmaflow::rig::Error::from)?)
    } else {
        None
    };
    let engine = b.rig.engines.remove(0);
    let source = |s| -> Body { Box::new(source(s, samples)) };
    let meter = b.rig.fabric.work_meter();
    let run = run_pipeline::<f32>("fir", queue, memory, source, |mut a, mut b| {
        if !zero_copy {
            return Box::new(copying_node(engine, hop, depth, a, b));
        }
        let cfg = stage_config(hop, depth);
        Box::new(move || {
            stage::run(&engine, &cfg, &mut a, &mut b)?;
            Ok(())
        })
    })?;
    Ok(run.with_device(&meter))
}

/// The accelerator node's windows: `hop` samples out, `hop + TAPS - 1` in,
/// `depth` in flight.
fn stage_config(hop: usize, depth: usize) -> StageConfig {
    StageConfig {
        window: hop + TAPS - 1,
        hop,
        out_max: hop,
        min_window: TAPS,
        depth,
        completion: COMPLETION,
    }
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

/// The device-only baseline: the same core, engine, windows and windows in
/// flight as the accelerator node, with the engine's channels driven bare
/// ([`Bare`]) and no graph, and the same work on the data on its one
/// thread: each window's new samples written into DMA memory ahead of its
/// sending, as far ahead as no window in flight is touched (the source's
/// work; the buffer holds `2 depth` windows, used in turn), every answer
/// landed in one of `2 depth` slots, its length checked, and its bytes
/// digested as the sink digests them once the next windows are posted (so
/// its digest is the pipelines'). Data the CPU never touched would stay in
/// the emulated device's core's cache, which no board's DMA enjoys.
pub(super) fn device_once(clock: Clock, window_bytes: usize, samples: usize) -> Result<Run, Error> {
    let b = board(clock, window_bytes)?;
    let (hop, window, depth) = (b.hop, b.window, b.depth);
    let engine = &b.rig.engines[0];
    // Windows in the input buffer, sent in turn.
    let turn = 2 * depth;
    let in_items = window + (turn - 1) * hop;
    let period = period();
    let mut input = engine.pool().alloc::<u8>(4 * in_items)?;
    let mut output = engine.pool().alloc::<u8>(turn * window_bytes)?;
    output.sync_for_device(turn * window_bytes)?;
    // Whole windows, then a last one with what is left (as the node sends):
    // where it lies in the input buffer, its items and its answer's bytes.
    let (full, rest) = (samples / hop, samples % hop);
    let windows = full + usize::from(rest > 0);
    let packet = |i: usize| {
        let at = (i % turn) * hop;
        if i < full {
            (at, window, 4 * hop)
        } else {
            (at, rest + TAPS - 1, 4 * rest)
        }
    };
    let (mut span, c0) = (Span::new(), thread_cpu_time());
    let result = (|| -> Result<(u64, u64), Error> {
        // S2MM's interrupts coalesced as the node's are.
        let coalescing = stage::s2mm_coalescing(&stage_config(hop, depth));
        let mut bare = Bare::new(engine, depth + 1, COMPLETION, coalescing)?;
        let (mut next, mut done, mut written) = (0usize, 0usize, 0usize);
        let (in_bus, out_bus) = (input.bus_addr(), output.bus_addr());
        let (mut delivered, mut sum) = (0u64, 0u64);
        // Writes window `j`'s new samples (all of it where a turn of the
        // buffer begins: its overlap lies at the buffer's end), as the
        // source writes ahead of the node.
        let mut write = |j: usize| -> Result<(), Error> {
            let (at, items, _) = packet(j);
            let new = if j.is_multiple_of(turn) { 0 } else { TAPS - 1 };
            let items_in: &mut [f32] = bytemuck::cast_slice_mut(input.as_mut_slice());
            stream_at(&mut items_in[at + new..at + items], j * hop + new, &period);
            Ok(input.sync_range_for_device(4 * (at + new), 4 * (items - new))?)
        };
        // Lands window `done`'s answer (its length checked; the first
        // starts the span) and takes its MM2S.
        let mut take = |bare: &mut Bare<'_>, done: usize| -> Result<(), Error> {
            span.answer(bare.landed(packet(done).2)? as u64);
            bare.sent()
        };
        // Digests window `j`'s landed answer as the sink does.
        let mut digest = |j: usize| -> Result<(), Error> {
            let answer = packet(j).2;
            let o = (j % turn) * window_bytes;
            output.sync_range_for_cpu(o, answer)?;
            sum = super::digest(sum, delivered / 8, &output.as_slice()[o..o + answer]);
            delivered += answer as u64;
            Ok(())
        };
        let mut digested = 0usize;
        while digested < windows {
            // Answers land in `turn` slots in turn: a slot is free once the
            // answer it held is digested.
            let posted = next;
            while next < windows && next - done < depth && next < digested + turn {
                if written == next {
                    write(next)?;
                    written += 1;
                }
                let (at, items, answer) = packet(next);
                let slot = (next % turn) * window_bytes;
                // SAFETY: both buffers live until the run's end, and on an
                // error `device::stop` halts the engine or surrenders them.
                // The landing slot is free: slot `next % turn` last held
                // answer `next - turn`, digested already. The input is only
                // read while in flight (see the writes ahead below).
                unsafe {
                    bare.push(Channel::S2mm, out_bus + slot as u64, answer)?;
                    bare.push(Channel::Mm2s, in_bus + 4 * at as u64, 4 * items)?;
                }
                next += 1;
            }
            if next > posted {
                bare.flush(Channel::S2mm)?;
                bare.flush(Channel::Mm2s)?;
            }
            // While the device works: the answers landed so far digested
            // (the sink's work), and the samples of windows not posted yet
            // written as far ahead as no window in flight is touched
            // (window `j` writes where windows `j - turn` and
            // `j - turn + 1` lay, both done once `j <= done + turn - 2`).
            while digested < done {
                digest(digested)?;
                digested += 1;
            }
            while written < windows && written + 2 <= done + turn {
                write(written)?;
                written += 1;
            }
            // Every answer landed by now, then the next batch of windows
            // with one doorbell per channel (as the node hands them over).
            if done < next {
                take(&mut bare, done)?;
                done += 1;
                while done < next && bare.has_landed() {
                    take(&mut bare, done)?;
                    done += 1;
                }
            }
        }
        Ok((delivered, sum ^ delivered))
    })();
    let (rate, cpu) = (span.rate(delivered_of(&result)), thread_cpu_time() - c0);
    let (out_bytes, digest) = result.inspect_err(|_| {
        device::stop(&[engine], &mut [&mut input, &mut output]);
    })?;
    Ok(Run {
        rate,
        cpu,
        node_cpu: cpu,
        out_bytes,
        copied: 0,
        digest,
        device: b.rig.fabric.work().total(),
    })
}
