//! Packet rings on a scatter-gather engine: every completion mode, cache policy
//! and data path moves every packet intact and in order, through many turns of
//! the descriptor rings; bad input is refused by name.

use dmaflow::axi::Coalescing;
use dmaflow::dma::{Completion, Error, PacketRing};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::MemoryModel;
use dmaflow::rig::Rig;
use dmaflow::sim::{Clock, Loopback};
use std::time::{Duration, Instant};

/// An emulated board of 4 MiB with a loopback stream core and an unlimited
/// clock, its cache policy and memory model as given.
fn loopback_rig(policy: CachePolicy, model: MemoryModel) -> Rig {
    Rig::with_model(
        4 << 20,
        Clock::Unlimited,
        true,
        policy,
        model,
        Box::new(Loopback),
    )
    .unwrap()
}

fn payload(seq: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq * 31 + i * 7) as u8).collect()
}

#[test]
fn every_mode_moves_every_packet_in_order() {
    for (policy, model) in [
        (CachePolicy::Coherent, MemoryModel::Coherent),
        (CachePolicy::Explicit, MemoryModel::Coherent),
        (CachePolicy::Explicit, MemoryModel::NonCoherent),
    ] {
        let rig = loopback_rig(policy, model);
        rig.board.set_random_eviction(Some(0x5EED_CAC4E));
        let engine = &rig.engines[0];
        for c in [Completion::Poll, Completion::Yield, Completion::Irq] {
            let mut ring = PacketRing::new(engine, 8, 1500, 3, c).unwrap();
            let (mut sent, mut received) = (0, 0);
            // 200 packets through 9-descriptor rings: many turns, random sizes.
            let len = |seq: usize| 1 + (seq * 977) % 1500;
            while received < 200 {
                while sent < 200 && sent - received < 8 {
                    if sent % 2 == 0 {
                        ring.send(&payload(sent, len(sent))).unwrap();
                    } else {
                        let p = payload(sent, len(sent));
                        ring.send_with(p.len(), |b| b.copy_from_slice(&p)).unwrap();
                    }
                    sent += 1;
                }
                let mut out = vec![0u8; 1500];
                let n = ring.recv(&mut out).unwrap();
                assert_eq!(
                    &out[..n],
                    &payload(received, len(received))[..],
                    "{c:?} {policy:?} packet {received}"
                );
                received += 1;
                while let Some(ok) = ring
                    .try_recv_with(|p| p == payload(received, len(received)).as_slice())
                    .unwrap()
                {
                    assert!(ok, "{c:?} {policy:?} packet {received}");
                    received += 1;
                }
            }
        }
        assert_eq!(rig.fabric.violations(), Vec::new(), "{policy:?} {model:?}");
    }
}

#[test]
fn bad_input_is_refused_by_name() {
    let rig = Rig::new(
        1 << 20,
        Clock::Unlimited,
        true,
        CachePolicy::Coherent,
        Box::new(Loopback),
    )
    .unwrap();
    let engine = &rig.engines[0];
    assert!(matches!(
        PacketRing::new(engine, 4, 256, 1, Completion::Proxy),
        Err(Error::ProxyOnly)
    ));
    assert!(matches!(
        PacketRing::new(engine, 4, 0, 1, Completion::Poll),
        Err(Error::Empty)
    ));
    let mut ring = PacketRing::new(engine, 4, 256, 1, Completion::Poll).unwrap();
    assert!(matches!(ring.send(&[]), Err(Error::Empty)));
    let e = ring.send(&[0u8; 257]).unwrap_err();
    assert!(e.to_string().contains("257"), "{e}");
    // Waiting with nothing sent ends in a named error, not a hang (asleep on the
    // interrupt, so that other tests keep the CPU meanwhile).
    drop(ring);
    let mut ring = PacketRing::new(engine, 4, 256, 1, Completion::Irq).unwrap();
    let e = ring.recv(&mut [0u8; 256]).unwrap_err();
    assert!(e.to_string().contains("S2MM"), "{e}");
    // A reader buffer too small for the packet is an error that loses nothing:
    // the packet stays queued for a large enough buffer, and the ring goes on.
    drop(ring);
    let mut ring = PacketRing::new(engine, 4, 256, 1, Completion::Poll).unwrap();
    ring.send(&[9u8; 200]).unwrap();
    assert!(matches!(
        ring.recv(&mut [0u8; 10]),
        Err(Error::OutTooShort {
            len: 200,
            capacity: 10
        })
    ));
    ring.send(&[8u8; 100]).unwrap();
    let mut out = [0u8; 256];
    assert_eq!(ring.recv(&mut out).unwrap(), 200);
    assert!(out[..200].iter().all(|&b| b == 9));
    assert_eq!(ring.recv(&mut out).unwrap(), 100);
    assert!(out[..100].iter().all(|&b| b == 8));
}

