//! The emulated AXI DMA against PG021, driven by raw register reads and writes
//! (not through `dmaflow::axi`), so that what is checked is the IP's behaviour as
//! any driver sees it.

mod common;
use common::Poke;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmaflow::axi::regs::*;
use dmaflow::mem::{CachePolicy, DmaBuf, DmaPool};
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimRegisters};
use dmaflow::platform::{IrqLine, RegisterSpace};
use dmaflow::sim::{Clock, Fabric, Profile};

struct Board {
    regs: SimRegisters,
    pool: DmaPool,
    fabric: Fabric,
    board: SimBoard,
}

fn board(sg: bool, clock: Clock) -> Board {
    let board = SimBoard::new(1, 4 << 20, DEFAULT_DDR_BASE, 2).unwrap();
    let fabric = Fabric::start_with(&board, clock, sg).unwrap();
    Board {
        regs: board.registers(0).unwrap(),
        pool: DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap(),
        fabric,
        board,
    }
}

/// Polls register `at` until `done` says so; fails after a second.
fn until(regs: &SimRegisters, at: usize, what: &str, done: impl Fn(u32) -> bool) -> u32 {
    let t0 = Instant::now();
    loop {
        let v = regs.read(at).unwrap();
        if done(v) {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(1), "{what}: {v:#010x}");
        std::thread::yield_now();
    }
}

fn reset(regs: &SimRegisters) {
    regs.poke(MM2S + DMACR, DMACR_RESET).unwrap();
    until(regs, MM2S + DMACR, "reset", |v| v & DMACR_RESET == 0);
}

