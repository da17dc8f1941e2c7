//! An accelerator inside a process network: windows of a queue in DMA memory go
//! to MM2S in place, answers land in the output queue in place.

use std::sync::{Arc, Mutex};

mod common;

use dmaflow::accel::fir::load_taps;
use dmaflow::accel::stage::{self, StageConfig, StageStats};
use dmaflow::dma::Completion;
use dmaflow::graph::Graph;
use dmaflow::platform::MemoryModel;
use dmaflow::rig::Rig;
use dmaflow::sim::{FirCore, Loopback, StreamProcessor};

/// Answers every packet with its first half (TLAST early).
struct Halver;

impl StreamProcessor for Halver {
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        let p = inputs[0];
        outputs[0].extend_from_slice(&p[..p.len() / 2]);
    }
}

/// Answers every packet with all but its last two bytes (one `u16` short).
struct OneShort;

impl StreamProcessor for OneShort {
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        let p = inputs[0];
        outputs[0].extend_from_slice(&p[..p.len().saturating_sub(2)]);
    }
}

/// Never answers.
struct Silent;

impl StreamProcessor for Silent {
    fn process(&mut self, _inputs: &[&[u8]], _outputs: &mut [Vec<u8>]) {}
}

use common::sg_rig as rig;

/// source -> accelerator -> sink with both queues in the rig's DMA memory;
/// returns what the sink got and the node's statistics.
fn pipeline<T, U>(
    mut rig: Rig,
    cfg: StageConfig,
    input: Vec<T>,
    in_items: usize,
    out_items: usize,
) -> Result<(Vec<U>, StageStats), dmaflow::graph::Error>
where
    T: dmaflow::ring::Pod + Send,
    U: dmaflow::ring::Pod + Send,
{
    let memory = rig.engines[0].pool().queue_memory().unwrap();
    let engine = rig.engines.remove(0);
    let mut g = Graph::new();
    let (mut src, ain) =
        g.connect_in::<T>(("source", "out"), ("acc", "in"), in_items, memory.clone())?;
    let (aout, sink) = g.connect_in::<U>(("acc", "out"), ("sink", "in"), out_items, memory)?;
    g.node("source", move || {
        // In pieces, so the queue wraps many times.
        for chunk in input.chunks(777) {
            src.write(chunk)?;
        }
        Ok(())
    })?;
    let stats = Arc::new(Mutex::new(StageStats::default()));
    stage::add_node(&mut g, "acc", engine, cfg, ain, aout, stats.clone())?;
    let got = common::collect(&mut g, "sink", sink)?;
    g.run()?;
    drop(rig);
    let out = std::mem::take(&mut *got.lock().unwrap());
    let s = *stats.lock().unwrap();
    Ok((out, s))
}

fn cfg(window: usize, hop: usize, out_max: usize, completion: Completion) -> StageConfig {
    StageConfig {
        window,
        hop,
        out_max,
        min_window: 1,
        depth: 4,
        completion,
    }
}

/// Window > hop on a loopback: every window comes back whole (the overlap sent
/// again by the device, not copied), through many wraps of both queues, in
/// every completion mode and on the non-coherent board.
#[test]
fn overlapping_windows_through_many_wraps() {
    let n = 50_000u32;
    let input: Vec<u32> = (0..n).collect();
    // 2432-byte answers: whole cache lines, so a non-coherent board needs no
    // padding between landings either.
    let (window, hop) = (608, 450);
    let mut want = Vec::new();
    let mut at = 0usize;
    while at < input.len() {
        let end = (at + window).min(input.len());
        want.extend_from_slice(&input[at..end]);
        if end == input.len() {
            break;
        }
        at += hop;
    }
    for model in [MemoryModel::Coherent, MemoryModel::NonCoherent] {
        for c in [Completion::Poll, Completion::Yield, Completion::Irq] {
            let (out, stats): (Vec<u32>, _) = pipeline(
                rig(Box::new(Loopback), model),
                cfg(window, hop, window, c),
                input.clone(),
                4096,
                4096,
            )
            .unwrap();
            assert_eq!(out.len(), want.len(), "{model:?} {c:?}");
            assert!(out == want, "{model:?} {c:?}: the stream differs");
            assert_eq!(stats.bytes_copied, 0, "{model:?} {c:?}");
            assert_eq!(stats.bytes_out, 4 * want.len() as u64);
            assert!(stats.windows > 100);
        }
    }
}

