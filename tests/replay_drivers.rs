//! Register sequences of AXI DMA drivers dmaflow did not write, replayed as raw
//! register reads and writes on the emulated board (not through `dmaflow::axi`):
//! PYNQ's `pynq/lib/dma.py` (simple and scatter-gather channels) and the Linux
//! `drivers/dma/xilinx/xilinx_dma.c` AXI DMA paths (reset, start, SG chain with
//! interrupt coalescing, the interrupt handler, halt, error recovery). Each step
//! follows the order of register accesses in those drivers; a driver that works
//! on a board must work here unmodified.

mod common;
use common::Poke;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmaflow::axi::regs::*;
use dmaflow::mem::{CachePolicy, DmaBuf, DmaPool};
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq, SimRegisters};
use dmaflow::platform::{IrqLine, RegisterSpace};
use dmaflow::sim::{Clock, Fabric};

struct Board {
    r: SimRegisters,
    pool: DmaPool,
    irq: [SimIrq; 2],
    _fabric: Fabric,
    _board: SimBoard,
}

fn board(sg: bool) -> Board {
    let board = SimBoard::new(1, 4 << 20, DEFAULT_DDR_BASE, 2).unwrap();
    let fabric = Fabric::start_with(&board, Clock::Unlimited, sg).unwrap();
    Board {
        r: board.registers(0).unwrap(),
        pool: DmaPool::new(Arc::new(board.memory().unwrap()), CachePolicy::Coherent).unwrap(),
        irq: [board.irq(0).unwrap(), board.irq(1).unwrap()],
        _fabric: fabric,
        _board: board,
    }
}

fn rd(r: &SimRegisters, at: usize) -> u32 {
    r.read(at).unwrap()
}

fn wr(r: &SimRegisters, at: usize, v: u32) {
    r.poke(at, v).unwrap();
}

/// A busy-wait loop of the kind both drivers use, bounded so a failure is an
/// assertion, not a hang.
fn spin(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{what}: never happened"
        );
        std::hint::spin_loop();
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(5) ^ seed).collect()
}

fn filled(pool: &DmaPool, len: usize, seed: u8) -> DmaBuf<u8> {
    let mut b = pool.alloc::<u8>(len).unwrap();
    b.as_mut_slice().copy_from_slice(&pattern(len, seed));
    b
}

// ---------------------------------------------------------------- PYNQ, simple

/// `_SDMAChannel`: one channel of PYNQ's simple-mode driver.
struct PynqSimple<'a> {
    r: &'a SimRegisters,
    off: usize,
    first_transfer: bool,
}

impl<'a> PynqSimple<'a> {
    /// `__init__` ends with `start()`: DMACR = 0x0001, wait while not running.
    fn new(r: &'a SimRegisters, off: usize) -> Self {
        let mut c = PynqSimple {
            r,
            off,
            first_transfer: true,
        };
        c.start();
        c
    }
    fn running(&self) -> bool {
        rd(self.r, self.off + 4) & 0x01 == 0
    }
    fn idle(&self) -> bool {
        rd(self.r, self.off + 4) & 0x02 == 0x02
    }
    fn error(&self) -> bool {
        rd(self.r, self.off + 4) & 0x70 != 0
    }
    fn start(&mut self) {
        wr(self.r, self.off, 0x0001);
        spin("PYNQ start", || self.running());
        self.first_transfer = true;
    }
    /// `transfer`: running, and idle unless it is the first transfer; address
    /// low and high, then the length.
    fn transfer(&mut self, addr: u64, nbytes: u32) {
        assert!(self.running(), "DMA channel not started");
        assert!(self.idle() || self.first_transfer, "DMA channel not idle");
        wr(self.r, self.off + 0x18, addr as u32);
        wr(self.r, self.off + 0x1C, (addr >> 32) as u32);
        wr(self.r, self.off + 0x28, nbytes);
        self.first_transfer = false;
    }
    /// `wait`: loop reading DMASR until idle, failing on an error; then the
    /// length register gives what was transferred.
    fn wait(&self) -> u32 {
        assert!(self.running(), "DMA channel not started");
        spin("PYNQ wait", || {
            assert!(!self.error(), "DMA error {:#x}", rd(self.r, self.off + 4));
            self.idle()
        });
        rd(self.r, self.off + 0x28)
    }
}

