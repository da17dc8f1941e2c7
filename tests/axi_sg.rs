//! Scatter-gather mode: descriptor chains in DMA memory, driver against the model.

use std::sync::Arc;

use dmaflow::axi::regs::{DESC_STATUS, DESC_STS_RXEOF};
use dmaflow::axi::{AxiDma, Channel, Config, DESC_WORDS, Error, Wait};
use dmaflow::mem::{CachePolicy, DmaPool};
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq, SimRegisters};
use dmaflow::sim::{Clock, Fabric};

struct Rig {
    dma: AxiDma<SimRegisters>,
    pool: DmaPool,
    irq: [SimIrq; 2],
    _fabric: Fabric,
    _board: SimBoard,
}

fn rig(sg: bool, length_width: u32) -> Rig {
    clocked_rig(sg, length_width, Clock::Unlimited)
}

fn clocked_rig(sg: bool, length_width: u32, clock: Clock) -> Rig {
    let board = SimBoard::new(1, 8 << 20, DEFAULT_DDR_BASE, 2).unwrap();
    let fabric = Fabric::start_with(&board, clock, sg).unwrap();
    fabric.set_length_width(length_width).unwrap();
    let dma = AxiDma::new(
        board.registers(0).unwrap(),
        Config {
            length_width,
            ..Config::default()
        },
    )
    .unwrap();
    let pool = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
    let irq = [board.irq(0).unwrap(), board.irq(1).unwrap()];
    Rig {
        dma,
        pool,
        irq,
        _fabric: fabric,
        _board: board,
    }
}

#[test]
fn a_packet_gathered_from_segments_lands_in_scattered_buffers() {
    let r = rig(true, 23);
    for mode in 0..3 {
        let irq = mode == 2;
        let mut tx_ring = r.pool.alloc::<u32>(8 * DESC_WORDS).unwrap();
        let mut rx_ring = r.pool.alloc::<u32>(8 * DESC_WORDS).unwrap();
        let mut parts = Vec::new();
        for (k, len) in [100usize, 3000, 7].into_iter().enumerate() {
            let mut b = r.pool.alloc::<u8>(len).unwrap();
            b.as_mut_slice()
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (i + 40 * k) as u8);
            parts.push(b);
        }
        let sent: Vec<u8> = parts.iter().flat_map(|b| b.as_slice().to_vec()).collect();
        let rx: Vec<_> = [2000usize, 2000]
            .iter()
            .map(|&n| r.pool.alloc::<u8>(n).unwrap())
            .collect();
        let rx_segs: Vec<(u64, usize)> = rx.iter().map(|b| (b.bus_addr(), b.len())).collect();
        let tx_segs: Vec<(u64, usize)> = parts.iter().map(|b| (b.bus_addr(), b.len())).collect();
        // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
        let rc = unsafe { r.dma.sg_start(Channel::S2mm, &mut rx_ring, &rx_segs, irq) }.unwrap();
        // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
        let tc = unsafe { r.dma.sg_start(Channel::Mm2s, &mut tx_ring, &tx_segs, irq) }.unwrap();
        assert_eq!((tc.descriptors, rc.descriptors), (3, 2));
        let (w0, w1) = match mode {
            0 => (Wait::Poll, Wait::Poll),
            1 => (Wait::Yield, Wait::Yield),
            _ => (Wait::Irq(&r.irq[0]), Wait::Irq(&r.irq[1])),
        };
        assert_eq!(
            r.dma.sg_wait(Channel::Mm2s, &tx_ring, tc, &w0).unwrap(),
            vec![100, 3000, 7]
        );
        let got = r.dma.sg_wait(Channel::S2mm, &rx_ring, rc, &w1).unwrap();
        assert_eq!(got, vec![2000, 1107], "bytes per S2MM descriptor");
        let received: Vec<u8> = rx[0]
            .as_slice()
            .iter()
            .chain(&rx[1].as_slice()[..1107])
            .copied()
            .collect();
        assert_eq!(received, sent);
    }
}

