//! Two-way transfers through the DMA layer on the emulated fabric.

use std::sync::Arc;

use dmaflow::axi::{AxiDma, Config};
use dmaflow::dma::{Completion, Engine, Error, Partition, Proxy};
use dmaflow::mem::{CachePolicy, DmaPool};
use dmaflow::platform::MemoryModel;
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq, SimRegisters};
use dmaflow::sim::{Clock, Fabric};

mod common;
use common::Rng;

struct Rig {
    engine: Engine<SimRegisters, SimIrq>,
    _fabric: Fabric,
    _board: SimBoard,
}

fn rig(policy: CachePolicy) -> Rig {
    rig_on(policy, MemoryModel::Coherent)
}

fn rig_on(policy: CachePolicy, model: MemoryModel) -> Rig {
    let board = SimBoard::with_model(1, 16 << 20, DEFAULT_DDR_BASE, 2, model).unwrap();
    board.set_random_eviction(Some(common::EVICTION_SEED));
    let fabric = Fabric::start(&board, Clock::Unlimited).unwrap();
    fabric
        .set_length_width(Config::default().length_width)
        .unwrap();
    let dma = AxiDma::new(board.registers(0).unwrap(), Config::default()).unwrap();
    let pool = DmaPool::new(Arc::new(board.memory().unwrap()), policy).unwrap();
    let engine = Engine::new(dma, board.irq(0).unwrap(), board.irq(1).unwrap(), pool);
    Rig {
        engine,
        _fabric: fabric,
        _board: board,
    }
}