#[test]
fn a_direct_mode_engine_has_no_ring() {
    let rig = Rig::new(
        1 << 20,
        Clock::Unlimited,
        false,
        CachePolicy::Coherent,
        Box::new(Loopback),
    )
    .unwrap();
    let e = PacketRing::new(&rig.engines[0], 4, 256, 1, Completion::Poll)
        .err()
        .unwrap();
    assert!(e.to_string().contains("scatter-gather"), "{e}");
}

/// Computes on whole packets: the output (the packet reversed) streams out only
/// after the whole input has arrived.
struct Reverse;

impl dmaflow::sim::StreamProcessor for Reverse {
    fn cut_through(&self) -> bool {
        false
    }
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        outputs[0].extend(inputs[0].iter().rev());
    }
}

#[test]
fn a_store_and_compute_core_fires_in_scatter_gather_on_a_clocked_link() {
    let clock = Clock::Rate {
        mhz: 100.0,
        bytes_per_cycle: 4.0,
    };
    let rig = Rig::new(
        1 << 20,
        clock,
        true,
        CachePolicy::Coherent,
        Box::new(Reverse),
    )
    .unwrap();
    for c in [Completion::Poll, Completion::Irq] {
        let mut ring = PacketRing::new(&rig.engines[0], 4, 4096, 1, c).unwrap();
        for k in 0..20 {
            let p = payload(k, 1000 + k * 100);
            ring.send(&p).unwrap();
            let mut out = vec![0u8; 4096];
            let n = ring.recv(&mut out).unwrap();
            let want: Vec<u8> = p.iter().rev().copied().collect();
            assert_eq!(&out[..n], &want[..], "{c:?} packet {k}");
        }
    }
}

/// A steady stream of packets keeps the device thread busy: it must not go to
/// sleep (and need a wake-up) per packet. Counted, not timed. Yields are
/// printed but not asserted: how often an idle device yields depends on how
/// long the scheduler keeps the driver thread off its core, and a yield costs
/// no wake-up.
#[test]
fn a_steady_stream_costs_far_fewer_device_sleeps_than_packets() {
    for (clock, bytes) in [
        (
            Clock::Rate {
                mhz: 150.0,
                bytes_per_cycle: 8.0,
            },
            4096,
        ),
        (Clock::Unlimited, 64),
    ] {
        let rig = Rig::new(
            8 << 20,
            clock,
            true,
            CachePolicy::Coherent,
            Box::new(Loopback),
        )
        .unwrap();
        let _placed = rig.dedicate_core().unwrap();
        let engine = &rig.engines[0];
        let mut ring = PacketRing::new(engine, 64, bytes, 8, Completion::Poll).unwrap();
        let total = 4000usize;
        let (s0, y0) = rig.fabric.device_sleeps();
        let (mut sent, mut received) = (0, 0);
        while received < total {
            while sent < total && sent - received < 64 {
                ring.send_with(bytes, |p| p.fill(sent as u8)).unwrap();
                sent += 1;
            }
            let seq = received;
            assert!(
                ring.recv_with(|p| p.iter().all(|&b| b == seq as u8))
                    .unwrap()
            );
            received += 1;
        }
        let (s1, y1) = rig.fabric.device_sleeps();
        eprintln!(
            "{clock:?} {bytes} B: {} sleeps, {} yields for {total} packets",
            s1 - s0,
            y1 - y0
        );
        assert!(
            (s1 - s0) * 20 < total as u64,
            "{} device sleeps for {total} packets",
            s1 - s0
        );
    }
}