#[test]
fn transfers_longer_than_the_length_register_are_split() {
    let r = rig(true, 10); // at most 1023 bytes per descriptor
    let mut tx_ring = r.pool.alloc::<u32>(8 * DESC_WORDS).unwrap();
    let mut rx_ring = r.pool.alloc::<u32>(8 * DESC_WORDS).unwrap();
    let mut tx = r.pool.alloc::<u8>(5000).unwrap();
    tx.as_mut_slice()
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = (i * 7) as u8);
    let rx = r.pool.alloc::<u8>(5000).unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let rc = unsafe {
        r.dma
            .sg_start(Channel::S2mm, &mut rx_ring, &[(rx.bus_addr(), 5000)], false)
    }
    .unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let tc = unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut tx_ring, &[(tx.bus_addr(), 5000)], false)
    }
    .unwrap();
    assert_eq!((tc.descriptors, rc.descriptors), (5, 5));
    assert_eq!(
        r.dma
            .sg_wait(Channel::Mm2s, &tx_ring, tc, &Wait::Poll)
            .unwrap()
            .iter()
            .sum::<usize>(),
        5000
    );
    assert_eq!(
        r.dma
            .sg_wait(Channel::S2mm, &rx_ring, rc, &Wait::Poll)
            .unwrap()
            .iter()
            .sum::<usize>(),
        5000
    );
    assert_eq!(rx.as_slice(), tx.as_slice());
    // Too many pieces for the ring.
    let mut small = r.pool.alloc::<u32>(2 * DESC_WORDS).unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    match unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut small, &[(tx.bus_addr(), 5000)], false)
    } {
        Err(Error::RingFull {
            needed, capacity, ..
        }) => assert_eq!((needed, capacity), (5, 2)),
        other => panic!("expected RingFull, got {other:?}"),
    }
}

#[test]
fn sg_errors_are_named_and_the_engine_recovers() {
    let r = rig(true, 23);
    let mut tx_ring = r.pool.alloc::<u32>(4 * DESC_WORDS).unwrap();
    let mut rx_ring = r.pool.alloc::<u32>(4 * DESC_WORDS).unwrap();
    // A buffer address outside DDR.
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let tc = unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut tx_ring, &[(0x40, 64)], false)
    }
    .unwrap();
    let e = r
        .dma
        .sg_wait(Channel::Mm2s, &tx_ring, tc, &Wait::Poll)
        .unwrap_err();
    assert!(e.to_string().contains("DMADecErr"), "{e}");
    // A packet longer than the S2MM descriptors: the chain's descriptor fills
    // (Cmplt without RXEOF) and the channel waits at the tail for more (PG021:
    // no error); the next chain halts the channel, which flushes the rest.
    let tx = r.pool.alloc::<u8>(256).unwrap();
    let rx = r.pool.alloc::<u8>(100).unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let rc = unsafe {
        r.dma
            .sg_start(Channel::S2mm, &mut rx_ring, &[(rx.bus_addr(), 100)], false)
    }
    .unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let tc = unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut tx_ring, &[(tx.bus_addr(), 256)], false)
    }
    .unwrap();
    r.dma
        .sg_wait(Channel::Mm2s, &tx_ring, tc, &Wait::Poll)
        .unwrap();
    let got = r
        .dma
        .sg_wait(Channel::S2mm, &rx_ring, rc, &Wait::Poll)
        .unwrap();
    assert_eq!(got, vec![100]);
    let status = rx_ring.load_word((DESC_STATUS / 4) as usize).unwrap();
    assert_eq!(
        status & DESC_STS_RXEOF,
        0,
        "the packet goes on past this buffer"
    );
    // A good transfer works.
    let rx = r.pool.alloc::<u8>(256).unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let rc = unsafe {
        r.dma
            .sg_start(Channel::S2mm, &mut rx_ring, &[(rx.bus_addr(), 256)], false)
    }
    .unwrap();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    let tc = unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut tx_ring, &[(tx.bus_addr(), 256)], false)
    }
    .unwrap();
    r.dma
        .sg_wait(Channel::Mm2s, &tx_ring, tc, &Wait::Poll)
        .unwrap();
    assert_eq!(
        r.dma
            .sg_wait(Channel::S2mm, &rx_ring, rc, &Wait::Poll)
            .unwrap(),
        vec![256]
    );
    // An engine without SG says so.
    let d = rig(false, 23);
    let mut ring = d.pool.alloc::<u32>(DESC_WORDS).unwrap();
    // SAFETY: the engine refuses before touching anything (no SG engine).
    let refused = unsafe {
        d.dma
            .sg_start(Channel::Mm2s, &mut ring, &[(DEFAULT_DDR_BASE, 8)], false)
    };
    assert!(matches!(refused, Err(Error::NoSg(Channel::Mm2s))));
}