#[test]
fn pynq_simple_mode() {
    let b = board(false);
    let mut send = PynqSimple::new(&b.r, 0x00);
    let mut recv = PynqSimple::new(&b.r, 0x30);
    for k in 0..10u8 {
        let len = 100 + 37 * k as usize;
        let tx = filled(&b.pool, len, k);
        let rx = b.pool.alloc::<u8>(len).unwrap();
        recv.transfer(rx.bus_addr(), len as u32);
        send.transfer(tx.bus_addr(), len as u32);
        send.wait();
        // `wait` must not return before the data is there: it relies on Idle
        // being 0 from the LENGTH write until completion.
        assert_eq!(recv.wait(), len as u32);
        assert_eq!(rx.as_slice(), tx.as_slice(), "transfer {k}");
    }
}

// ------------------------------------------------------- PYNQ, scatter-gather

/// `_SGDMAChannel`: PYNQ's scatter-gather channel (one packet per transfer,
/// split into descriptors of at most `max_size` bytes).
struct PynqSg<'a> {
    r: &'a SimRegisters,
    off: usize,
    max_size: usize,
}

impl<'a> PynqSg<'a> {
    /// `__init__` ends with `stop()`.
    fn new(r: &'a SimRegisters, off: usize, max_size: usize) -> Self {
        let c = PynqSg { r, off, max_size };
        c.stop();
        c
    }
    fn running(&self) -> bool {
        rd(self.r, self.off + 4) & 0x01 == 0
    }
    fn halted(&self) -> bool {
        rd(self.r, self.off + 4) & 0x01 == 0x01
    }
    fn idle(&self) -> bool {
        rd(self.r, self.off + 4) & 0x02 == 0x02
    }
    fn stop(&self) {
        wr(self.r, self.off, 0x0000);
        spin("PYNQ stop", || !self.running());
    }
    /// `transfer`: halted; a circular descriptor chain (16 words each) with SOF
    /// on the first and EOF on the last; CURDESC; `start()`; TAILDESC.
    fn transfer(&self, descr: &mut DmaBuf<u32>, addr: u64, nbytes: usize) -> usize {
        assert!(self.halted(), "DMA channel not halted");
        let n = nbytes.div_ceil(self.max_size);
        let base = descr.bus_addr();
        let mut remain = nbytes;
        for i in 0..n {
            let next = base + ((i + 1) % n) as u64 * 64;
            let d_len = remain.min(self.max_size);
            remain -= d_len;
            let mut control = d_len as u32;
            if i == 0 {
                control |= 1 << 27;
            }
            if remain == 0 {
                control |= 1 << 26;
            }
            let buf = addr + (i * self.max_size) as u64;
            for (w, v) in [
                (0, next as u32),
                (1, (next >> 32) as u32),
                (2, buf as u32),
                (3, (buf >> 32) as u32),
                (6, control),
                (7, 0),
            ] {
                descr.write_volatile(i * 16 + w, v);
            }
        }
        wr(self.r, self.off + 0x08, base as u32);
        wr(self.r, self.off + 0x0C, (base >> 32) as u32);
        wr(self.r, self.off, 0x0001);
        spin("PYNQ SG start", || self.running());
        let tail = base + (n as u64 - 1) * 64;
        wr(self.r, self.off + 0x10, tail as u32);
        wr(self.r, self.off + 0x14, (tail >> 32) as u32);
        n
    }
    /// `wait`: until idle or halted (errors fail), then the bytes from the
    /// descriptors' status words, then `stop()`.
    fn wait(&self, descr: &DmaBuf<u32>, n: usize) -> usize {
        spin("PYNQ SG wait", || {
            let sr = rd(self.r, self.off + 4);
            assert_eq!(sr & 0x770, 0, "DMA error {sr:#x}");
            self.idle() || self.halted()
        });
        let mut transferred = 0;
        for i in 0..n {
            let s = descr.load_word(i * 16 + 7).unwrap();
            assert_eq!(s & 0x3000_0000, 0, "DMA error in descriptor {i}");
            transferred += (s & 0x03FF_FFFF) as usize;
        }
        self.stop();
        transferred
    }
}