#[test]
fn direct_mode_idle_and_halt_follow_pg021() {
    let b = board(false, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    let mut tx = b.pool.alloc::<u8>(64).unwrap();
    tx.as_mut_slice().fill(3);
    let rx = b.pool.alloc::<u8>(64).unwrap();
    for ch in [MM2S, S2MM] {
        assert_eq!(r.read(ch + DMACR).unwrap(), 0x0001_0002, "reset value");
        assert_eq!(
            r.read(ch + DMASR).unwrap() & (DMASR_HALTED | DMASR_IDLE),
            DMASR_HALTED
        );
        r.poke(ch + DMACR, DMACR_RS).unwrap();
        // PYNQ keeps a "first transfer" flag for this: Idle is 0 after RS until
        // the first transfer completes.
        let sr = r.read(ch + DMASR).unwrap();
        assert_eq!(sr & (DMASR_HALTED | DMASR_IDLE), 0, "after RS: {sr:#x}");
    }
    r.poke(S2MM + ADDR, rx.bus_addr() as u32).unwrap();
    r.poke(S2MM + LENGTH, 64).unwrap();
    r.poke(MM2S + ADDR, tx.bus_addr() as u32).unwrap();
    r.poke(MM2S + LENGTH, 64).unwrap();
    for ch in [MM2S, S2MM] {
        let sr = until(r, ch + DMASR, "completion", |v| v & DMASR_IOC_IRQ != 0);
        assert_ne!(sr & DMASR_IDLE, 0, "Idle sets on completion");
    }
    assert_eq!(rx.as_slice(), tx.as_slice());
    // Clearing RS halts; Idle reads 0 while halted.
    r.poke(MM2S + DMACR, 0).unwrap();
    let sr = until(r, MM2S + DMASR, "halt", |v| v & DMASR_HALTED != 0);
    assert_eq!(sr & DMASR_IDLE, 0);
}

#[test]
fn a_halt_flushes_what_was_pending() {
    // 1 MB/s: a 2000-byte transfer takes 2 ms, long enough to halt within.
    let b = board(
        false,
        Clock::Rate {
            mhz: 1.0,
            bytes_per_cycle: 1.0,
        },
    );
    let r = &b.regs;
    reset(r);
    let tx = b.pool.alloc::<u8>(2000).unwrap();
    let mut rx = b.pool.alloc::<u8>(2000).unwrap();
    rx.as_mut_slice().fill(0xEE);
    for ch in [S2MM, MM2S] {
        r.poke(ch + DMACR, DMACR_RS).unwrap();
    }
    r.poke(S2MM + ADDR, rx.bus_addr() as u32).unwrap();
    r.poke(S2MM + LENGTH, 2000).unwrap();
    r.poke(S2MM + DMACR, 0).unwrap();
    until(r, S2MM + DMASR, "halt", |v| v & DMASR_HALTED != 0);
    // The halted channel's transfer is gone: data sent now lands nowhere, and
    // no completion is ever raised for it.
    r.poke(MM2S + ADDR, tx.bus_addr() as u32).unwrap();
    r.poke(MM2S + LENGTH, 2000).unwrap();
    until(r, MM2S + DMASR, "MM2S", |v| v & DMASR_IOC_IRQ != 0);
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(r.read(S2MM + DMASR).unwrap() & DMASR_IOC_IRQ, 0);
    assert!(rx.as_slice().iter().all(|&b| b == 0xEE));
}

#[test]
fn errors_are_sticky_until_a_reset() {
    let b = board(false, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    r.poke(MM2S + DMACR, DMACR_RS).unwrap();
    r.poke(MM2S + ADDR, 0x40).unwrap(); // no memory there
    r.poke(MM2S + LENGTH, 64).unwrap();
    let sr = until(r, MM2S + DMASR, "error", |v| v & DMASR_ERR_IRQ != 0);
    assert_ne!(sr & DMASR_DMA_DEC_ERR, 0);
    assert_ne!(sr & DMASR_HALTED, 0);
    // RS = 1 does not resume a channel with an error latched.
    r.poke(MM2S + DMACR, DMACR_RS).unwrap();
    let sr = r.read(MM2S + DMASR).unwrap();
    assert_eq!(
        sr & (DMASR_HALTED | DMASR_DMA_DEC_ERR),
        DMASR_HALTED | DMASR_DMA_DEC_ERR
    );
    reset(r);
    let sr = r.read(MM2S + DMASR).unwrap();
    assert_eq!(sr & DMASR_ERR_MASK, 0);
    r.poke(MM2S + DMACR, DMACR_RS).unwrap();
    assert_eq!(r.read(MM2S + DMASR).unwrap() & DMASR_HALTED, 0);
}

/// Writes descriptor `i` of `ring`: `len` bytes at `addr`, next `next`.
fn descriptor(ring: &mut DmaBuf<u32>, i: usize, next: u64, addr: u64, len: u32, control: u32) {
    let w = i * 16;
    ring.write_volatile(w + (DESC_NXTDESC / 4) as usize, next as u32);
    ring.write_volatile(w + (DESC_NXTDESC_MSB / 4) as usize, (next >> 32) as u32);
    ring.write_volatile(w + (DESC_BUFFER_ADDRESS / 4) as usize, addr as u32);
    ring.write_volatile(
        w + (DESC_BUFFER_ADDRESS_MSB / 4) as usize,
        (addr >> 32) as u32,
    );
    ring.write_volatile(w + (DESC_CONTROL / 4) as usize, len | control);
    ring.write_volatile(w + (DESC_STATUS / 4) as usize, 0);
}

fn status(ring: &DmaBuf<u32>, i: usize) -> u32 {
    ring.load_word(i * 16 + (DESC_STATUS / 4) as usize).unwrap()
}

/// Starts channel `ch` at the ring's first descriptor (halted, as PG021 wants).
fn arm(r: &SimRegisters, ch: usize, ring: &DmaBuf<u32>) {
    r.poke(ch + CURDESC, ring.bus_addr() as u32).unwrap();
    r.poke(ch + CURDESC_MSB, 0).unwrap();
    r.poke(ch + DMACR, DMACR_RS).unwrap();
}

#[test]
fn every_taildesc_write_restarts_the_engine() {
    let b = board(true, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    // A one-descriptor self-ring per channel, re-posted after each completion.
    let mut txr = b.pool.alloc::<u32>(16).unwrap();
    let mut rxr = b.pool.alloc::<u32>(16).unwrap();
    let mut tx = b.pool.alloc::<u8>(256).unwrap();
    let rx = b.pool.alloc::<u8>(256).unwrap();
    arm(r, MM2S, &txr);
    arm(r, S2MM, &rxr);
    for k in 0..20u8 {
        tx.as_mut_slice().fill(k);
        let (t, x) = (txr.bus_addr(), rxr.bus_addr());
        descriptor(&mut rxr, 0, x, rx.bus_addr(), 256, 0);
        descriptor(
            &mut txr,
            0,
            t,
            tx.bus_addr(),
            256,
            DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
        );
        r.poke(S2MM + TAILDESC, x as u32).unwrap();
        r.poke(MM2S + TAILDESC, t as u32).unwrap();
        let t0 = Instant::now();
        while status(&rxr, 0) & DESC_STS_CMPLT == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "re-post {k} never completed"
            );
            std::thread::yield_now();
        }
        assert!(rx.as_slice().iter().all(|&v| v == k), "re-post {k}");
        until(r, MM2S + DMASR, "MM2S idle", |v| v & DMASR_IDLE != 0);
    }
    // Ping-pong on a two-descriptor ring, each re-posted alone (a tail that
    // moves one descriptor at a time, writes arriving back to back).
    reset(r);
    let mut txr = b.pool.alloc::<u32>(32).unwrap();
    let mut rxr = b.pool.alloc::<u32>(32).unwrap();
    let rxb: Vec<_> = (0..2).map(|_| b.pool.alloc::<u8>(128).unwrap()).collect();
    let txb: Vec<_> = (0..2)
        .map(|i| {
            let mut v = b.pool.alloc::<u8>(128).unwrap();
            v.as_mut_slice().fill(10 + i as u8);
            v
        })
        .collect();
    let (t, x) = (txr.bus_addr(), rxr.bus_addr());
    arm(r, MM2S, &txr);
    arm(r, S2MM, &rxr);
    for k in 0..40usize {
        let i = k % 2;
        let d = 64 * i as u64;
        descriptor(
            &mut rxr,
            i,
            x + 64 * (1 - i as u64),
            rxb[i].bus_addr(),
            128,
            0,
        );
        descriptor(
            &mut txr,
            i,
            t + 64 * (1 - i as u64),
            txb[i].bus_addr(),
            128,
            DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
        );
        r.poke(S2MM + TAILDESC, (x + d) as u32).unwrap();
        r.poke(MM2S + TAILDESC, (t + d) as u32).unwrap();
        let t0 = Instant::now();
        while status(&rxr, i) & DESC_STS_CMPLT == 0 {
            assert!(t0.elapsed() < Duration::from_secs(1), "ping-pong {k} hung");
            std::thread::yield_now();
        }
        assert!(rxb[i].as_slice().iter().all(|&v| v == 10 + i as u8));
    }
}

#[test]
fn descriptor_pointers_and_idle_in_scatter_gather() {
    // 1 MB/s: a 4000-byte packet takes 4 ms.
    let b = board(
        true,
        Clock::Rate {
            mhz: 1.0,
            bytes_per_cycle: 1.0,
        },
    );
    let r = &b.regs;
    reset(r);
    // Bits [5:0] of the descriptor pointers read as zero.
    r.poke(MM2S + CURDESC, 0x1000_007F).unwrap();
    assert_eq!(r.read(MM2S + CURDESC).unwrap(), 0x1000_0040);
    let mut txr = b.pool.alloc::<u32>(32).unwrap();
    let tx = b.pool.alloc::<u8>(4000).unwrap();
    let t = txr.bus_addr();
    descriptor(
        &mut txr,
        0,
        t + 64,
        tx.bus_addr(),
        4000,
        DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
    );
    // The second descriptor points outside memory: DMADecErr there.
    descriptor(&mut txr, 1, t, 0x40, 64, DESC_CTRL_TXSOF | DESC_CTRL_TXEOF);
    arm(r, MM2S, &txr);
    // PG021: TAILDESC bits [5:0] are reserved; the IP takes the write and
    // ignores them. Even the strict checker accepts it (a driver written for
    // the IP runs unchanged) and only records it.
    r.poke(MM2S + TAILDESC, (t + 64) as u32 | 0x3).unwrap();
    assert!(
        b.fabric
            .violations()
            .iter()
            .any(|v| v.to_string().contains("TAILDESC not 64-byte aligned")),
        "{:?}",
        b.fabric.violations()
    );
    // Idle clears at the TAILDESC write itself.
    assert_eq!(r.read(MM2S + DMASR).unwrap() & DMASR_IDLE, 0);
    assert_eq!(r.read(MM2S + TAILDESC).unwrap(), (t + 64) as u32);
    let sr = until(r, MM2S + DMASR, "error", |v| v & DMASR_ERR_IRQ != 0);
    assert_ne!(sr & DMASR_DMA_DEC_ERR, 0, "{sr:#x}");
    assert_eq!(sr & DMASR_IDLE, 0);
    // CURDESC holds the failing descriptor.
    assert_eq!(r.read(MM2S + CURDESC).unwrap(), (t + 64) as u32);
    let whats: Vec<_> = b.fabric.violations().iter().map(|v| v.what).collect();
    assert_eq!(
        whats,
        [
            "TAILDESC not 64-byte aligned (bits [5:0] are ignored)",
            "a buffer or descriptor outside DMA memory (DECERR)",
        ]
    );
}

#[test]
fn the_strict_checker_names_undefined_register_accesses() {
    // 1 MB/s: transfers stay in flight long enough to be written over.
    let b = board(
        false,
        Clock::Rate {
            mhz: 1.0,
            bytes_per_cycle: 1.0,
        },
    );
    let r = &b.regs;
    reset(r);
    let rx = b.pool.alloc::<u8>(4000).unwrap();
    r.poke(S2MM + DMACR, DMACR_RS).unwrap();
    r.poke(S2MM + ADDR, rx.bus_addr() as u32).unwrap();
    r.poke(S2MM + LENGTH, 4000).unwrap();
    // A second LENGTH while the first transfer is in flight.
    let e = r.poke(S2MM + LENGTH, 100).unwrap_err();
    assert!(e.to_string().contains("LENGTH written while"), "{e}");
    let v = b.fabric.violations();
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].window, v[0].register, v[0].value),
        (0, S2MM + LENGTH, 100)
    );

    // CURDESC while a scatter-gather channel runs a chain.
    let b = board(
        true,
        Clock::Rate {
            mhz: 1.0,
            bytes_per_cycle: 1.0,
        },
    );
    let r = &b.regs;
    reset(r);
    let mut txr = b.pool.alloc::<u32>(16).unwrap();
    let tx = b.pool.alloc::<u8>(4000).unwrap();
    let t = txr.bus_addr();
    descriptor(
        &mut txr,
        0,
        t,
        tx.bus_addr(),
        4000,
        DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
    );
    arm(r, MM2S, &txr);
    r.poke(MM2S + TAILDESC, t as u32).unwrap();
    let e = r.poke(MM2S + CURDESC, t as u32).unwrap_err();
    assert!(e.to_string().contains("CURDESC written while"), "{e}");
}

