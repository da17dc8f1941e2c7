//! The AXI DMA driver against the emulated fabric: register behaviour (PG021),
//! loopback transfers in every completion mode, errors, faults and timeouts.

mod common;
use common::Poke;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmaflow::axi::regs::*;
use dmaflow::axi::{AxiDma, Channel, Config, Error, Wait};
use dmaflow::mem::{CachePolicy, DmaPool};
use dmaflow::platform::RegisterSpace;
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq};
use dmaflow::sim::{Clock, Fabric, Faults};

struct Rig {
    fabric: Fabric,
    dma: AxiDma<dmaflow::platform::sim::SimRegisters>,
    pool: DmaPool,
    irq: [SimIrq; 2],
    _board: SimBoard,
}

fn rig(clock: Clock, cfg: Config) -> Rig {
    let board = SimBoard::new(1, 8 << 20, DEFAULT_DDR_BASE, 2).unwrap();
    let fabric = Fabric::start(&board, clock).unwrap();
    fabric.set_length_width(cfg.length_width).unwrap();
    let dma = AxiDma::new(board.registers(0).unwrap(), cfg).unwrap();
    let pool = DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap();
    let irq = [board.irq(0).unwrap(), board.irq(1).unwrap()];
    Rig {
        fabric,
        dma,
        pool,
        irq,
        _board: board,
    }
}

#[test]
fn register_behaviour_follows_pg021() {
    let board = SimBoard::new(1, 1 << 20, DEFAULT_DDR_BASE, 2).unwrap();
    let _fabric = Fabric::start(&board, Clock::Unlimited).unwrap();
    let r = board.registers(0).unwrap();
    // (write offset, value, read offset, expected mask, expected value)
    let table: &[(usize, u32, usize, u32, u32)] = &[
        // Reset: self-clearing, PG021's reset value 0x00010002 on both channels.
        (
            MM2S + DMACR,
            DMACR_RESET,
            MM2S + DMACR,
            u32::MAX,
            0x0001_0002,
        ),
        (
            MM2S + DMACR,
            DMACR_RESET,
            S2MM + DMACR,
            u32::MAX,
            0x0001_0002,
        ),
        (
            MM2S + DMACR,
            DMACR_RESET,
            S2MM + DMASR,
            DMASR_HALTED,
            DMASR_HALTED,
        ),
        // RS clears Halted; in direct mode Idle stays 0 until a transfer completes.
        (
            S2MM + DMACR,
            DMACR_RS,
            S2MM + DMASR,
            DMASR_HALTED | DMASR_IDLE,
            0,
        ),
        // Clearing RS halts it; Idle reads 0 while halted.
        (
            S2MM + DMACR,
            0,
            S2MM + DMASR,
            DMASR_HALTED | DMASR_IDLE,
            DMASR_HALTED,
        ),
        // Address registers hold what is written.
        (MM2S + ADDR, 0x1234_5678, MM2S + ADDR, u32::MAX, 0x1234_5678),
        (S2MM + ADDR_MSB, 0x9, S2MM + ADDR_MSB, u32::MAX, 0x9),
        // A LENGTH write while halted starts nothing.
        (
            MM2S + LENGTH,
            64,
            MM2S + DMASR,
            DMASR_HALTED | DMASR_IOC_IRQ,
            DMASR_HALTED,
        ),
    ];
    for &(wo, wv, ro, mask, want) in table {
        r.poke(wo, wv).unwrap();
        let got = r.read(ro).unwrap();
        assert_eq!(
            got & mask,
            want,
            "write {wv:#x} to {wo:#x}, read {ro:#x} = {got:#x}"
        );
    }
    // Write-1-to-clear: run a transfer to set IOC, then clear only IOC.
    r.poke(MM2S + DMACR, DMACR_RESET).unwrap();
    r.poke(MM2S + DMACR, DMACR_RS).unwrap();
    r.poke(MM2S + ADDR, DEFAULT_DDR_BASE as u32).unwrap();
    r.poke(MM2S + LENGTH, 64).unwrap();
    let t0 = Instant::now();
    while r.read(MM2S + DMASR).unwrap() & DMASR_IOC_IRQ == 0 {
        assert!(t0.elapsed() < Duration::from_secs(1), "no completion");
    }
    r.poke(MM2S + DMASR, DMASR_ERR_IRQ).unwrap(); // clears nothing that is set
    assert_ne!(r.read(MM2S + DMASR).unwrap() & DMASR_IOC_IRQ, 0);
    r.poke(MM2S + DMASR, DMASR_IOC_IRQ | DMASR_IDLE).unwrap(); // Idle is read-only
    let sr = r.read(MM2S + DMASR).unwrap();
    assert_eq!(sr & DMASR_IOC_IRQ, 0);
    assert_ne!(sr & DMASR_IDLE, 0);
}