#[test]
fn pynq_scatter_gather_mode() {
    let b = board(true);
    let send = PynqSg::new(&b.r, 0x00, 1000);
    let recv = PynqSg::new(&b.r, 0x30, 1000);
    for k in 0..6u8 {
        let len = 2500 + 300 * k as usize;
        let tx = filled(&b.pool, len, k);
        let rx = b.pool.alloc::<u8>(len).unwrap();
        let mut td = b.pool.alloc::<u32>(16 * 8).unwrap();
        let mut rd_ = b.pool.alloc::<u32>(16 * 8).unwrap();
        let rn = recv.transfer(&mut rd_, rx.bus_addr(), len);
        let tn = send.transfer(&mut td, tx.bus_addr(), len);
        assert_eq!(send.wait(&td, tn), len);
        // `wait` returns on Idle: it must not do so before the chain's tail.
        assert_eq!(recv.wait(&rd_, rn), len, "transfer {k}");
        assert_eq!(rx.as_slice(), tx.as_slice(), "transfer {k}");
    }
}

// ------------------------------------------------------------- Linux, AXI DMA

/// One channel of `xilinx_dma.c` for the AXI DMA: its register sequences and
/// its view of the channel (`idle`, `err`).
struct LinuxChan<'a> {
    r: &'a SimRegisters,
    off: usize,
    irq: &'a SimIrq,
    idle: bool,
    err: bool,
    /// Segments handed to the hardware and not yet completed.
    active: Vec<usize>,
}

const ALL_IRQ: u32 = DMASR_IOC_IRQ | DMASR_DLY_IRQ | DMASR_ERR_IRQ;
/// DMA internal error is "recoverable" only with flush-on-fsync (VDMA).
const ERR_RECOVER: u32 = DMASR_DMA_INT_ERR;

impl<'a> LinuxChan<'a> {
    /// `xilinx_dma_chan_reset`: set Reset, poll until it clears; then enable
    /// every interrupt (`dma_ctrl_set(DMACR, XILINX_DMA_DMAXR_ALL_IRQ_MASK)`).
    /// The reset resets both channels of the engine.
    fn reset(&mut self) {
        let cr = rd(self.r, self.off);
        wr(self.r, self.off, cr | DMACR_RESET);
        spin("Linux reset", || rd(self.r, self.off) & DMACR_RESET == 0);
        self.alloc();
        self.err = false;
        self.idle = true;
        self.active.clear();
    }
    /// `xilinx_dma_alloc_chan_resources` for the AXI DMA: resetting one channel
    /// resets the other as well, so the interrupts are enabled again here.
    fn alloc(&self) {
        let cr = rd(self.r, self.off);
        wr(self.r, self.off, cr | ALL_IRQ);
    }
    fn new(r: &'a SimRegisters, off: usize, irq: &'a SimIrq) -> Self {
        let mut c = LinuxChan {
            r,
            off,
            irq,
            idle: true,
            err: false,
            active: Vec::new(),
        };
        c.reset();
        c
    }
    /// `xilinx_dma_start`: RS set, poll until not Halted.
    fn start(&mut self) {
        let cr = rd(self.r, self.off);
        wr(self.r, self.off, cr | DMACR_RS);
        let t0 = Instant::now();
        while rd(self.r, self.off + 4) & DMASR_HALTED != 0 {
            if t0.elapsed() > Duration::from_millis(100) {
                self.err = true;
                return;
            }
        }
    }
    /// `xilinx_dma_stop_transfer`: RS cleared, poll until Halted.
    fn stop(&mut self) {
        let cr = rd(self.r, self.off);
        wr(self.r, self.off, cr & !DMACR_RS);
        spin("Linux halt", || {
            rd(self.r, self.off + 4) & DMASR_HALTED != 0
        });
        self.idle = true;
    }
    /// `xilinx_dma_start_transfer` in SG mode: `packets` pending packets whose
    /// segments run from `head` to `tail`: coalesce count in DMACR, CURDESC,
    /// start, TAILDESC.
    fn start_sg(&mut self, head: u64, tail: u64, packets: u32, segs: Vec<usize>) {
        if self.err || !self.idle {
            return;
        }
        let mut cr = rd(self.r, self.off);
        cr &= !DMACR_IRQ_THRESHOLD_MASK;
        cr |= packets << DMACR_IRQ_THRESHOLD_SHIFT;
        wr(self.r, self.off, cr);
        wr(self.r, self.off + CURDESC, head as u32);
        wr(self.r, self.off + CURDESC_MSB, (head >> 32) as u32);
        self.start();
        if self.err {
            return;
        }
        wr(self.r, self.off + TAILDESC, tail as u32);
        wr(self.r, self.off + TAILDESC_MSB, (tail >> 32) as u32);
        self.active = segs;
        self.idle = false;
    }
    /// `xilinx_dma_start_transfer` in simple mode: coalesce 1, start, address,
    /// then BTT.
    fn start_simple(&mut self, addr: u64, len: u32) {
        if self.err || !self.idle {
            return;
        }
        let mut cr = rd(self.r, self.off);
        cr &= !DMACR_IRQ_THRESHOLD_MASK;
        cr |= 1 << DMACR_IRQ_THRESHOLD_SHIFT;
        wr(self.r, self.off, cr);
        self.start();
        wr(self.r, self.off + ADDR, addr as u32);
        wr(self.r, self.off + ADDR_MSB, (addr >> 32) as u32);
        wr(self.r, self.off + LENGTH, len);
        self.idle = false;
    }
    /// `xilinx_dma_irq_handler`, run when the line fires: read DMASR, ack the
    /// interrupt bits (W1C), record errors; on IOC/delay the active work is done
    /// and the channel idle. Returns whether anything completed.
    fn wait_irq(&mut self) -> bool {
        self.irq
            .wait(Duration::from_secs(1))
            .expect("the interrupt never came");
        let status = rd(self.r, self.off + 4);
        assert_ne!(status & ALL_IRQ, 0, "an interrupt with no status bit");
        wr(self.r, self.off + 4, status & ALL_IRQ);
        if status & DMASR_ERR_IRQ != 0 {
            let errors = status & DMASR_ERR_MASK;
            wr(self.r, self.off + 4, errors & ERR_RECOVER);
            self.err = true;
        }
        let done = status & (DMASR_IOC_IRQ | DMASR_DLY_IRQ) != 0;
        if done {
            self.active.clear();
            self.idle = true;
        }
        self.irq.enable().unwrap();
        done
    }
    /// `xilinx_dma_terminate_all` after an error: stop, then reset the channel.
    fn recover(&mut self) {
        self.stop();
        if self.err {
            self.reset();
        }
    }
}

