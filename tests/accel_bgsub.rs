//! The background-subtraction coprocessor as a node of a process network:
//! frames from a queue in DMA memory, masks into one, the background kept in
//! the node's DMA buffers between frames.

use std::sync::{Arc, Mutex};

mod common;

use dmaflow::accel::bgsub::{self, Config};
use dmaflow::accel::stage::StageStats;
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params, synthetic_frames};
use dmaflow::graph::Graph;
use dmaflow::platform::MemoryModel;
use dmaflow::rig::Rig;
use dmaflow::sim::{BgSubCore, DeviceWork, StreamProcessor};
use std::time::Duration;

/// Two streams in, two out; answers the mask stream with half a frame.
struct ShortMask;

impl StreamProcessor for ShortMask {
    fn streams(&self) -> usize {
        2
    }
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        outputs[0].extend_from_slice(inputs[1]);
        outputs[1].extend_from_slice(&inputs[0][..inputs[0].len() / 2]);
    }
}

/// Two streams in, two out; never answers.
struct Silent2;

impl StreamProcessor for Silent2 {
    fn streams(&self) -> usize {
        2
    }
    fn process(&mut self, _inputs: &[&[u8]], _outputs: &mut [Vec<u8>]) {}
}

use common::sg_rig as rig;

/// source -> coprocessor -> sink, queues of `queue` bytes in the rig's DMA
/// memory (or, if `ordinary`, the input queue in ordinary memory).
fn pipeline(
    mut rig: Rig,
    cfg: Config,
    frames: Vec<u8>,
    queue: usize,
    ordinary: bool,
) -> Result<(Vec<u8>, StageStats), dmaflow::graph::Error> {
    let memory = rig.engines[0].pool().queue_memory().unwrap();
    let e1 = rig.engines.remove(1);
    let e0 = rig.engines.remove(0);
    let mut g = Graph::new();
    let (mut src, bin) = if ordinary {
        g.connect_with_capacity::<u8>(("source", "out"), ("bgsub", "in"), queue)?
    } else {
        g.connect_in::<u8>(("source", "out"), ("bgsub", "in"), queue, memory.clone())?
    };
    let (bout, sink) = g.connect_in::<u8>(("bgsub", "out"), ("sink", "in"), queue, memory)?;
    g.node("source", move || {
        // In odd pieces, so frames straddle the queue's end again and again.
        for chunk in frames.chunks(1001) {
            src.write(chunk)?;
        }
        Ok(())
    })?;
    let stats = Arc::new(Mutex::new(StageStats::default()));
    bgsub::add_node(&mut g, "bgsub", [e0, e1], cfg, bin, bout, stats.clone())?;
    let got = common::collect(&mut g, "sink", sink)?;
    g.run()?;
    drop(rig);
    let out = std::mem::take(&mut *got.lock().unwrap());
    let s = *stats.lock().unwrap();
    Ok((out, s))
}

/// 60 frames of 53 x 41 (2173 bytes: they wrap around 8 KiB queues at a
/// different place each time) give the software's masks, byte for byte, on
/// the coherent and the non-coherent board, polling and by interrupt, with no
/// byte copied by the CPU.
#[test]
fn masks_are_the_software_s_through_many_wraps() {
    let p = Params::new(53, 41, 20, true).unwrap();
    let n = p.frame_bytes();
    let frames = synthetic_frames(&p, 60, 7);
    let mut sub = BackgroundSubtractor::new(p);
    let mut want = vec![0u8; frames.len()];
    for (f, m) in frames.chunks(n).zip(want.chunks_mut(n)) {
        sub.process(f, m).unwrap();
    }
    assert!(want.contains(&255) && want.contains(&0));
    for model in [MemoryModel::Coherent, MemoryModel::NonCoherent] {
        for completion in [Completion::Poll, Completion::Irq, Completion::Adaptive] {
            let cfg = Config {
                params: p,
                completion,
            };
            let (got, stats) = pipeline(
                rig(Box::new(BgSubCore::new(p)), model),
                cfg,
                frames.clone(),
                8192,
                false,
            )
            .unwrap();
            assert_eq!(got.len(), want.len(), "{model:?} {completion:?}");
            assert!(got == want, "{model:?} {completion:?}: masks differ");
            assert_eq!(stats.windows, 60);
            assert_eq!(stats.bytes_out, frames.len() as u64);
            assert_eq!(stats.bytes_copied, 0);
        }
    }
}

/// The fabric times the emulated device's own work only when asked: with
/// timing off nothing is counted; with it on, every frame the core computed
/// is a packet, and its memory and compute time are counted.
#[test]
fn the_device_s_own_work_is_timed_when_asked() {
    let p = Params::new(64, 64, 20, true).unwrap();
    let frames = synthetic_frames(&p, 12, 3);
    let cfg = Config {
        params: p,
        completion: Completion::Poll,
    };
    for on in [false, true] {
        let r = rig(Box::new(BgSubCore::new(p)), MemoryModel::Coherent);
        r.fabric.time_work(on);
        let meter = r.fabric.work_meter();
        let (got, _) = pipeline(r, cfg, frames.clone(), 16384, false).unwrap();
        assert_eq!(got.len(), frames.len());
        let w = meter.read();
        if on {
            // Each frame is one packet on each of the core's two streams,
            // computed together.
            assert_eq!(w.packets, 12, "{w:?}");
            assert!(
                w.memory > Duration::ZERO && w.compute > Duration::ZERO,
                "{w:?}"
            );
            assert_eq!(w.total(), w.memory + w.compute);
        } else {
            assert_eq!(w, DeviceWork::default());
        }
    }
}

/// A mask shorter than a frame, a core that never answers: the node stops
/// the graph with a named error, and nothing hangs.
#[test]
fn wrong_answers_and_timeouts_stop_the_graph() {
    let p = Params::new(32, 32, 20, true).unwrap();
    let frames = synthetic_frames(&p, 4, 1);
    let cfg = Config {
        params: p,
        completion: Completion::Poll,
    };
    let e = pipeline(
        rig(Box::new(ShortMask), MemoryModel::Coherent),
        cfg,
        frames.clone(),
        8192,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("bgsub") && e.contains("answered with 512 bytes where 1024"),
        "{e}"
    );
    let e = pipeline(
        rig(Box::new(Silent2), MemoryModel::Coherent),
        cfg,
        frames,
        8192,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("bgsub") && e.contains("no completion"), "{e}");
}

/// A frame larger than the queues, a queue outside DMA memory: refused by
/// name before the engines move.
#[test]
fn bad_setups_are_named_errors() {
    let p = Params::new(100, 100, 20, true).unwrap();
    let cfg = Config {
        params: p,
        completion: Completion::Poll,
    };
    let frames = synthetic_frames(&p, 2, 1);
    let e = pipeline(
        rig(Box::new(BgSubCore::new(p)), MemoryModel::Coherent),
        cfg,
        frames.clone(),
        4096,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("10000-byte frame does not fit"), "{e}");
    let e = pipeline(
        rig(Box::new(BgSubCore::new(p)), MemoryModel::Coherent),
        cfg,
        frames,
        1 << 16,
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("ordinary memory"), "{e}");
}
