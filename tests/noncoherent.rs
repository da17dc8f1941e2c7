//! The non-coherent emulated board: CPU and device views of DMA memory apart, as
//! on a Zynq HP port. Explicit cache maintenance moves every byte right; without
//! it the CPU reads stale data, and the board names each device read of a line the
//! CPU wrote but did not clean.

use std::sync::Arc;

use dmaflow::axi::{AxiDma, Config};
use dmaflow::dma::{Completion, Engine, PacketRing, Partition};
use dmaflow::mem::{CachePolicy, DmaPool};
use dmaflow::platform::MemoryModel;
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq, SimRegisters};
use dmaflow::sim::{Clock, Fabric};

struct Rig {
    engine: Engine<SimRegisters, SimIrq>,
    board: SimBoard,
    fabric: Fabric,
}

fn rig(sg: bool, policy: CachePolicy) -> Rig {
    let board =
        SimBoard::with_model(1, 4 << 20, DEFAULT_DDR_BASE, 2, MemoryModel::NonCoherent).unwrap();
    let fabric = Fabric::start_with(&board, Clock::Unlimited, sg).unwrap();
    fabric
        .set_length_width(Config::default().length_width)
        .unwrap();
    let dma = AxiDma::new(board.registers(0).unwrap(), Config::default()).unwrap();
    let memory = Arc::new(board.memory().unwrap());
    let pool = DmaPool::new(memory, policy).unwrap();
    let engine = Engine::new(dma, board.irq(0).unwrap(), board.irq(1).unwrap(), pool);
    Rig {
        engine,
        board,
        fabric,
    }
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

#[test]
fn explicit_maintenance_moves_every_byte() {
    let r = rig(false, CachePolicy::Explicit);
    assert_eq!(r.board.model(), MemoryModel::NonCoherent);
    // Dirty lines are evicted over what the device writes the moment it writes:
    // the driver's invalidate before S2MM starts leaves none to evict.
    r.board.set_dirty_eviction(true);
    let e = &r.engine;
    for (k, c) in [Completion::Poll, Completion::Yield, Completion::Irq]
        .into_iter()
        .enumerate()
    {
        for len in [1usize, 64, 100, 4096, 70_000] {
            let mut tx = e.pool().alloc::<u8>(len).unwrap();
            tx.as_mut_slice().copy_from_slice(&data(len, k as u8));
            // The receive buffer holds dirty lines of its own: they must not be
            // written back over what the device writes.
            let mut rx = e.pool().alloc::<u8>(len).unwrap();
            rx.as_mut_slice().fill(0xEE);
            assert_eq!(e.two_way(&tx, len, &mut rx, c).unwrap(), len);
            assert_eq!(rx.as_slice(), tx.as_slice(), "{c:?} {len}");
            let d = data(len, 99);
            let mut out = vec![0u8; len];
            assert_eq!(e.write_read(&d, &mut out, c).unwrap(), len);
            assert_eq!(out, d);
        }
        let d = data(50_000, 7);
        let mut out = vec![0u8; 50_000];
        e.send_message(&d, &mut out, Partition::Blocks(4096), 2, c)
            .unwrap();
        assert_eq!(out, d);
    }
    assert_eq!(r.board.uncleaned_reads(), Vec::<u64>::new());
    assert_eq!(r.fabric.violations(), Vec::new());
}

#[test]
fn explicit_maintenance_keeps_packet_rings_right() {
    let r = rig(true, CachePolicy::Explicit);
    for c in [Completion::Poll, Completion::Irq] {
        let mut ring = PacketRing::new(&r.engine, 8, 512, 2, c).unwrap();
        // Many turns of the descriptor rings: descriptors are cleaned after the
        // driver writes them and invalidated before it reads their status.
        for k in 0..100usize {
            let p = data(1 + k * 5 % 512, k as u8);
            ring.send(&p).unwrap();
            let mut out = [0u8; 512];
            let n = ring.recv(&mut out).unwrap();
            assert_eq!(&out[..n], &p[..], "{c:?} packet {k}");
        }
    }
    assert_eq!(r.board.uncleaned_reads(), Vec::<u64>::new());
    assert_eq!(r.fabric.violations(), Vec::new());
}

#[test]
fn without_maintenance_the_cpu_reads_stale_data_and_the_board_says_why() {
    let r = rig(false, CachePolicy::Coherent);
    let e = &r.engine;
    let len = 256;
    let mut tx = e.pool().alloc::<u8>(len).unwrap();
    tx.as_mut_slice().copy_from_slice(&data(len, 1));
    let mut rx = e.pool().alloc::<u8>(len).unwrap();
    rx.as_mut_slice().fill(0xEE);
    assert_eq!(e.two_way(&tx, len, &mut rx, Completion::Poll).unwrap(), len);
    // The device read DRAM, where the CPU's writes never arrived, and the CPU
    // reads its own stale lines, where the device's writes never arrived.
    assert!(
        rx.as_slice().iter().all(|&b| b == 0xEE),
        "stale data expected"
    );
    assert_eq!(r.board.uncleaned_reads(), vec![tx.bus_addr()]);
}

#[test]
fn an_evicted_dirty_line_overwrites_what_the_device_wrote() {
    let r = rig(false, CachePolicy::Explicit);
    r.board.set_dirty_eviction(true);
    let e = &r.engine;
    let mut tx = e.pool().alloc::<u8>(128).unwrap();
    tx.as_mut_slice().copy_from_slice(&data(128, 3));
    tx.sync_for_device(128).unwrap();
    // A receive buffer the CPU dirtied and handed over without the
    // clean-and-invalidate (through the raw driver, as a buggy driver would).
    let mut rx = e.pool().alloc::<u8>(128).unwrap();
    rx.as_mut_slice().fill(0x11);
    let dma = e.dma();
    // SAFETY: both buffers outlive the transfer, which is collected below.
    unsafe { dma.start(dmaflow::axi::Channel::S2mm, rx.bus_addr(), 128, false) }.unwrap();
    // SAFETY: as above.
    unsafe { dma.start(dmaflow::axi::Channel::Mm2s, tx.bus_addr(), 128, false) }.unwrap();
    let how = dmaflow::axi::Wait::Poll;
    dma.wait(dmaflow::axi::Channel::Mm2s, &how).unwrap();
    dma.wait(dmaflow::axi::Channel::S2mm, &how).unwrap();
    rx.sync_for_cpu(128).unwrap();
    // The eviction wrote the CPU's stale bytes over the device's data.
    assert!(rx.as_slice().iter().all(|&b| b == 0x11));
}

#[test]
fn starting_s2mm_again_without_invalidating_is_named() {
    let r = rig(false, CachePolicy::Explicit);
    let e = &r.engine;
    let dma = e.dma();
    let tx = e.pool().alloc::<u8>(256).unwrap();
    let rx = e.pool().alloc::<u8>(256).unwrap();
    tx.sync_for_device(256).unwrap();
    rx.sync_for_cpu(256).unwrap();
    let how = dmaflow::axi::Wait::Poll;
    let round = || -> Result<(), dmaflow::axi::Error> {
        // SAFETY: both buffers outlive the transfer, which is collected here.
        unsafe { dma.start(dmaflow::axi::Channel::S2mm, rx.bus_addr(), 256, false) }?;
        // SAFETY: as above.
        unsafe { dma.start(dmaflow::axi::Channel::Mm2s, tx.bus_addr(), 256, false) }?;
        dma.wait(dmaflow::axi::Channel::Mm2s, &how)?;
        dma.wait(dmaflow::axi::Channel::S2mm, &how)?;
        Ok(())
    };
    round().unwrap();
    // The CPU never invalidated what S2MM wrote: the next S2MM start says so.
    let err = round().unwrap_err();
    assert!(
        err.to_string().contains("before the CPU invalidated"),
        "{err}"
    );
    // With the invalidate, it goes on.
    rx.sync_for_cpu(256).unwrap();
    round().unwrap();
}