fn loopback(rig: &Rig, len: usize, rx_len: usize, how: &[Wait<'_>; 2]) -> Vec<u8> {
    let mut tx = rig.pool.alloc::<u8>(len).unwrap();
    for (i, b) in tx.as_mut_slice().iter_mut().enumerate() {
        *b = (i * 7 + len) as u8;
    }
    let mut rx = rig.pool.alloc::<u8>(rx_len).unwrap();
    rx.as_mut_slice().fill(0xEE);
    let irq = matches!(how[0], Wait::Irq(_));
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { rig.dma.start(Channel::S2mm, rx.bus_addr(), rx_len, irq) }.unwrap();
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { rig.dma.start(Channel::Mm2s, tx.bus_addr(), len, irq) }.unwrap();
    assert_eq!(rig.dma.wait(Channel::Mm2s, &how[0]).unwrap(), len);
    let got = rig.dma.wait(Channel::S2mm, &how[1]).unwrap();
    assert_eq!(got, len, "S2MM reports the bytes received");
    assert_eq!(&rx.as_slice()[..len], tx.as_slice());
    assert!(rx.as_slice()[len..].iter().all(|&b| b == 0xEE));
    rx.as_slice()[..len].to_vec()
}

#[test]
fn loopback_in_every_completion_mode() {
    let r = rig(Clock::Unlimited, Config::default());
    for len in [1, 8, 64, 1000, 4096, 100_000] {
        loopback(&r, len, len, &[Wait::Poll, Wait::Poll]);
        loopback(&r, len, len, &[Wait::Yield, Wait::Yield]);
        loopback(&r, len, len, &[Wait::Irq(&r.irq[0]), Wait::Irq(&r.irq[1])]);
    }
    // A buffer larger than the packet: TLAST ends the transfer early.
    loopback(&r, 100, 4096, &[Wait::Poll, Wait::Poll]);
}

#[test]
fn clock_model_bounds_the_rate() {
    // 100 MHz x 1 B: 640 kB take 6.4 ms at least.
    let r = rig(
        Clock::Rate {
            mhz: 100.0,
            bytes_per_cycle: 1.0,
        },
        Config::default(),
    );
    let t0 = Instant::now();
    loopback(&r, 640_000, 640_000, &[Wait::Poll, Wait::Poll]);
    assert!(
        t0.elapsed() >= Duration::from_micros(6400),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn bad_requests_are_refused() {
    let r = rig(
        Clock::Unlimited,
        Config {
            length_width: 10,
            ..Config::default()
        },
    );
    // SAFETY: refused before any register is written (zero length).
    let refused = unsafe { r.dma.start(Channel::Mm2s, DEFAULT_DDR_BASE, 0, false) };
    assert!(matches!(refused, Err(Error::ZeroLength { .. })));
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    match unsafe { r.dma.start(Channel::S2mm, DEFAULT_DDR_BASE, 1024, false) } {
        Err(Error::TooLong { len, max, .. }) => assert_eq!((len, max), (1024, 1023)),
        other => panic!("expected TooLong, got {other:?}"),
    }
    let board = SimBoard::new(1, 4096, 0, 0).unwrap();
    let bad = AxiDma::new(
        board.registers(0).unwrap(),
        Config {
            length_width: 27,
            ..Config::default()
        },
    );
    assert!(matches!(bad, Err(Error::BadLengthWidth(27))));
}

#[test]
fn device_errors_are_named_and_the_next_transfer_works() {
    let r = rig(Clock::Unlimited, Config::default());
    // An address outside DDR: DMADecErr.
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { r.dma.start(Channel::Mm2s, 0x10, 64, false) }.unwrap();
    match r.dma.wait(Channel::Mm2s, &Wait::Poll) {
        Err(e @ Error::Device { .. }) => assert!(e.to_string().contains("DMADecErr"), "{e}"),
        other => panic!("expected a decode error, got {other:?}"),
    }
    loopback(&r, 256, 256, &[Wait::Poll, Wait::Poll]);
    // A packet longer than the S2MM buffer: DMAIntErr.
    let tx = r.pool.alloc::<u8>(512).unwrap();
    let rx = r.pool.alloc::<u8>(128).unwrap();
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { r.dma.start(Channel::S2mm, rx.bus_addr(), 128, false) }.unwrap();
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { r.dma.start(Channel::Mm2s, tx.bus_addr(), 512, false) }.unwrap();
    r.dma.wait(Channel::Mm2s, &Wait::Poll).unwrap();
    match r.dma.wait(Channel::S2mm, &Wait::Poll) {
        Err(e @ Error::Device { .. }) => assert!(e.to_string().contains("DMAIntErr"), "{e}"),
        other => panic!("expected an internal error, got {other:?}"),
    }
    loopback(&r, 256, 256, &[Wait::Irq(&r.irq[0]), Wait::Irq(&r.irq[1])]);
    // A forced slave error.
    r.fabric.inject(Faults {
        force_error: Some((0, DMASR_DMA_SLV_ERR)),
        ..Faults::default()
    });
    let tx = r.pool.alloc::<u8>(64).unwrap();
    // SAFETY: the buffers live until the transfer is waited for or the engine is recovered, and the engine is halted before the rig drops them.
    unsafe { r.dma.start(Channel::Mm2s, tx.bus_addr(), 64, false) }.unwrap();
    match r.dma.wait(Channel::Mm2s, &Wait::Poll) {
        Err(e @ Error::Device { .. }) => assert!(e.to_string().contains("DMASlvErr"), "{e}"),
        other => panic!("expected a slave error, got {other:?}"),
    }
    loopback(&r, 64, 64, &[Wait::Poll, Wait::Poll]);
}

#[test]
fn a_stalled_device_times_out_and_recovers() {
    let r = rig(
        Clock::Unlimited,
        Config {
            timeout: Duration::from_millis(50),
            ..Config::default()
        },
    );
    r.fabric.inject(Faults {
        stall: Some(Duration::from_millis(400)),
        ..Faults::default()
    });
    let tx = r.pool.alloc::<u8>(64).unwrap();
    // SAFETY: `tx` outlives the rig's engine, which is reset before the rig drops.
    unsafe { r.dma.start(Channel::Mm2s, tx.bus_addr(), 64, true) }.unwrap();
    let t0 = Instant::now();
    match r.dma.wait(Channel::Mm2s, &Wait::Irq(&r.irq[0])) {
        Err(e @ Error::Timeout { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("MM2S") && msg.contains("DMASR"), "{msg}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The timeout, not the stall, ended the wait; the engine could not be halted
    // within the driver's recovery (the stall outlasts it), so it is out of service.
    assert!(
        t0.elapsed() < Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    assert!(r.dma.is_failed());
    // Once the stall is over, the next transfer works: the driver resets the
    // engine itself.
    std::thread::sleep(Duration::from_millis(450));
    loopback(&r, 64, 64, &[Wait::Irq(&r.irq[0]), Wait::Irq(&r.irq[1])]);
    assert!(!r.dma.is_failed());
    // A dropped interrupt while waiting on the line: the completion is still
    // found, by the DMASR check the wait makes between sleeps.
    r.fabric.inject(Faults {
        drop_irq: true,
        ..Faults::default()
    });
    loopback(&r, 64, 64, &[Wait::Irq(&r.irq[0]), Wait::Irq(&r.irq[1])]);
    assert!(
        !r.fabric.pending_faults().drop_irq,
        "the interrupt was dropped"
    );
}