#[test]
fn several_packets_land_in_one_s2mm_chain() {
    use dmaflow::axi::regs::{DESC_STATUS, DESC_STS_CMPLT, DESC_STS_RXEOF, DESC_STS_RXSOF};
    let r = rig(true, 23);
    let mut rx_ring = r.pool.alloc::<u32>(4 * DESC_WORDS).unwrap();
    let mut tx_ring = r.pool.alloc::<u32>(4 * DESC_WORDS).unwrap();
    let rx: Vec<_> = (0..4).map(|_| r.pool.alloc::<u8>(1024).unwrap()).collect();
    let segs: Vec<(u64, usize)> = rx.iter().map(|b| (b.bus_addr(), 1024)).collect();
    // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { r.dma.sg_start(Channel::S2mm, &mut rx_ring, &segs, false) }.unwrap();
    // Three packets, one after another, while the S2MM chain stays in flight.
    let lens = [10usize, 1024, 333];
    for (k, &len) in lens.iter().enumerate() {
        let mut tx = r.pool.alloc::<u8>(len).unwrap();
        tx.as_mut_slice().fill(k as u8 + 1);
        // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
        let tc = unsafe {
            r.dma
                .sg_start(Channel::Mm2s, &mut tx_ring, &[(tx.bus_addr(), len)], false)
        }
        .unwrap();
        r.dma
            .sg_wait(Channel::Mm2s, &tx_ring, tc, &Wait::Poll)
            .unwrap();
    }
    let status = |i: usize| {
        rx_ring
            .read_volatile(i * DESC_WORDS + (DESC_STATUS / 4) as usize)
            .unwrap()
    };
    let t0 = std::time::Instant::now();
    while status(2) & DESC_STS_CMPLT == 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "third packet never landed"
        );
        std::hint::spin_loop();
    }
    for (i, &len) in lens.iter().enumerate() {
        let s = status(i);
        assert_eq!(s & DESC_STS_CMPLT, DESC_STS_CMPLT);
        assert_eq!(
            s & (DESC_STS_RXSOF | DESC_STS_RXEOF),
            DESC_STS_RXSOF | DESC_STS_RXEOF,
            "packet {i}"
        );
        assert_eq!((s & 0x3FF_FFFF) as usize, len);
        assert!(rx[i].as_slice()[..len].iter().all(|&b| b == i as u8 + 1));
    }
    assert_eq!(
        status(3) & DESC_STS_CMPLT,
        0,
        "the fourth descriptor is still free"
    );
}

#[test]
fn mm2s_completes_on_a_clocked_link_with_no_s2mm_descriptors() {
    // The stream takes MM2S packets (up to its FIFO) whether or not S2MM has
    // descriptors: each packet's completion comes once its last byte has left
    // at the link's rate, with nothing else for the device to do meanwhile.
    let r = clocked_rig(
        true,
        23,
        Clock::Rate {
            mhz: 100.0,
            bytes_per_cycle: 4.0,
        },
    );
    let mut tx_ring = r.pool.alloc::<u32>(4 * DESC_WORDS).unwrap();
    for (k, len) in [64usize << 10, 4096, 64].into_iter().enumerate() {
        let tx = r.pool.alloc::<u8>(len).unwrap();
        let t0 = std::time::Instant::now();
        // SAFETY: the buffers and descriptors live until the chain is waited for or the engine is recovered, and the engine is halted before the rig drops them.
        let tc = unsafe {
            r.dma
                .sg_start(Channel::Mm2s, &mut tx_ring, &[(tx.bus_addr(), len)], false)
        }
        .unwrap();
        let got = r.dma.sg_wait(Channel::Mm2s, &tx_ring, tc, &Wait::Poll);
        assert_eq!(got.unwrap(), vec![len], "packet {k}");
        // 400 MB/s: the packet cannot have left before len / rate.
        assert!(
            t0.elapsed().as_secs_f64() >= len as f64 / 400e6,
            "packet {k}"
        );
    }
}