#[test]
fn zero_copy_and_copy_paths_in_every_mode() {
    // Both policies on the coherent board; explicit maintenance on the
    // non-coherent one (without it that board reads stale data: tests/noncoherent.rs).
    for (policy, model) in [
        (CachePolicy::Coherent, MemoryModel::Coherent),
        (CachePolicy::Explicit, MemoryModel::Coherent),
        (CachePolicy::Explicit, MemoryModel::NonCoherent),
    ] {
        let r = rig_on(policy, model);
        for c in [
            Completion::Poll,
            Completion::Yield,
            Completion::Irq,
            Completion::Adaptive,
        ] {
            for len in [8usize, 640, 64_000] {
                let mut tx = r.engine.pool().alloc::<u8>(len).unwrap();
                for (i, b) in tx.as_mut_slice().iter_mut().enumerate() {
                    *b = (i % 251) as u8;
                }
                let mut rx = r.engine.pool().alloc::<u8>(len).unwrap();
                assert_eq!(r.engine.two_way(&tx, len, &mut rx, c).unwrap(), len);
                assert_eq!(rx.as_slice(), tx.as_slice());
                let data: Vec<u8> = (0..len).map(|i| (i * 3) as u8).collect();
                let mut out = vec![0u8; len];
                assert_eq!(r.engine.write_read(&data, &mut out, c).unwrap(), len);
                assert_eq!(out, data);
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let r = rig(CachePolicy::Coherent);
    let other = rig(CachePolicy::Coherent);
    let tx = other.engine.pool().alloc::<u8>(64).unwrap();
    let mut rx = r.engine.pool().alloc::<u8>(64).unwrap();
    assert!(matches!(
        r.engine.two_way(&tx, 64, &mut rx, Completion::Poll),
        Err(Error::Mem(dmaflow::mem::Error::ForeignBuffer { .. }))
    ));
    let tx = r.engine.pool().alloc::<u8>(64).unwrap();
    assert!(matches!(
        r.engine.two_way(&tx, 0, &mut rx, Completion::Poll),
        Err(Error::Empty)
    ));
    assert!(matches!(
        r.engine.two_way(&tx, 65, &mut rx, Completion::Poll),
        Err(Error::TooLong {
            len: 65,
            capacity: 64
        })
    ));
    let mut out = [0u8; 4];
    assert!(matches!(
        r.engine.write_read(&[], &mut out, Completion::Poll),
        Err(Error::Empty)
    ));
    // Longer than the engine's length register (23 bits): refused, not truncated.
    let big = vec![0u8; 1 << 23];
    let mut out = vec![0u8; 64];
    let e = r.engine.write_read(&big, &mut out, Completion::Poll);
    assert!(
        matches!(e, Err(Error::Axi(dmaflow::axi::Error::TooLong { .. }))),
        "{e:?}"
    );
    // Nothing was left half-started: the next transfer works.
    let mut out = [0u8; 3];
    assert_eq!(
        r.engine
            .write_read(b"abc", &mut out, Completion::Irq)
            .unwrap(),
        3
    );
    assert_eq!(&out, b"abc");
}

#[test]
fn soak_many_transfers_of_random_sizes() {
    let r = rig(CachePolicy::Coherent);
    let mut rng = Rng(0xC0FFEE);
    let mut tx = r.engine.pool().alloc::<u8>(4096).unwrap();
    let mut rx = r.engine.pool().alloc::<u8>(4096).unwrap();
    let transfers = 1_000_000u32;
    for seq in 0..transfers {
        let len = 4 + rng.below(4093);
        let t = tx.as_mut_slice();
        t[..4].copy_from_slice(&seq.to_le_bytes());
        let mut sum = 0u8;
        for (i, b) in t[4..len].iter_mut().enumerate() {
            *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
            sum = sum.wrapping_add(*b);
        }
        let c = [Completion::Poll, Completion::Yield, Completion::Irq][seq as usize % 3];
        let n = r.engine.two_way(&tx, len, &mut rx, c).unwrap();
        assert_eq!(n, len, "transfer {seq}: length");
        let got = rx.as_slice();
        assert_eq!(
            u32::from_le_bytes(got[..4].try_into().unwrap()),
            seq,
            "transfer {seq}: sequence"
        );
        let s = got[4..len].iter().fold(0u8, |a, &b| a.wrapping_add(b));
        assert_eq!(s, sum, "transfer {seq}: checksum");
    }
}

#[test]
fn proxy_driver_thread_copies_through_its_own_buffers() {
    let r = rig_on(CachePolicy::Explicit, MemoryModel::NonCoherent);
    let proxy = Proxy::start(r.engine).unwrap();
    for len in [1usize, 100, 5000, 300] {
        let data: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
        let back = proxy.transfer(data.clone(), len).unwrap();
        assert_eq!(back, data);
    }
    // A receive buffer shorter than the packet: the engine's internal error, named.
    let e = proxy.transfer(vec![1u8; 64], 16).unwrap_err();
    assert!(e.to_string().contains("DMAIntErr"), "{e}");
    assert!(matches!(proxy.transfer(Vec::new(), 16), Err(Error::Empty)));
    // And the next request works.
    assert_eq!(proxy.transfer(vec![9u8; 32], 32).unwrap(), vec![9u8; 32]);
}

/// The kernel-style driver of a coprocessor with two streams (paper 000's
/// background subtraction): both engines' transfers in one request, checked
/// against the software implementation of the algorithm.
#[test]
fn proxy_drives_a_two_stream_coprocessor_as_one() {
    let p = dmaflow::dsp::bgsub::Params::new(64, 6, 12, true).unwrap();
    let n = p.frame_bytes();
    let rig = dmaflow::rig::Rig::new(
        1 << 20,
        Clock::Unlimited,
        false,
        CachePolicy::Explicit,
        Box::new(dmaflow::sim::BgSubCore::new(p)),
    )
    .unwrap();
    let dmaflow::rig::Rig {
        engines,
        fabric: _fabric,
        board: _board,
    } = rig;
    let proxy = Proxy::start_all(engines).unwrap();
    let mut rng = Rng(7);
    for _ in 0..3 {
        let frame: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
        let background: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
        let (mut want_bg, mut want_mask) = (vec![0u8; n], vec![0u8; n]);
        dmaflow::dsp::bgsub::step(&p, &frame, &background, &mut want_bg, &mut want_mask).unwrap();
        let got = proxy
            .transfer_all(vec![(frame, n), (background, n)])
            .unwrap();
        assert_eq!(got, vec![want_bg, want_mask]);
    }
    // One job for two engines is refused by name, and the proxy goes on.
    let e = proxy.transfer(vec![1u8; n], n).unwrap_err();
    assert!(matches!(e, Error::Lanes { got: 1, engines: 2 }), "{e}");
    assert!(e.to_string().contains("2 DMA engines"), "{e}");
    assert!(
        proxy
            .transfer_all(vec![(vec![0; n], n), (vec![0; n], n)])
            .is_ok()
    );
}

#[test]
fn messages_in_blocks_with_single_and_double_buffering() {
    let r = rig_on(CachePolicy::Explicit, MemoryModel::NonCoherent);
    let data: Vec<u8> = (0..100_000).map(|i| (i % 241) as u8).collect();
    for partition in [
        Partition::Unique,
        Partition::Blocks(4096),
        Partition::Blocks(999),
    ] {
        for depth in [1, 2, 3] {
            for c in [Completion::Poll, Completion::Irq] {
                let mut out = vec![0u8; data.len()];
                let n = r
                    .engine
                    .send_message(&data, &mut out, partition, depth, c)
                    .unwrap();
                assert_eq!(n, data.len(), "{partition:?} depth {depth}");
                assert!(
                    out == data,
                    "{partition:?} depth {depth} {c:?}: data differs"
                );
            }
        }
    }
    let mut out = vec![0u8; 10];
    assert!(matches!(
        r.engine
            .send_message(&data, &mut out, Partition::Unique, 2, Completion::Poll),
        Err(Error::TooLong { .. })
    ));
    let mut out = vec![0u8; data.len()];
    assert!(matches!(
        r.engine
            .send_message(&data, &mut out, Partition::Blocks(0), 2, Completion::Poll),
        Err(Error::Empty)
    ));
    assert!(matches!(
        r.engine
            .send_message(&data, &mut out, Partition::Unique, 0, Completion::Poll),
        Err(Error::Empty)
    ));
}