/// The FIR core: windows overlapping by taps - 1, the source leading with
/// taps - 1 zeros, give the stream filtered as `dsp::fir::direct` does.
#[test]
fn the_fir_core_filters_a_stream_in_place() {
    let taps: Vec<f32> = (0..31).map(|k| ((k as f32) * 0.3).cos() / 16.0).collect();
    let x: Vec<f32> = (0..40_000).map(|i| ((i as f32) * 0.011).sin()).collect();
    let mut input = vec![0.0f32; taps.len() - 1];
    input.extend_from_slice(&x);
    let r = rig(Box::new(FirCore::new()), MemoryModel::Coherent);
    load_taps(&r.control().unwrap(), &taps).unwrap();
    let hop = 1024;
    let c = StageConfig {
        window: hop + taps.len() - 1,
        hop,
        out_max: hop,
        min_window: taps.len(),
        depth: 4,
        completion: Completion::Poll,
    };
    let (y, stats): (Vec<f32>, _) = pipeline(r, c, input, 8192, 8192).unwrap();
    let want = dmaflow::dsp::fir::direct(&taps, &x);
    assert_eq!(y.len(), want.len());
    for (i, (a, b)) in y.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 1e-5, "sample {i}: {a} vs {b}");
    }
    // The last window was short (its answer ended early), and nothing moved.
    assert_eq!(stats.bytes_copied, 0);
}

/// A core that answers every window early: what arrived is committed, and the
/// next answer is moved down over the gap (counted).
#[test]
fn early_answers_are_committed_and_gaps_closed() {
    let input: Vec<u16> = (0..20_000u16).collect();
    let window = 500;
    let (out, stats): (Vec<u16>, _) = pipeline(
        rig(Box::new(Halver), MemoryModel::Coherent),
        cfg(window, window, window, Completion::Poll),
        input.clone(),
        4096,
        4096,
    )
    .unwrap();
    let want: Vec<u16> = input
        .chunks(window)
        .flat_map(|w| w[..w.len() / 2].to_vec())
        .collect();
    assert!(out == want, "the halves differ");
    assert!(stats.bytes_copied > 0);
}

/// Early answers on a non-coherent board, with the device slow enough that
/// landings are posted well ahead of the answers: the gap-closing copy must
/// never dirty a cache line the device is still writing (a clean of that line
/// would write stale bytes over the device's). Answers of 998 bytes are not
/// whole cache lines, so landings start on their own lines (the padding is
/// closed by the same copy). Coherent and non-coherent give the same stream.
#[test]
fn early_answers_on_a_non_coherent_board_keep_the_stream() {
    let input: Vec<u16> = (0..40_000u32).map(|i| (i * 7 + 3) as u16).collect();
    let window = 500;
    let want: Vec<u16> = input
        .chunks(window)
        .flat_map(|w| w[..w.len() - 1].to_vec())
        .collect();
    for model in [MemoryModel::NonCoherent, MemoryModel::Coherent] {
        let r = dmaflow::rig::Rig::with_model(
            8 << 20,
            dmaflow::sim::Clock::Rate {
                mhz: 1.0,
                bytes_per_cycle: 4.0,
            },
            true,
            dmaflow::rig::policy_for(model),
            model,
            Box::new(OneShort),
        )
        .unwrap();
        r.board.set_random_eviction(Some(common::EVICTION_SEED));
        let (out, stats): (Vec<u16>, _) = pipeline(
            r,
            cfg(window, window, window, Completion::Poll),
            input.clone(),
            4096,
            4096,
        )
        .unwrap();
        assert_eq!(out.len(), want.len(), "{model:?}");
        if let Some(i) = out.iter().zip(&want).position(|(a, b)| a != b) {
            panic!("{model:?}: the stream diverges at item {i}");
        }
        assert!(stats.bytes_copied > 0, "{model:?}");
    }
}

/// A core that never answers: the node times out, the graph stops with its
/// error, nothing hangs.
#[test]
fn a_silent_core_stops_the_graph_with_a_timeout() {
    let e = pipeline::<u32, u32>(
        rig(Box::new(Silent), MemoryModel::Coherent),
        cfg(256, 256, 256, Completion::Poll),
        (0..10_000).collect(),
        4096,
        4096,
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("acc") && text.contains("no completion"),
        "{text}"
    );
}