/// With two or more cores the device thread gets one to itself and the caller
/// the rest; the caller gets its cores back when the placement ends.
#[test]
fn the_device_thread_gets_a_core_of_its_own() {
    let rig = Rig::new(
        1 << 20,
        Clock::Unlimited,
        true,
        CachePolicy::Coherent,
        Box::new(Loopback),
    )
    .unwrap();
    let before = dmaflow::platform::cpu::allowed_cores(None).unwrap();
    {
        let placement = rig.dedicate_core().unwrap();
        match placement.device_core {
            Some(d) => {
                assert_eq!(rig.fabric.device_cores().unwrap(), vec![d]);
                let host = dmaflow::platform::cpu::allowed_cores(None).unwrap();
                assert!(!host.contains(&d) && !host.is_empty(), "{host:?}");
                assert_eq!(host, placement.host_cores);
                assert!(placement.describe().contains(&format!("core {d}")));
            }
            None => {
                assert_eq!(before.len(), 1);
                assert!(placement.describe().contains("one core"));
            }
        }
        // Transfers still run with the threads placed.
        let mut ring = PacketRing::new(&rig.engines[0], 4, 64, 2, Completion::Irq).unwrap();
        ring.send(&[7u8; 64]).unwrap();
        let mut out = [0u8; 64];
        assert_eq!(ring.recv(&mut out).unwrap(), 64);
        assert_eq!(out, [7u8; 64]);
    }
    assert_eq!(dmaflow::platform::cpu::allowed_cores(None).unwrap(), before);
}

#[test]
fn bursts_keep_order_and_content_across_ring_wraps() {
    for (policy, model) in [
        (CachePolicy::Coherent, MemoryModel::Coherent),
        (CachePolicy::Explicit, MemoryModel::NonCoherent),
    ] {
        let rig = loopback_rig(policy, model);
        let engine = &rig.engines[0];
        let mut ring = PacketRing::new(engine, 8, 256, 4, Completion::Poll).unwrap();
        assert_eq!(ring.slots(), 8);
        let total = 300usize;
        // The length of each packet sent (one per burst: the API's).
        let mut lens: Vec<usize> = Vec::new();
        let (mut sent, mut received) = (0usize, 0usize);
        // Bursts of 1 to 7 wanted against 8 slots: the 9-descriptor rings
        // wrap at every point of a burst; single receives mixed in.
        let mut turn = 0usize;
        while received < total {
            turn += 1;
            let want = (1 + turn % 7).min(total - sent).min(8 - (sent - received));
            if want > 0 {
                let l = 1 + (sent * 53) % 256;
                let from = sent;
                let n = ring
                    .send_burst_with(want, l, |i, b| b.copy_from_slice(&payload(from + i, l)))
                    .unwrap();
                assert!(n >= 1 && n <= want, "{n} of {want} sent");
                lens.extend(std::iter::repeat_n(l, n));
                sent += n;
            }
            if turn.is_multiple_of(5) {
                let mut out = vec![0u8; 256];
                let n = ring.recv(&mut out).unwrap();
                let want = payload(received, lens[received]);
                assert_eq!(&out[..n], &want[..], "{policy:?} packet {received}");
                received += 1;
                continue;
            }
            let mut seq = received;
            let got = ring
                .recv_burst_with(sent - received, |p| {
                    assert_eq!(p, &payload(seq, lens[seq])[..], "{policy:?} packet {seq}");
                    seq += 1;
                })
                .unwrap();
            assert!(got >= 1 && got <= sent - received, "{got} received");
            assert_eq!(seq, received + got);
            received = seq;
        }
        assert_eq!((sent, received), (total, total));
        assert_eq!(rig.fabric.violations(), Vec::new(), "{policy:?}");
    }
}