#[test]
fn one_fabric_per_board() {
    let b = board(false, Clock::Unlimited);
    let second = Fabric::start(&b.board, Clock::Unlimited);
    let e = second.err().expect("a second fabric on the same board");
    assert!(e.to_string().contains("already attached"), "{e}");
}

#[test]
fn s2mm_out_of_descriptors_waits_for_more() {
    let b = board(true, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    let mut txr = b.pool.alloc::<u32>(16).unwrap();
    let mut rxr = b.pool.alloc::<u32>(48).unwrap();
    let mut tx = b.pool.alloc::<u8>(256).unwrap();
    tx.as_mut_slice()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as u8);
    let rx = b.pool.alloc::<u8>(512).unwrap();
    let (t, x) = (txr.bus_addr(), rxr.bus_addr());
    // Three S2MM descriptors of 100 bytes in a ring; only the first is posted.
    for i in 0..3 {
        let next = x + 64 * ((i + 1) % 3) as u64;
        descriptor(&mut rxr, i, next, rx.bus_addr() + 100 * i as u64, 100, 0);
    }
    descriptor(
        &mut txr,
        0,
        t,
        tx.bus_addr(),
        256,
        DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
    );
    arm(r, S2MM, &rxr);
    arm(r, MM2S, &txr);
    r.poke(S2MM + TAILDESC, x as u32).unwrap();
    r.poke(MM2S + TAILDESC, t as u32).unwrap();
    let t0 = Instant::now();
    while status(&rxr, 0) & DESC_STS_CMPLT == 0 {
        assert!(t0.elapsed() < Duration::from_secs(1), "first descriptor");
        std::thread::yield_now();
    }
    let sr = until(r, S2MM + DMASR, "idle at the tail", |v| v & DMASR_IDLE != 0);
    assert_eq!(sr & DMASR_ERR_MASK, 0, "no error: {sr:#x}");
    assert_eq!(
        status(&rxr, 0) & (DESC_STS_RXSOF | DESC_STS_RXEOF),
        DESC_STS_RXSOF
    );
    // Two more descriptors: the rest of the packet lands, ended by RXEOF.
    r.poke(S2MM + TAILDESC, (x + 128) as u32).unwrap();
    let t0 = Instant::now();
    while status(&rxr, 1) & DESC_STS_CMPLT == 0 || status(&rxr, 2) & DESC_STS_CMPLT == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "the rest never landed"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        status(&rxr, 1) & (DESC_STS_RXSOF | DESC_STS_RXEOF | DESC_LENGTH_MASK),
        100
    );
    assert_eq!(
        status(&rxr, 2) & (DESC_STS_RXEOF | DESC_LENGTH_MASK),
        DESC_STS_RXEOF | 56
    );
    assert_eq!(&rx.as_slice()[..256], tx.as_slice());
}