/// Bad set-ups are refused by name before the engine moves.
#[test]
fn bad_setups_are_named_errors() {
    // A window larger than the input queue.
    let e = pipeline::<u32, u32>(
        rig(Box::new(Loopback), MemoryModel::Coherent),
        cfg(100_000, 100, 100, Completion::Poll),
        (0..1000).collect(),
        4096,
        4096,
    )
    .unwrap_err();
    assert!(e.to_string().contains("do not fit the input queue"), "{e}");
    // hop > window.
    let e = pipeline::<u32, u32>(
        rig(Box::new(Loopback), MemoryModel::Coherent),
        cfg(100, 200, 100, Completion::Poll),
        (0..1000).collect(),
        4096,
        4096,
    )
    .unwrap_err();
    assert!(e.to_string().contains("hop 200"), "{e}");
    // An answer longer than the space reserved for it.
    let e = pipeline::<u32, u32>(
        rig(Box::new(Loopback), MemoryModel::Coherent),
        cfg(300, 300, 100, Completion::Poll),
        (0..3000).collect(),
        4096,
        4096,
    )
    .unwrap_err();
    assert!(e.to_string().contains("more than the 100 items"), "{e}");
    // A queue in ordinary memory.
    let mut r = rig(Box::new(Loopback), MemoryModel::Coherent);
    let engine = r.engines.remove(0);
    let mut g = Graph::new();
    let (mut src, ain) = g
        .connect_with_capacity::<u32>(("source", "out"), ("acc", "in"), 1024)
        .unwrap();
    let memory = engine.pool().queue_memory().unwrap();
    let (aout, mut sink) = g
        .connect_in::<u32>(("acc", "out"), ("sink", "in"), 1024, memory)
        .unwrap();
    g.node("source", move || Ok(src.write(&[1, 2, 3])?))
        .unwrap();
    let stats = Arc::new(Mutex::new(StageStats::default()));
    stage::add_node(
        &mut g,
        "acc",
        engine,
        cfg(3, 3, 3, Completion::Poll),
        ain,
        aout,
        stats,
    )
    .unwrap();
    g.node("sink", move || {
        while !sink.peek(1)?.is_empty() {
            sink.consume(1)?;
        }
        Ok(())
    })
    .unwrap();
    let e = g.run().unwrap_err();
    assert!(e.to_string().contains("ordinary memory"), "{e}");
}

/// Runs a one-node graph: source -> `acc` on `engine` -> sink, the input queue
/// in `in_memory`, the output queue in `out_memory`; returns the graph's error.
fn one_node_error(
    engine: dmaflow::rig::SimEngine,
    in_memory: Arc<dyn dmaflow::ring::RegionSource>,
    out_memory: Arc<dyn dmaflow::ring::RegionSource>,
) -> String {
    let mut g = Graph::new();
    let (mut src, ain) = g
        .connect_in::<u32>(("source", "out"), ("acc", "in"), 4096, in_memory)
        .unwrap();
    let (aout, mut sink) = g
        .connect_in::<u32>(("acc", "out"), ("sink", "in"), 4096, out_memory)
        .unwrap();
    g.node("source", move || {
        Ok(src.write(&(0..3000).collect::<Vec<u32>>())?)
    })
    .unwrap();
    let stats = Arc::new(Mutex::new(StageStats::default()));
    stage::add_node(
        &mut g,
        "acc",
        engine,
        cfg(300, 300, 300, Completion::Poll),
        ain,
        aout,
        stats,
    )
    .unwrap();
    g.node("sink", move || {
        while !sink.peek(1)?.is_empty() {
            sink.consume(1)?;
        }
        Ok(())
    })
    .unwrap();
    g.run().unwrap_err().to_string()
}

/// A queue in another board's DMA memory (the same bus addresses would be other
/// memory to this engine) is refused by name, on either side.
#[test]
fn a_queue_in_another_board_s_memory_is_refused() {
    let mut a = rig(Box::new(Loopback), MemoryModel::Coherent);
    let b = rig(Box::new(Loopback), MemoryModel::Coherent);
    let ours = a.engines[0].pool().queue_memory().unwrap();
    let theirs = b.engines[0].pool().queue_memory().unwrap();
    let e = one_node_error(a.engines.remove(0), theirs.clone(), ours.clone());
    assert!(e.contains("input queue is in DMA memory of pool"), "{e}");
    let mut a = rig(Box::new(Loopback), MemoryModel::Coherent);
    let ours = a.engines[0].pool().queue_memory().unwrap();
    let e = one_node_error(a.engines.remove(0), ours, theirs);
    assert!(e.contains("output queue is in DMA memory of pool"), "{e}");
}

