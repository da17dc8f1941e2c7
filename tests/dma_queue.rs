//! Queues in DMA memory: mirrored for the CPU, reachable by the device at the
//! bus addresses they report; and the FIR coprocessor loaded over its own
//! register window.

use dmaflow::accel::fir::{self, load_taps};
use dmaflow::dma::Completion;
use dmaflow::mem::CachePolicy;
use dmaflow::rig::Rig;
use dmaflow::ring::{Builder, Error as RingError};
use dmaflow::sim::{Clock, FirCore, Loopback};

fn rig() -> Rig {
    Rig::new(
        4 << 20,
        Clock::Unlimited,
        true,
        CachePolicy::Coherent,
        Box::new(Loopback),
    )
    .unwrap()
}

/// Items written through many wraps come out in order, and the device finds
/// them at the bus addresses the reader reports (one span, or two at the wrap).
#[test]
fn a_queue_in_dma_memory_is_where_its_spans_say() {
    let rig = rig();
    let pool = rig.engines[0].pool().clone();
    let free = pool.free_bytes();
    let (mut w, mut r) = Builder::<u32>::new(1000)
        .in_memory(pool.queue_memory().unwrap())
        .build()
        .unwrap();
    let cap = w.capacity();
    assert!(
        pool.free_bytes() < free,
        "the queue's range comes from the pool"
    );
    let device = rig.board.device().unwrap();
    let mut next = 0u32;
    let mut seen = 0u32;
    let mut wrapped = 0;
    for round in 0..40 {
        let n = 300 + round * 7;
        let s = w.reserve(n).unwrap();
        for x in s.iter_mut() {
            *x = next;
            next += 1;
        }
        w.commit(n).unwrap();
        let window = r.peek(n).unwrap()[..n].to_vec();
        assert_eq!(window[0], seen);
        let spans = r.dma_spans(0, n).unwrap();
        assert_eq!(spans.iter().map(|s| s.bytes).sum::<usize>(), 4 * n);
        if spans.len() == 2 {
            wrapped += 1;
            assert_eq!(spans[1].offset, 0, "the second span starts the range");
        }
        // The device reads what the reader sees.
        let mut bytes = Vec::new();
        for s in &spans {
            let mut b = vec![0u8; s.bytes];
            device.read_ddr(s.bus, &mut b).unwrap();
            bytes.extend(b);
        }
        let from_device: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(from_device, window, "round {round}");
        r.consume(n).unwrap();
        seen += n as u32;
    }
    assert!(
        wrapped > 3,
        "the test should wrap the queue ({wrapped} wraps)"
    );
    assert!(matches!(
        r.dma_spans(1, cap),
        Err(RingError::SpanTooLarge { .. })
    ));
    // Growing takes a new range from the same DMA memory.
    let before = pool.free_bytes();
    w.grow(4 * cap).unwrap();
    assert!(pool.free_bytes() < before);
    let s = w.reserve(3).unwrap();
    s.copy_from_slice(&[7, 8, 9]);
    w.commit(3).unwrap();
    assert_eq!(r.peek(3).unwrap(), &[7, 8, 9]);
    assert_eq!(r.dma_spans(0, 3).unwrap().len(), 1);
    drop((w, r));
    assert_eq!(pool.free_bytes(), free, "the ranges go back to the pool");
}

/// An ordinary queue has no device addresses.
#[test]
fn an_ordinary_queue_has_no_spans() {
    let (_w, r) = dmaflow::ring::channel::<u8>(64).unwrap();
    assert!(matches!(r.dma_spans(0, 1), Err(RingError::NotDmaMemory)));
}

/// The FIR core takes its taps over its register window and filters a packet
/// into its valid convolution; a window that is not a FIR core is refused.
#[test]
fn the_fir_core_is_loaded_over_its_register_window() {
    let rig = Rig::new(
        1 << 20,
        Clock::Unlimited,
        false,
        CachePolicy::Coherent,
        Box::new(FirCore::new()),
    )
    .unwrap();
    let taps = [0.5f32, -1.0, 0.25, 2.0];
    load_taps(&rig.control().unwrap(), &taps).unwrap();
    let e = &rig.engines[0];
    let x: Vec<f32> = (0..100).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut tx = e.pool().alloc::<u8>(400).unwrap();
    tx.as_mut_slice()
        .copy_from_slice(&x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    let mut rx = e.pool().alloc::<u8>(400).unwrap();
    let n = e.two_way(&tx, 400, &mut rx, Completion::Poll).unwrap();
    // 100 samples, 4 taps: 97 outputs, the stream's TLAST ends the packet.
    assert_eq!(n, 97 * 4);
    let y: Vec<f32> = rx.as_slice()[..n]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let full = dmaflow::dsp::fir::direct(&taps, &x);
    for (i, (a, b)) in y.iter().zip(&full[3..]).enumerate() {
        assert!((a - b).abs() < 1e-5, "sample {i}: {a} vs {b}");
    }
    // An engine's window is not a FIR core; bad taps are refused by name.
    assert!(matches!(
        load_taps(&rig.board.registers(0).unwrap(), &taps),
        Err(fir::Error::NotFir(_))
    ));
    let regs = rig.control().unwrap();
    assert!(matches!(
        load_taps(&regs, &[]),
        Err(fir::Error::Taps { taps: 0 })
    ));
    assert!(matches!(
        load_taps(&regs, &vec![1.0; fir::MAX_TAPS + 1]),
        Err(fir::Error::Taps { .. })
    ));
    assert!(matches!(
        load_taps(&regs, &[1.0, f32::NAN]),
        Err(fir::Error::NonFiniteTap(1))
    ));
}