#[test]
fn interrupt_coalescing_with_the_delay_timer() {
    let b = board(true, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    let irq = b.board.irq(0).unwrap();
    let n = 6;
    let mut txr = b.pool.alloc::<u32>(16 * n).unwrap();
    let tx = b.pool.alloc::<u8>(64 * n).unwrap();
    let t = txr.bus_addr();
    for i in 0..n {
        let next = t + 64 * ((i + 1) % n) as u64;
        let buf = tx.bus_addr() + 64 * i as u64;
        descriptor(
            &mut txr,
            i,
            next,
            buf,
            64,
            DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
        );
    }
    // S2MM takes the looped-back packets.
    let mut rxr = b.pool.alloc::<u32>(16 * n).unwrap();
    let rx = b.pool.alloc::<u8>(64 * n).unwrap();
    let x = rxr.bus_addr();
    for i in 0..n {
        let next = x + 64 * ((i + 1) % n) as u64;
        descriptor(&mut rxr, i, next, rx.bus_addr() + 64 * i as u64, 64, 0);
    }
    arm(r, S2MM, &rxr);
    r.poke(S2MM + TAILDESC, (x + 64 * (n as u64 - 1)) as u32)
        .unwrap();
    // MM2S: IOC every 4 packets, the delay timer (10 ticks) for the rest.
    r.poke(MM2S + CURDESC, t as u32).unwrap();
    let cr = DMACR_RS
        | DMACR_IOC_IRQ_EN
        | DMACR_DLY_IRQ_EN
        | (4 << DMACR_IRQ_THRESHOLD_SHIFT)
        | (10 << DMACR_IRQ_DELAY_SHIFT);
    r.poke(MM2S + DMACR, cr).unwrap();
    r.poke(MM2S + TAILDESC, (t + 64 * (n as u64 - 1)) as u32)
        .unwrap();
    // First interrupt: the threshold (4 packets).
    irq.wait(Duration::from_secs(1)).unwrap();
    let sr = r.read(MM2S + DMASR).unwrap();
    assert_ne!(sr & DMASR_IOC_IRQ, 0, "{sr:#x}");
    r.poke(MM2S + DMASR, DMASR_IOC_IRQ).unwrap();
    irq.enable().unwrap();
    // The last two packets are below the threshold: the delay timer reports them.
    irq.wait(Duration::from_secs(1)).unwrap();
    let sr = until(r, MM2S + DMASR, "Dly_Irq", |v| v & DMASR_DLY_IRQ != 0);
    assert_eq!(sr & DMASR_IOC_IRQ, 0, "{sr:#x}");
    assert_eq!(
        (sr >> 16) & 0xFF,
        4,
        "IRQThresholdSts back at the threshold"
    );
    // Dly_Irq is write-1-to-clear like IOC.
    r.poke(MM2S + DMASR, DMASR_DLY_IRQ).unwrap();
    assert_eq!(r.read(MM2S + DMASR).unwrap() & DMASR_DLY_IRQ, 0);
    for i in 0..n {
        assert_ne!(status(&txr, i) & DESC_STS_CMPLT, 0, "descriptor {i}");
    }
}

#[test]
fn cyclic_mode_follows_the_ring_for_ever() {
    let b = board(true, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    // MM2S: two packets in a cyclic ring; S2MM: a plain ring it re-posts.
    let mut txr = b.pool.alloc::<u32>(32).unwrap();
    let mut a = b.pool.alloc::<u8>(32).unwrap();
    a.as_mut_slice().fill(0xA);
    let mut bb = b.pool.alloc::<u8>(32).unwrap();
    bb.as_mut_slice().fill(0xB);
    let t = txr.bus_addr();
    let eop = DESC_CTRL_TXSOF | DESC_CTRL_TXEOF;
    descriptor(&mut txr, 0, t + 64, a.bus_addr(), 32, eop);
    descriptor(&mut txr, 1, t, bb.bus_addr(), 32, eop);
    let slots = 4;
    let mut rxr = b.pool.alloc::<u32>(16 * slots).unwrap();
    let rx: Vec<_> = (0..slots)
        .map(|_| b.pool.alloc::<u8>(32).unwrap())
        .collect();
    let x = rxr.bus_addr();
    for (i, buf) in rx.iter().enumerate() {
        descriptor(
            &mut rxr,
            i,
            x + 64 * ((i + 1) % slots) as u64,
            buf.bus_addr(),
            32,
            0,
        );
    }
    arm(r, S2MM, &rxr);
    r.poke(S2MM + TAILDESC, (x + 64 * (slots as u64 - 1)) as u32)
        .unwrap();
    r.poke(MM2S + CURDESC, t as u32).unwrap();
    r.poke(MM2S + DMACR, DMACR_RS | DMACR_CYCLIC).unwrap();
    // PYNQ starts a cyclic ring with a tail outside it.
    r.poke(MM2S + TAILDESC, (t + 128) as u32).unwrap();
    // Receive 40 packets (20 turns of the two-descriptor ring, whose Cmplt bits
    // are never cleared), re-posting each S2MM descriptor after reading it.
    for k in 0..40usize {
        let i = k % slots;
        let t0 = Instant::now();
        while status(&rxr, i) & DESC_STS_CMPLT == 0 {
            assert!(t0.elapsed() < Duration::from_secs(1), "packet {k}");
            std::thread::yield_now();
        }
        let want = if k % 2 == 0 { 0xA } else { 0xB };
        assert!(rx[i].as_slice().iter().all(|&v| v == want), "packet {k}");
        let next = x + 64 * ((i + 1) % slots) as u64;
        descriptor(&mut rxr, i, next, rx[i].bus_addr(), 32, 0);
        r.poke(S2MM + TAILDESC, (x + 64 * i as u64) as u32).unwrap();
    }
    r.poke(MM2S + DMACR, 0).unwrap();
    until(r, MM2S + DMASR, "halt", |v| v & DMASR_HALTED != 0);
}

#[test]
fn lengths_keep_only_the_configured_width() {
    // Vivado's default: a 14-bit length register (16383 bytes at most).
    let b = board(false, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    let tx = b.pool.alloc::<u8>(20_000).unwrap();
    let rx = b.pool.alloc::<u8>(20_000).unwrap();
    for ch in [MM2S, S2MM] {
        r.poke(ch + DMACR, DMACR_RS).unwrap();
    }
    // A driver that believes the register is wider: the high bits are lost.
    r.poke(S2MM + ADDR, rx.bus_addr() as u32).unwrap();
    r.poke(S2MM + LENGTH, 20_000).unwrap();
    r.poke(MM2S + ADDR, tx.bus_addr() as u32).unwrap();
    r.poke(MM2S + LENGTH, 20_000).unwrap();
    until(r, S2MM + DMASR, "completion", |v| v & DMASR_IOC_IRQ != 0);
    assert_eq!(r.read(S2MM + LENGTH).unwrap(), 20_000 & 0x3FFF);
    // A design built with 23 bits takes it whole.
    b.fabric.set_length_width(23).unwrap();
    assert!(b.fabric.set_length_width(27).is_err());
    for ch in [MM2S, S2MM] {
        r.poke(ch + DMASR, DMASR_IOC_IRQ).unwrap();
    }
    r.poke(S2MM + LENGTH, 20_000).unwrap();
    r.poke(MM2S + LENGTH, 20_000).unwrap();
    until(r, S2MM + DMASR, "completion", |v| v & DMASR_IOC_IRQ != 0);
    assert_eq!(r.read(S2MM + LENGTH).unwrap(), 20_000);
}

#[test]
fn mm2s_completes_once_the_stream_has_taken_the_data() {
    // 1 MB/s: a 20 kB packet takes 20 ms to leave on the stream.
    let b = board(
        true,
        Clock::Rate {
            mhz: 1.0,
            bytes_per_cycle: 1.0,
        },
    );
    b.fabric.set_length_width(23).unwrap();
    let r = &b.regs;
    reset(r);
    let mut txr = b.pool.alloc::<u32>(16).unwrap();
    let tx = b.pool.alloc::<u8>(20_000).unwrap();
    let mut rxr = b.pool.alloc::<u32>(16).unwrap();
    let rx = b.pool.alloc::<u8>(20_000).unwrap();
    let (t, x) = (txr.bus_addr(), rxr.bus_addr());
    descriptor(&mut rxr, 0, x, rx.bus_addr(), 20_000, 0);
    descriptor(
        &mut txr,
        0,
        t,
        tx.bus_addr(),
        20_000,
        DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
    );
    arm(r, S2MM, &rxr);
    arm(r, MM2S, &txr);
    r.poke(S2MM + TAILDESC, x as u32).unwrap();
    let t0 = Instant::now();
    r.poke(MM2S + TAILDESC, t as u32).unwrap();
    while status(&txr, 0) & DESC_STS_CMPLT == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "MM2S never completed"
        );
        std::thread::yield_now();
    }
    // Not when the data was read from memory (at once), but when its last byte
    // left on the modelled link.
    assert!(
        t0.elapsed() >= Duration::from_millis(20),
        "{:?}",
        t0.elapsed()
    );
}

/// Returns each packet with a status stream (its length and its number since
/// the last reset).
#[derive(Default)]
struct Counting {
    packets: u32,
    last_len: u32,
}

impl dmaflow::sim::StreamProcessor for Counting {
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        self.packets += 1;
        self.last_len = inputs[0].len() as u32;
        outputs[0].extend_from_slice(inputs[0]);
    }
    fn app_words(&self, _output: usize) -> Option<dmaflow::sim::AppWords> {
        Some([self.last_len, self.packets, 0xA990, 0, 7])
    }
    fn reset(&mut self) {
        *self = Counting::default();
    }
}