/// Linux's segment pool for a channel: a ring of hardware descriptors linked once,
/// handed out in order (as `free_seg_list` is).
struct Segments {
    ring: DmaBuf<u32>,
    n: usize,
    next: usize,
}

impl Segments {
    fn new(pool: &DmaPool, n: usize) -> Self {
        let mut ring = pool.alloc::<u32>(16 * n).unwrap();
        let base = ring.bus_addr();
        for i in 0..n {
            let next = base + ((i + 1) % n) as u64 * 64;
            ring.write_volatile(i * 16, next as u32);
            ring.write_volatile(i * 16 + 1, (next >> 32) as u32);
        }
        Segments { ring, n, next: 0 }
    }
    fn addr(&self, i: usize) -> u64 {
        self.ring.bus_addr() + i as u64 * 64
    }
    /// `xilinx_dma_prep_slave_sg`: one packet over `bufs` (SOP first, EOP last).
    fn packet(&mut self, bufs: &[(u64, u32)], mm2s: bool) -> Vec<usize> {
        let mut used = Vec::new();
        for (k, &(addr, len)) in bufs.iter().enumerate() {
            let i = self.next;
            self.next = (self.next + 1) % self.n;
            let mut control = len;
            if mm2s && k == 0 {
                control |= DESC_CTRL_TXSOF;
            }
            if mm2s && k == bufs.len() - 1 {
                control |= DESC_CTRL_TXEOF;
            }
            self.ring.write_volatile(i * 16 + 2, addr as u32);
            self.ring.write_volatile(i * 16 + 3, (addr >> 32) as u32);
            self.ring.write_volatile(i * 16 + 6, control);
            self.ring.write_volatile(i * 16 + 7, 0);
            used.push(i);
        }
        used
    }
    fn status(&self, i: usize) -> u32 {
        self.ring.load_word(i * 16 + 7).unwrap()
    }
}

#[test]
fn linux_simple_mode_with_interrupts() {
    let b = board(false);
    let mut tx_ch = LinuxChan::new(&b.r, MM2S, &b.irq[0]);
    let mut rx_ch = LinuxChan::new(&b.r, S2MM, &b.irq[1]);
    tx_ch.alloc();
    rx_ch.alloc();
    for k in 0..10u8 {
        let len = 64 + 100 * k as usize;
        let tx = filled(&b.pool, len, k);
        let rx = b.pool.alloc::<u8>(len).unwrap();
        rx_ch.start_simple(rx.bus_addr(), len as u32);
        tx_ch.start_simple(tx.bus_addr(), len as u32);
        assert!(tx_ch.wait_irq() && rx_ch.wait_irq());
        assert_eq!(rd(&b.r, S2MM + LENGTH), len as u32);
        assert_eq!(rx.as_slice(), tx.as_slice(), "transfer {k}");
    }
}

