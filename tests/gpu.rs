//! The GPU layer on a real device: every host memory kind under every completion
//! mode moves its bytes, messages in blocks on two streams arrive whole, and the
//! kernels give the CPU references' bytes. Each test returns at once on a
//! machine without a CUDA device (the absent-device paths are tested in the
//! library and the CLI); `scripts/gpu-bench.sh run` runs them on a GPU machine.

use std::sync::Arc;
use std::time::Duration;

use dmaflow::dma::{Completion, Partition};
use dmaflow::dsp::{bgsub, conv};
use dmaflow::gpu::engine::Process;
use dmaflow::gpu::kernels::{self, Bgsub};
use dmaflow::gpu::{Gpu, GpuEngine, HostBuf, HostKind, Kernels};

/// The device and its kernels, or `None` where there is no device.
fn device() -> Option<(Gpu, Arc<Kernels>)> {
    if dmaflow::gpu::driver::count() == 0 {
        eprintln!("no CUDA device: skipped");
        return None;
    }
    let gpu = Gpu::open(0).expect("device 0 opens");
    let k = Kernels::load(&gpu).expect("the kernels compile and load");
    Some((gpu, Arc::new(k)))
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn every_memory_kind_and_completion_mode_moves_its_bytes() {
    let Some((gpu, k)) = device() else { return };
    let mut engine = GpuEngine::new(&gpu, 1 << 20, Some(k), Duration::from_secs(10)).unwrap();
    for kind in HostKind::ALL {
        for c in [Completion::Poll, Completion::Yield, Completion::Irq] {
            for (len, process) in [(8, Process::Echo), (100_003, Process::Invert)] {
                let mut tx = HostBuf::new(&gpu, kind, len).unwrap();
                let mut rx = HostBuf::new(&gpu, kind, len).unwrap();
                let data = pattern(len, len as u8);
                tx.as_mut_slice().copy_from_slice(&data);
                let n = engine.two_way(&mut tx, &mut rx, len, process, c).unwrap();
                assert_eq!(n, len);
                let want: Vec<u8> = match process {
                    Process::Echo => data,
                    Process::Invert => data.iter().map(|b| !b).collect(),
                };
                assert!(
                    rx.as_slice() == want,
                    "{} {c:?} {len} B {process:?}",
                    kind.name()
                );
                let t = engine.last_timing();
                assert!(!t.tx.is_zero() && !t.rx.is_zero(), "device timing {t:?}");
            }
        }
    }
    // The proxy mode is refused by name, nothing started.
    let mut tx = HostBuf::new(&gpu, HostKind::Pinned, 64).unwrap();
    let mut rx = HostBuf::new(&gpu, HostKind::Pinned, 64).unwrap();
    let e = engine
        .two_way(&mut tx, &mut rx, 64, Process::Echo, Completion::Proxy)
        .unwrap_err();
    assert!(e.to_string().contains("proxy"), "{e}");
}

#[test]
fn a_message_in_blocks_on_two_streams_arrives_whole() {
    let Some((gpu, k)) = device() else { return };
    let len = 8 << 20;
    let mut engine = GpuEngine::new(&gpu, 1 << 20, Some(k), Duration::from_secs(10)).unwrap();
    let mut tx = HostBuf::new(&gpu, HostKind::Pinned, len).unwrap();
    let mut rx = HostBuf::new(&gpu, HostKind::Pinned, len).unwrap();
    let data = pattern(len, 3);
    tx.as_mut_slice().copy_from_slice(&data);
    for depth in [1, 2] {
        for block in [1 << 20, 300_001] {
            rx.as_mut_slice().fill(0);
            let n = engine
                .send_message(
                    &mut tx,
                    &mut rx,
                    len,
                    Partition::Blocks(block),
                    depth,
                    Process::Invert,
                    Completion::Irq,
                )
                .unwrap();
            assert_eq!(n, len);
            assert!(
                rx.as_slice().iter().zip(&data).all(|(r, d)| *r == !*d),
                "depth {depth}, {block}-byte blocks"
            );
        }
    }
    // A block larger than the engine's buffers is refused before anything starts.
    let e = engine
        .send_message(
            &mut tx,
            &mut rx,
            len,
            Partition::Unique,
            2,
            Process::Echo,
            Completion::Poll,
        )
        .unwrap_err();
    assert!(matches!(e, dmaflow::gpu::Error::TooLong { .. }), "{e}");
}

#[test]
fn the_kernels_give_the_cpu_references_bytes() {
    let Some((_gpu, k)) = device() else { return };
    for filter in [true, false] {
        let p = bgsub::Params::new(97, 61, 20, filter).unwrap();
        let n = p.frame_bytes();
        let frames = bgsub::synthetic_frames(&p, 6, 11);
        let mut cpu = bgsub::BackgroundSubtractor::new(p);
        let mut gpu = Bgsub::new(k.clone(), p).unwrap();
        let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
        for (i, f) in frames.chunks_exact(n).enumerate() {
            cpu.process(f, &mut a).unwrap();
            gpu.process(f, &mut b).unwrap();
            assert!(a == b, "frame {i}, filter {filter}");
        }
    }
    let layers = conv::roshambo(5);
    let (mut input, mut h, mut w) = (conv::input_frame(5), 64, 64);
    for (i, layer) in layers.iter().enumerate() {
        let (want, oh, ow) = layer.forward(&input, h, w);
        let (got, gh, gw) = kernels::conv_forward(&k, layer, &input, h, w).unwrap();
        assert_eq!((gh, gw), (oh, ow));
        assert!(got == want, "layer {}", i + 1);
        (input, h, w) = (want, oh, ow);
    }
}

#[test]
fn the_convolution_coprocessor_call_computes_each_layer() {
    let Some((gpu, k)) = device() else { return };
    let mut engine = GpuEngine::new(&gpu, 1 << 20, Some(k), Duration::from_secs(10)).unwrap();
    let (mut maps, mut h, mut w) = (conv::input_frame(3), 64, 64);
    for (i, layer) in conv::roshambo(3).iter().enumerate() {
        let packet = layer.encode(&maps, h, w);
        let (want, oh, ow) = layer.forward(&maps, h, w);
        for c in [Completion::Poll, Completion::Yield, Completion::Irq] {
            let mut tx = HostBuf::new(&gpu, HostKind::Pinned, packet.len()).unwrap();
            let mut rx = HostBuf::new(&gpu, HostKind::Pinned, 2 * want.len()).unwrap();
            tx.as_mut_slice().copy_from_slice(&packet);
            let n = engine.layer(&mut tx, packet.len(), &mut rx, c).unwrap();
            assert_eq!(n, 2 * want.len());
            assert!(
                conv::from_bytes(rx.as_slice()) == want,
                "layer {} {c:?}",
                i + 1
            );
        }
        (maps, h, w) = (want, oh, ow);
    }
}