#[test]
fn status_stream_words_and_reset_reach_the_core() {
    let board = SimBoard::new(1, 1 << 20, DEFAULT_DDR_BASE, 2).unwrap();
    let _fabric = Fabric::with_processor(
        &board,
        Clock::Unlimited,
        true,
        Box::new(Counting::default()),
    )
    .unwrap();
    let pool = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
    let r = &board.registers(0).unwrap();
    let send = |lens: &[u32]| -> Vec<[u32; 5]> {
        let n = lens.len();
        let mut txr = pool.alloc::<u32>(16 * n).unwrap();
        let mut rxr = pool.alloc::<u32>(16 * n).unwrap();
        let tx = pool.alloc::<u8>(512 * n).unwrap();
        let rx = pool.alloc::<u8>(512 * n).unwrap();
        let (t, x) = (txr.bus_addr(), rxr.bus_addr());
        for (i, &len) in lens.iter().enumerate() {
            let off = 512 * i as u64;
            let (tn, xn) = (t + 64 * ((i + 1) % n) as u64, x + 64 * ((i + 1) % n) as u64);
            descriptor(&mut rxr, i, xn, rx.bus_addr() + off, 512, 0);
            descriptor(
                &mut txr,
                i,
                tn,
                tx.bus_addr() + off,
                len,
                DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
            );
        }
        arm(r, S2MM, &rxr);
        arm(r, MM2S, &txr);
        r.poke(S2MM + TAILDESC, (x + 64 * (n as u64 - 1)) as u32)
            .unwrap();
        r.poke(MM2S + TAILDESC, (t + 64 * (n as u64 - 1)) as u32)
            .unwrap();
        (0..n)
            .map(|i| {
                let t0 = Instant::now();
                while status(&rxr, i) & DESC_STS_CMPLT == 0 {
                    assert!(t0.elapsed() < Duration::from_secs(1), "packet {i}");
                    std::thread::yield_now();
                }
                std::array::from_fn(|k| rxr.load_word(i * 16 + 8 + k).unwrap())
            })
            .collect()
    };
    reset(r);
    assert_eq!(
        send(&[100, 200]),
        vec![[100, 1, 0xA990, 0, 7], [200, 2, 0xA990, 0, 7]]
    );
    // The soft reset resets the core: its count starts again.
    reset(r);
    assert_eq!(send(&[300]), vec![[300, 1, 0xA990, 0, 7]]);
}