/// An engine built with scatter-gather has no direct register mode (PG021):
/// a direct-mode start is refused by name, before any register is written,
/// and scatter-gather works as before.
#[test]
fn direct_mode_on_a_scatter_gather_engine_is_refused() {
    let r = rig(true, 23);
    let buf = r.pool.alloc::<u8>(64).unwrap();
    // SAFETY: refused before the engine is touched; `buf` outlives the call.
    let e = unsafe { r.dma.start(Channel::Mm2s, buf.bus_addr(), 64, false) }.unwrap_err();
    assert!(
        matches!(e, dmaflow::axi::Error::SgOnly(Channel::Mm2s)),
        "{e}"
    );
    assert!(e.to_string().contains("no direct register mode"), "{e}");
    // The direct-mode engine of the other rig takes the same start.
    let direct = rig(false, 23);
    let b = direct.pool.alloc::<u8>(64).unwrap();
    // SAFETY: `b` lives until the transfer is collected below.
    unsafe { direct.dma.start(Channel::S2mm, b.bus_addr(), 64, false) }.unwrap();
    direct.dma.reset().unwrap();
}

#[test]
fn run_takes_both_channels_into_service_before_any_transfer_and_stop_halts_them() {
    use dmaflow::axi::regs::DMASR_HALTED;
    for sg in [false, true] {
        let r = rig(sg, 23);
        let park = [
            r.pool.alloc::<u32>(DESC_WORDS).unwrap(),
            r.pool.alloc::<u32>(DESC_WORDS).unwrap(),
        ];
        for (i, ch) in [Channel::Mm2s, Channel::S2mm].into_iter().enumerate() {
            assert_ne!(
                r.dma.status(ch).unwrap() & DMASR_HALTED,
                0,
                "halted after reset"
            );
            if sg {
                // SAFETY: no descriptor is parked (refused).
                let refused = unsafe { r.dma.run(ch, true, None) };
                assert!(matches!(refused, Err(Error::NoParkingDescriptor(_))));
            }
            // SAFETY: `park` lives, unchanged, until the transfers below re-arm
            // the channels.
            unsafe { r.dma.run(ch, true, Some(&park[i])) }.unwrap();
            assert_eq!(
                r.dma.status(ch).unwrap() & DMASR_HALTED,
                0,
                "sg={sg}: running"
            );
            // Again: left as it is.
            // SAFETY: as above.
            unsafe { r.dma.run(ch, true, Some(&park[i])) }.unwrap();
        }
        // Nothing was fetched or moved, and the checker saw nothing undefined.
        assert!(
            r._fabric.violations().is_empty(),
            "{:?}",
            r._fabric.violations()
        );
        // A transfer on the running channels.
        let mut tx = r.pool.alloc::<u8>(256).unwrap();
        tx.as_mut_slice().fill(0x5A);
        let rx = r.pool.alloc::<u8>(256).unwrap();
        let w = [Wait::Poll, Wait::Poll];
        if sg {
            let mut rx_ring = r.pool.alloc::<u32>(2 * DESC_WORDS).unwrap();
            let mut tx_ring = r.pool.alloc::<u32>(2 * DESC_WORDS).unwrap();
            // SAFETY: the buffers and rings live until the waits below.
            let rc = unsafe {
                r.dma
                    .sg_start(Channel::S2mm, &mut rx_ring, &[(rx.bus_addr(), 256)], false)
            }
            .unwrap();
            // SAFETY: as above.
            let tc = unsafe {
                r.dma
                    .sg_start(Channel::Mm2s, &mut tx_ring, &[(tx.bus_addr(), 256)], false)
            }
            .unwrap();
            r.dma.sg_wait(Channel::Mm2s, &tx_ring, tc, &w[0]).unwrap();
            r.dma.sg_wait(Channel::S2mm, &rx_ring, rc, &w[1]).unwrap();
        } else {
            // SAFETY: the buffers live until the waits below.
            unsafe { r.dma.start(Channel::S2mm, rx.bus_addr(), 256, false) }.unwrap();
            // SAFETY: as above.
            unsafe { r.dma.start(Channel::Mm2s, tx.bus_addr(), 256, false) }.unwrap();
            assert_eq!(r.dma.wait(Channel::Mm2s, &w[0]).unwrap(), 256);
            assert_eq!(r.dma.wait(Channel::S2mm, &w[1]).unwrap(), 256);
        }
        assert!(rx.as_slice().iter().all(|&b| b == 0x5A));
        for ch in [Channel::Mm2s, Channel::S2mm] {
            r.dma.stop(ch).unwrap();
            assert_ne!(
                r.dma.status(ch).unwrap() & DMASR_HALTED,
                0,
                "sg={sg}: stopped"
            );
        }
        assert!(
            r._fabric.violations().is_empty(),
            "{:?}",
            r._fabric.violations()
        );
    }
}