#[test]
fn linux_scatter_gather_with_coalescing_errors_and_recovery() {
    let b = board(true);
    let mut tx_ch = LinuxChan::new(&b.r, MM2S, &b.irq[0]);
    let mut rx_ch = LinuxChan::new(&b.r, S2MM, &b.irq[1]);
    tx_ch.alloc();
    rx_ch.alloc();
    let mut tx_segs = Segments::new(&b.pool, 16);
    let mut rx_segs = Segments::new(&b.pool, 16);
    // Batches of three packets (two segments each on MM2S, one on S2MM): one
    // interrupt per batch (IRQThreshold = 3); the channels stay running and each
    // batch continues the segment ring where the last one ended.
    for batch in 0..8u8 {
        let txs: Vec<_> = (0..3)
            .map(|p| filled(&b.pool, 1500, batch * 3 + p))
            .collect();
        let rxs: Vec<_> = (0..3).map(|_| b.pool.alloc::<u8>(1500).unwrap()).collect();
        let mut rx_used = Vec::new();
        for rx in &rxs {
            rx_used.extend(rx_segs.packet(&[(rx.bus_addr(), 1500)], false));
        }
        let mut tx_used = Vec::new();
        for tx in &txs {
            let a = tx.bus_addr();
            tx_used.extend(tx_segs.packet(&[(a, 1000), (a + 1000, 500)], true));
        }
        let (rh, rt) = (
            rx_segs.addr(rx_used[0]),
            rx_segs.addr(*rx_used.last().unwrap()),
        );
        let (th, tt) = (
            tx_segs.addr(tx_used[0]),
            tx_segs.addr(*tx_used.last().unwrap()),
        );
        rx_ch.start_sg(rh, rt, 3, rx_used.clone());
        tx_ch.start_sg(th, tt, 3, tx_used.clone());
        assert!(tx_ch.wait_irq(), "batch {batch}: MM2S");
        assert!(rx_ch.wait_irq(), "batch {batch}: S2MM");
        for &i in &rx_used {
            let s = rx_segs.status(i);
            assert_ne!(s & DESC_STS_CMPLT, 0, "batch {batch} segment {i}");
            assert_eq!(s & DESC_LENGTH_MASK, 1500);
        }
        for (tx, rx) in txs.iter().zip(&rxs) {
            assert_eq!(rx.as_slice(), tx.as_slice(), "batch {batch}");
        }
    }
    // A packet from memory that is not there: the error interrupt, the channel
    // halted; terminate_all stops and resets it, and the next transfer works.
    let used = tx_segs.packet(&[(0x40, 64)], true);
    let at = tx_segs.addr(used[0]);
    tx_ch.start_sg(at, at, 1, used);
    assert!(!tx_ch.wait_irq());
    assert!(tx_ch.err);
    assert_eq!(
        rd(&b.r, MM2S + CURDESC),
        at as u32,
        "CURDESC at the failing descriptor"
    );
    tx_ch.recover();
    rx_ch.recover();
    // The client requests its channels again (the reset cleared the other
    // channel's interrupt enables); the segment rings start from their heads.
    tx_ch.alloc();
    rx_ch.alloc();
    let mut tx_segs = Segments::new(&b.pool, 4);
    let mut rx_segs = Segments::new(&b.pool, 4);
    let tx = filled(&b.pool, 800, 77);
    let rx = b.pool.alloc::<u8>(800).unwrap();
    let r_used = rx_segs.packet(&[(rx.bus_addr(), 800)], false);
    let t_used = tx_segs.packet(&[(tx.bus_addr(), 800)], true);
    let (ra, ta) = (rx_segs.addr(r_used[0]), tx_segs.addr(t_used[0]));
    rx_ch.start_sg(ra, ra, 1, r_used);
    tx_ch.start_sg(ta, ta, 1, t_used);
    assert!(tx_ch.wait_irq() && rx_ch.wait_irq());
    assert_eq!(rx.as_slice(), tx.as_slice());
}