#[test]
fn a_tail_outside_the_chain_is_named() {
    let b = board(true, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    // Two descriptors linked to themselves each: the second is not on the
    // first one's chain.
    let mut txr = b.pool.alloc::<u32>(32).unwrap();
    let tx = b.pool.alloc::<u8>(64).unwrap();
    let t = txr.bus_addr();
    let eop = DESC_CTRL_TXSOF | DESC_CTRL_TXEOF;
    descriptor(&mut txr, 0, t, tx.bus_addr(), 64, eop);
    descriptor(&mut txr, 1, t + 64, tx.bus_addr(), 64, eop);
    arm(r, MM2S, &txr);
    r.poke(MM2S + TAILDESC, (t + 64) as u32).unwrap();
    let t0 = Instant::now();
    while b.fabric.violations().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(1), "not named");
        std::thread::yield_now();
    }
    let v = &b.fabric.violations()[0];
    assert_eq!((v.register, v.value), (MM2S + TAILDESC, t + 64));
    assert_eq!(v.what, "TAILDESC outside the descriptor chain");
}

/// PG021's latencies are part of the modelled device: a small transfer is not
/// free. No 64-byte two-way transfer at the Zynq-7000 HP-port clock completes
/// sooner than MM2S start-up + 64 B on the link + the S2MM write latency after
/// its doorbell (a lower bound the device guarantees, so it holds on a loaded
/// machine too).
#[test]
fn small_transfers_pay_the_pg021_latencies() {
    use dmaflow::dma::{Completion, Engine};
    use dmaflow::sim::Profile;
    let clock = Profile::ZYNQ7000.port;
    let model = clock.two_way(64, false);
    // 16 + 39 cycles of latency in direct mode against 8 of data at 150 MHz.
    assert!(model > clock.duration(64) * 5, "{model:?}");
    let b = board(false, clock);
    let engine = Engine::new(
        dmaflow::axi::AxiDma::new(b.regs, dmaflow::axi::Config::default()).unwrap(),
        b.board.irq(0).unwrap(),
        b.board.irq(1).unwrap(),
        b.pool.clone(),
    );
    let tx: DmaBuf<u8> = b.pool.alloc(64).unwrap();
    let mut rx: DmaBuf<u8> = b.pool.alloc(64).unwrap();
    for _ in 0..200 {
        let t0 = Instant::now();
        assert_eq!(
            engine.two_way(&tx, 64, &mut rx, Completion::Poll).unwrap(),
            64
        );
        let took = t0.elapsed();
        assert!(
            took >= model,
            "a 64 B two-way transfer took {took:?} < {model:?}"
        );
    }
    drop(b.fabric);
}