#[test]
fn a_packet_that_ends_before_the_chain_leaves_no_descriptor_with_the_engine() {
    use dmaflow::axi::regs::DMASR_HALTED;
    let r = rig(true, 23);
    let w = Wait::Poll;
    // One 768-byte receive buffer spread over three descriptors.
    let rx = r.pool.alloc::<u8>(768).unwrap();
    let segs: Vec<_> = (0..3).map(|k| (rx.bus_addr() + 256 * k, 256)).collect();
    let mut rx_ring = r.pool.alloc::<u32>(4 * DESC_WORDS).unwrap();
    let mut tx_ring = r.pool.alloc::<u32>(2 * DESC_WORDS).unwrap();
    let mut a = r.pool.alloc::<u8>(100).unwrap();
    a.as_mut_slice().fill(0xA1);
    // SAFETY: buffers and rings live until the waits below (or the halt).
    let rc = unsafe { r.dma.sg_start(Channel::S2mm, &mut rx_ring, &segs, false) }.unwrap();
    // SAFETY: as above.
    let tc = unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut tx_ring, &[(a.bus_addr(), 100)], false)
    }
    .unwrap();
    r.dma.sg_wait(Channel::Mm2s, &tx_ring, tc, &w).unwrap();
    // The packet ends (RXEOF) in the first descriptor.
    assert_eq!(
        r.dma.sg_wait(Channel::S2mm, &rx_ring, rc, &w).unwrap(),
        [100]
    );
    assert_ne!(
        r.dma.status(Channel::S2mm).unwrap() & DMASR_HALTED,
        0,
        "halted"
    );
    // A second packet: it must not land in the two descriptors left over.
    let mut b = r.pool.alloc::<u8>(300).unwrap();
    b.as_mut_slice().fill(0xB2);
    // SAFETY: as above.
    let tc = unsafe {
        r.dma
            .sg_start(Channel::Mm2s, &mut tx_ring, &[(b.bus_addr(), 300)], false)
    }
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(rx.as_slice()[..100].iter().all(|&x| x == 0xA1));
    assert!(
        rx.as_slice()[100..].iter().all(|&x| x == 0),
        "the engine wrote a buffer handed back"
    );
    // It waits in the stream for the next chain, whole.
    let rx2 = r.pool.alloc::<u8>(512).unwrap();
    // SAFETY: as above.
    let rc = unsafe {
        r.dma
            .sg_start(Channel::S2mm, &mut rx_ring, &[(rx2.bus_addr(), 512)], false)
    }
    .unwrap();
    r.dma.sg_wait(Channel::Mm2s, &tx_ring, tc, &w).unwrap();
    assert_eq!(
        r.dma.sg_wait(Channel::S2mm, &rx_ring, rc, &w).unwrap(),
        [300]
    );
    assert!(rx2.as_slice()[..300].iter().all(|&x| x == 0xB2));
}