#[test]
fn a_coalesced_ring_still_completes_its_last_partial_batch() {
    // A slow link (64 B in 6.4 ms), so that the wait sleeps before the
    // packets complete.
    let slow = Clock::Rate {
        mhz: 0.01,
        bytes_per_cycle: 1.0,
    };
    let rig = Rig::new(
        4 << 20,
        slow,
        true,
        CachePolicy::Coherent,
        Box::new(Loopback),
    )
    .unwrap();
    let engine = &rig.engines[0];
    // An interrupt per 8 packets, or 40 ticks of the delay timer after the
    // last of fewer: 3 packets wake the interrupt wait only by the delay.
    let coalescing = Coalescing {
        threshold: 8,
        delay: 40,
    };
    let mut ring =
        PacketRing::with_coalescing(engine, 16, 64, 16, Completion::Irq, coalescing).unwrap();
    for round in 0..3usize {
        let n = ring
            .send_burst_with(3, 64, |i, b| b.copy_from_slice(&payload(round * 3 + i, 64)))
            .unwrap();
        assert_eq!(n, 3);
        let mut seq = round * 3;
        let mut got = 0;
        while got < 3 {
            got += ring
                .recv_burst_with(3 - got, |p| {
                    assert_eq!(p, &payload(seq, 64)[..], "packet {seq}");
                    seq += 1;
                })
                .unwrap();
        }
    }
    assert_eq!(rig.fabric.violations(), Vec::new());
    drop(ring);
    // A threshold of 0 is refused by name.
    let zero = Coalescing {
        threshold: 0,
        delay: 0,
    };
    match PacketRing::with_coalescing(engine, 16, 64, 16, Completion::Irq, zero) {
        Err(e) => assert!(e.to_string().contains("IRQThreshold 0"), "{e}"),
        Ok(_) => panic!("an IRQThreshold of 0 was accepted"),
    }
}

#[test]
fn arrived_sees_a_whole_batch_without_taking_it() {
    for (policy, model) in [
        (CachePolicy::Coherent, MemoryModel::Coherent),
        (CachePolicy::Explicit, MemoryModel::NonCoherent),
    ] {
        let rig = loopback_rig(policy, model);
        let engine = &rig.engines[0];
        let mut ring = PacketRing::new(engine, 8, 64, 4, Completion::Poll).unwrap();
        let device0 = rig.fabric.device_cpu_time().unwrap();
        // Batches of 5 through 9-descriptor rings: the batch's last buffer
        // wraps around the end of the ring at every offset.
        for turn in 0..12usize {
            assert!(!ring.arrived(0), "{policy:?}");
            assert!(!ring.arrived(1), "{policy:?} turn {turn}: nothing sent");
            // A burst sends as many as there are free TX buffers (those are
            // reclaimed only past a threshold): the rest in the next.
            let mut sent = 0;
            while sent < 5 {
                let from = turn * 5 + sent;
                sent += ring
                    .send_burst_with(5 - sent, 64, |i, b| {
                        b.copy_from_slice(&payload(from + i, 64))
                    })
                    .unwrap();
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while !ring.arrived(5) {
                assert!(
                    Instant::now() < deadline,
                    "{policy:?} turn {turn}: no batch"
                );
                std::hint::spin_loop();
            }
            // Packets never sent have not arrived; more than the buffers
            // handed to S2MM is never true.
            assert!(!ring.arrived(6), "{policy:?} turn {turn}");
            assert!(!ring.arrived(9), "{policy:?} turn {turn}");
            // Looking took nothing: one pass reads all five, in order.
            let mut seq = turn * 5;
            let got = ring
                .recv_burst_with(8, |p| {
                    assert_eq!(p, &payload(seq, 64)[..], "{policy:?} packet {seq}");
                    seq += 1;
                })
                .unwrap();
            assert_eq!(got, 5, "{policy:?} turn {turn}");
        }
        // The emulated device did the moving, on its own thread.
        let device = rig.fabric.device_cpu_time().unwrap() - device0;
        assert!(device > Duration::ZERO, "{policy:?}: {device:?}");
        assert_eq!(rig.fabric.violations(), Vec::new(), "{policy:?}");
    }
}