/// PG021 / Linux xilinx_dma ("Cannot stop channel"): an S2MM channel with
/// descriptors fetched and no stream data does not assert Halted when RS is
/// cleared; a soft reset halts it. The driver's recovery takes that path
/// without waiting out its timeout.
#[test]
fn s2mm_with_descriptors_and_no_data_does_not_halt_until_a_reset() {
    let b = board(true, Clock::Unlimited);
    let r = &b.regs;
    reset(r);
    let mut rxr = b.pool.alloc::<u32>(32).unwrap();
    let rx = b.pool.alloc::<u8>(4096).unwrap();
    let x = rxr.bus_addr();
    descriptor(&mut rxr, 0, x + 64, rx.bus_addr(), 2048, 0);
    descriptor(&mut rxr, 1, x, rx.bus_addr() + 2048, 2048, 0);
    arm(r, S2MM, &rxr);
    r.poke(S2MM + TAILDESC, (x + 64) as u32).unwrap();
    // The device fetches the chain; no stream data comes.
    std::thread::sleep(Duration::from_millis(20));
    r.poke(S2MM + DMACR, 0).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        r.read(S2MM + DMASR).unwrap() & DMASR_HALTED,
        0,
        "Halted does not assert"
    );
    reset(r);
    assert_ne!(r.read(S2MM + DMASR).unwrap() & DMASR_HALTED, 0);
    drop(rx);

    // The driver: recover() resets after a moment, confirmed halted.
    let cfg = dmaflow::axi::Config {
        timeout: Duration::from_secs(30),
        ..dmaflow::axi::Config::default()
    };
    let dma = dmaflow::axi::AxiDma::new(b.board.registers(0).unwrap(), cfg).unwrap();
    let desc = b.pool.alloc::<u32>(4 * 16).unwrap();
    let rx = b.pool.alloc::<u8>(4096).unwrap();
    let mut ring = dma
        .ring_start(dmaflow::axi::Channel::S2mm, desc, false)
        .unwrap();
    for k in 0..2 {
        // SAFETY: `rx` outlives the engine's use: recover() below halts it.
        unsafe { ring.push(rx.bus_addr() + 2048 * k, 2048, dma.max_len()) }.unwrap();
    }
    dma.ring_flush(&mut ring).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    assert!(dma.recover(), "reset confirms the channel halted");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "recovery waited out its 30 s timeout"
    );
    assert_ne!(r.read(S2MM + DMASR).unwrap() & DMASR_HALTED, 0);
    drop(ring);
}