/// A node whose device is gone (the fabric stopped: nothing answers any more)
/// stops the graph with a timeout; nothing hangs.
#[test]
fn a_node_whose_device_is_gone_stops_the_graph() {
    let Rig {
        mut engines,
        fabric,
        board,
    } = rig(Box::new(Loopback), MemoryModel::Coherent);
    let memory = engines[0].pool().queue_memory().unwrap();
    drop(fabric);
    let e = one_node_error(engines.remove(0), memory.clone(), memory);
    assert!(e.contains("acc") && e.contains("no completion"), "{e}");
    drop(board);
}

/// An accelerator node (a thread node: it waits on its device) between a
/// source and a sink that are task nodes on the worker pool: the stream
/// comes back whole, the queues in DMA memory shared by both kinds of node.
#[test]
fn an_accelerator_node_runs_between_task_nodes() {
    let input: Vec<u32> = (0..50_000).collect();
    let mut r = rig(Box::new(Loopback), MemoryModel::Coherent);
    let memory = r.engines[0].pool().queue_memory().unwrap();
    let engine = r.engines.remove(0);
    let mut g = Graph::new();
    let (mut src, ain) = g
        .connect_in::<u32>(("source", "out"), ("acc", "in"), 4096, memory.clone())
        .unwrap();
    let (aout, mut sink) = g
        .connect_in::<u32>(("acc", "out"), ("sink", "in"), 4096, memory)
        .unwrap();
    let data = input.clone();
    g.task("source", async move {
        for chunk in data.chunks(777) {
            src.write_async(chunk).await?;
        }
        Ok(())
    })
    .unwrap();
    let stats = Arc::new(Mutex::new(StageStats::default()));
    stage::add_node(
        &mut g,
        "acc",
        engine,
        cfg(608, 608, 608, Completion::Irq),
        ain,
        aout,
        stats,
    )
    .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let put = got.clone();
    g.task("sink", async move {
        loop {
            let s = sink.peek_async(1).await?;
            if s.is_empty() {
                return Ok(());
            }
            put.lock().unwrap().extend_from_slice(s);
            let k = s.len();
            sink.consume(k)?;
        }
    })
    .unwrap();
    common::run_within(g).unwrap();
    drop(r);
    assert!(*got.lock().unwrap() == input, "the stream differs");
}

/// Sixteen windows in flight with sleeping completions: S2MM's interrupts
/// are coalesced (one per four answers). The source writes three windows at
/// a time and then pauses, so most batches end short of the threshold and
/// only the delay timer wakes the node: the stream still comes through whole,
/// in order, on both boards.
#[test]
fn coalesced_answers_come_through_a_trickling_stream() {
    let window = 608usize;
    let mut c = cfg(window, window, window, Completion::Irq);
    c.depth = 16;
    assert_eq!(stage::s2mm_coalescing(&c).threshold, 4);
    let polled = StageConfig {
        completion: Completion::Poll,
        ..c
    };
    assert_eq!(stage::s2mm_coalescing(&polled).threshold, 1);
    let input: Vec<u32> = (0..(40 * window) as u32).collect();
    for model in [MemoryModel::Coherent, MemoryModel::NonCoherent] {
        for completion in [Completion::Irq, Completion::Adaptive] {
            let cfg = StageConfig { completion, ..c };
            let mut rig = rig(Box::new(Loopback), model);
            let memory = rig.engines[0].pool().queue_memory().unwrap();
            let engine = rig.engines.remove(0);
            let mut g = Graph::new();
            let (mut src, ain) = g
                .connect_in::<u32>(("source", "out"), ("acc", "in"), 16384, memory.clone())
                .unwrap();
            let (aout, sink) = g
                .connect_in::<u32>(("acc", "out"), ("sink", "in"), 16384, memory)
                .unwrap();
            let data = input.clone();
            g.node("source", move || {
                for burst in data.chunks(3 * window) {
                    src.write(burst)?;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Ok(())
            })
            .unwrap();
            let stats = Arc::new(Mutex::new(StageStats::default()));
            stage::add_node(&mut g, "acc", engine, cfg, ain, aout, stats.clone()).unwrap();
            let got = common::collect(&mut g, "sink", sink).unwrap();
            g.run().unwrap();
            drop(rig);
            let out = std::mem::take(&mut *got.lock().unwrap());
            assert!(out == input, "{model:?} {completion:?}: the stream differs");
            let s = *stats.lock().unwrap();
            assert_eq!(s.windows, 40, "{model:?} {completion:?}");
            assert_eq!(s.bytes_out, 4 * input.len() as u64);
        }
    }
}