#[test]
fn a_short_direct_transfer_is_done_when_its_doorbell_returns_as_the_clock_allows() {
    // Set to, the thread whose LENGTH write starts a short transfer moves it
    // as far as the clock model says it is done: on a board's link 400 bytes
    // take well under a microsecond, and they are there when the write
    // returns, even with the device thread asleep; on a link of 2 kB/s they
    // take a fifth of a second, and the transfer is not complete (the model
    // is kept; direct-mode S2MM lands the data as it streams in).
    let slow = Clock::Rate {
        mhz: 0.002,
        bytes_per_cycle: 1.0,
    };
    for (clock, at_once) in [
        (Clock::Unlimited, true),
        (Profile::ZYNQMP.port, true),
        (slow, false),
    ] {
        let b = board(false, clock);
        b.fabric.set_prompt_bytes(4096);
        let r = &b.regs;
        reset(r);
        let mut tx = b.pool.alloc::<u8>(400).unwrap();
        for (i, x) in tx.as_mut_slice().iter_mut().enumerate() {
            *x = i as u8;
        }
        let rx = b.pool.alloc::<u8>(400).unwrap();
        r.poke(MM2S + DMACR, DMACR_RS).unwrap();
        r.poke(S2MM + DMACR, DMACR_RS).unwrap();
        // Idle for longer than the device thread spins: it sleeps.
        std::thread::sleep(Duration::from_millis(10));
        r.poke(S2MM + ADDR, rx.bus_addr() as u32).unwrap();
        r.poke(S2MM + LENGTH, 400).unwrap();
        r.poke(MM2S + ADDR, tx.bus_addr() as u32).unwrap();
        r.poke(MM2S + LENGTH, 400).unwrap();
        let sr = r.read(S2MM + DMASR).unwrap();
        assert_eq!(sr & DMASR_IOC_IRQ != 0, at_once, "{clock:?}: {sr:#x}");
        if at_once {
            assert_eq!(rx.as_slice(), tx.as_slice(), "{clock:?}");
        }
        until(r, S2MM + DMASR, "completion", |v| v & DMASR_IOC_IRQ != 0);
        assert_eq!(rx.as_slice(), tx.as_slice());
    }
}

#[test]
fn direct_mm2s_waits_once_the_stream_holds_its_bound_in_bytes() {
    let b = board(false, Clock::Unlimited);
    b.fabric.set_length_width(26).unwrap();
    let r = &b.regs;
    reset(r);
    const PACKET: usize = 1 << 20;
    let tx = b.pool.alloc::<u8>(PACKET).unwrap();
    let rx = b.pool.alloc::<u8>(PACKET).unwrap();
    r.poke(MM2S + DMACR, DMACR_RS).unwrap();
    r.poke(S2MM + DMACR, DMACR_RS).unwrap();
    // With no S2MM transfer posted, the stream takes packets up to its
    // bound; each MM2S transfer completes as its packet goes in.
    let fits = dmaflow::sim::MAX_STREAM_PACKET / PACKET;
    let send = || {
        r.poke(MM2S + DMASR, DMASR_IOC_IRQ).unwrap();
        r.poke(MM2S + ADDR, tx.bus_addr() as u32).unwrap();
        r.poke(MM2S + LENGTH, PACKET as u32).unwrap();
    };
    for _ in 0..fits {
        send();
        until(r, MM2S + DMASR, "MM2S into the stream", |v| {
            v & DMASR_IOC_IRQ != 0
        });
    }
    // One more waits: the stream is full (back-pressure, no error).
    send();
    std::thread::sleep(Duration::from_millis(100));
    let sr = r.read(MM2S + DMASR).unwrap();
    assert_eq!(
        sr & (DMASR_IOC_IRQ | DMASR_IDLE | DMASR_ERR_MASK),
        0,
        "{sr:#x}"
    );
    // S2MM takes one packet: the waiting transfer goes.
    r.poke(S2MM + ADDR, rx.bus_addr() as u32).unwrap();
    r.poke(S2MM + LENGTH, PACKET as u32).unwrap();
    until(r, S2MM + DMASR, "S2MM", |v| v & DMASR_IOC_IRQ != 0);
    let sr = until(r, MM2S + DMASR, "MM2S after S2MM", |v| {
        v & DMASR_IOC_IRQ != 0
    });
    assert_eq!(sr & DMASR_ERR_MASK, 0, "{sr:#x}");
}
