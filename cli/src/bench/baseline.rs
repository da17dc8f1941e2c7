//! The emulator baseline: a two-way transfer driven by the thinnest driver
//! there is (PG021 direct register mode written by hand, a spin on DMASR), with
//! none of dmaflow's layers (no ownership tracking, no register cache, no
//! timing, no checks beyond the status; only the cache maintenance a
//! non-coherent board requires of any driver). What the emulated fabric itself adds
//! to the modelled time (its device thread waking, copying, signalling) shows
//! in this baseline; what dmaflow adds is a driver's time minus it.

use std::time::{Duration, Instant};

use dmaflow::axi::regs::{
    ADDR, ADDR_MSB, DMACR, DMACR_RESET_VALUE, DMACR_RS, DMASR, DMASR_ERR_MASK, DMASR_IOC_IRQ,
    LENGTH, MM2S, S2MM,
};
use dmaflow::mem::DmaBuf;
use dmaflow::platform::RegisterSpace;

use super::error::Error;

/// How long a baseline transfer, or a ring that stops making progress, may
/// wait before it is called lost.
const PATIENCE: Duration = Duration::from_secs(5);

/// Moves `len` bytes from `tx` out and into `rx` on the engine behind `regs`
/// (its channels started on the first call) and returns the wall time from
/// the first register write to both completions. The caller resets the
/// engine through its driver before that driver uses it again. On an error
/// after the transfer started, `halt` runs first (the buffers go back to the
/// caller with the error); where it cannot confirm the engine stopped, both
/// buffers are given up (never handed out again).
///
/// # Safety
/// `regs` must be the registers of the engine whose DMA memory `tx` and `rx`
/// are, and `halt` must stop that engine and say whether it is confirmed
/// stopped (so that on an error no memory the caller gets back is still the
/// device's).
pub(crate) unsafe fn two_way(
    regs: &dyn RegisterSpace,
    tx: &DmaBuf<u8>,
    rx: &mut DmaBuf<u8>,
    len: usize,
    halt: impl Fn() -> bool,
) -> Result<Duration, Error> {
    let baseline = Error::peer("baseline");
    let n = u32::try_from(len.min(tx.len()).min(rx.len()))
        .map_err(|_| baseline(format!("{len} bytes do not fit the LENGTH register")))?;
    let t0 = Instant::now();
    // The cache maintenance a driver on a non-coherent board must do (nothing
    // on a coherent one): the data out cleaned, the answer's lines dropped.
    tx.sync_for_device(n as usize)?;
    rx.sync_for_device(n as usize)?;
    let (tx_addr, rx_addr) = (tx.bus_addr(), rx.bus_addr());
    let moved = || -> Result<(), Error> {
        for (base, addr) in [(S2MM, rx_addr), (MM2S, tx_addr)] {
            // SAFETY: the addresses are those of `tx` and `rx`, DMA buffers of
            // this engine's pool (the caller's promise) that are borrowed for
            // the whole call (`rx` exclusively), and the call returns only once
            // both channels reported the transfer complete, or after `halt`
            // stopped the engine (the caller's promise), so the device touches
            // no memory outside them and none after the borrows end. `n` is
            // within both buffers.
            unsafe {
                regs.write(base + DMACR, DMACR_RESET_VALUE | DMACR_RS)?;
                regs.write(base + ADDR, addr as u32)?;
                regs.write(base + ADDR_MSB, (addr >> 32) as u32)?;
                regs.write(base + LENGTH, n)?;
            }
        }
        for base in [MM2S, S2MM] {
            loop {
                let sr = regs.read(base + DMASR)?;
                if sr & DMASR_ERR_MASK != 0 {
                    return Err(baseline(format!("DMASR {sr:#010x} at {base:#x}")));
                }
                if sr & DMASR_IOC_IRQ != 0 {
                    // SAFETY: a write-1-to-clear of the completion bit starts nothing.
                    unsafe { regs.write(base + DMASR, DMASR_IOC_IRQ) }?;
                    break;
                }
                if t0.elapsed() > PATIENCE {
                    return Err(baseline(format!(
                        "no completion within {PATIENCE:?} (DMASR {sr:#010x})"
                    )));
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    };
    // On an error after the transfer started: the engine stopped, or, where
    // that is not confirmed, both buffers given up for good (the receive
    // buffer's view moved to private memory: the device may still write it).
    if let Err(e) = moved() {
        if !halt() {
            tx.abandon();
            rx.surrender();
        }
        return Err(e);
    }
    rx.sync_for_cpu(n as usize)?;
    Ok(t0.elapsed())
}

/// Per-packet work the bare scatter-gather ring does on the CPU, the same as
/// the measured ring's stream: fill packet `seq` in place, and check one.
pub(crate) struct PacketWork<'a> {
    /// Fills TX buffer space with packet `seq`.
    pub fill: &'a dyn Fn(u64, &mut [u8]),
    /// Whether a received packet is packet `seq`.
    pub intact: &'a dyn Fn(u64, &[u8]) -> bool,
}

/// The emulator baseline for streams of packets: a scatter-gather ring driven
/// by hand with the fewest register and descriptor accesses PG021 allows and
/// no checks beyond the data's. `slots + 1` descriptors per channel in a
/// circle (one always left out, so that a tail never means a whole turn),
/// each bound for good to a buffer of `bytes` bytes with its CONTROL written
/// once, so that reusing a descriptor writes its STATUS alone (PG021: Cmplt
/// must be clear before the engine fetches it again). A burst of packets goes
/// out with one TAILDESC write; TX descriptors are reclaimed only when a burst
/// needs them, by reading the status of the newest one needed (the engine
/// completes in order); received packets are taken while their Cmplt is set
/// and go back to S2MM with one TAILDESC write, which keeps the descriptor
/// before the oldest one expected out of the engine's reach. Streams
/// `packets` packets through the engine's loopback, each filled and checked
/// (length, RXEOF and content) as `work` says, counts them at the sink, and
/// returns the seconds from the first packet to the last. The caller resets
/// the engine through its driver before that driver uses it again.
///
/// # Safety
/// `regs` must be the registers of the scatter-gather engine whose DMA memory
/// `pool` is, and `halt` must stop that engine and say whether it is
/// confirmed stopped (on an error the descriptors and buffers are given up to
/// the device when it is not).
pub(crate) unsafe fn sg_stream(
    regs: &dyn RegisterSpace,
    pool: &dmaflow::mem::DmaPool,
    slots: usize,
    bytes: usize,
    packets: u64,
    work: &PacketWork<'_>,
    halt: impl Fn() -> bool,
) -> Result<f64, Error> {
    use dmaflow::axi::regs::{
        CURDESC, CURDESC_MSB, DESC_ALIGN, DESC_BUFFER_ADDRESS, DESC_BUFFER_ADDRESS_MSB,
        DESC_CONTROL, DESC_CTRL_TXEOF, DESC_CTRL_TXSOF, DESC_LENGTH_MASK, DESC_NXTDESC,
        DESC_NXTDESC_MSB, DESC_STATUS, DESC_STS_CMPLT, DESC_STS_RXEOF, DMACR_RESET, TAILDESC,
        TAILDESC_MSB,
    };
    let baseline = Error::peer("baseline");
    let n = slots + 1;
    if slots < 1 || bytes == 0 || bytes > DESC_LENGTH_MASK as usize {
        return Err(baseline(format!("{slots} slots of {bytes} bytes")));
    }
    const W: usize = (DESC_ALIGN / 4) as usize;
    let word = |slot: usize, field: u64| slot * W + (field / 4) as usize;
    let mut desc = [pool.alloc::<u32>(n * W)?, pool.alloc::<u32>(n * W)?];
    let mut bufs: [Vec<DmaBuf<u8>>; 2] = [Vec::with_capacity(n), Vec::with_capacity(n)];
    for b in &mut bufs {
        for _ in 0..n {
            b.push(pool.alloc::<u8>(bytes)?);
        }
    }
    // Slots by wrapping increments (no division per packet).
    let ahead = |s: usize, k: usize| if s + k >= n { s + k - n } else { s + k };
    let before = |s: usize| if s == 0 { n - 1 } else { s - 1 };
    let t0 = Instant::now();
    let bases = [desc[0].bus_addr(), desc[1].bus_addr()];
    let run = |desc: &mut [DmaBuf<u32>; 2], bufs: &mut [Vec<DmaBuf<u8>>; 2]| {
        let set = |base: usize, r: usize, v: u32| {
            // SAFETY: every address the engine is pointed at is a descriptor
            // or buffer of this call, from the engine's pool (the caller's
            // promise), kept until the caller resets the engine; on an error
            // `halt` stops it, or everything is given up to it.
            unsafe { regs.write(base + r, v) }
        };
        // Reset (both channels halted), then the two circles.
        set(MM2S, DMACR, DMACR_RESET)?;
        while regs.read(MM2S + DMACR)? & DMACR_RESET != 0 {
            if t0.elapsed() > PATIENCE {
                return Err(baseline("the engine did not leave reset".into()));
            }
            std::hint::spin_loop();
        }
        for (ch, d) in desc.iter_mut().enumerate() {
            let base = d.bus_addr();
            for (s, buf) in bufs[ch].iter().enumerate() {
                let next = base + (ahead(s, 1) as u64) * DESC_ALIGN;
                let addr = buf.bus_addr();
                d.write_volatile(word(s, DESC_NXTDESC), next as u32);
                d.write_volatile(word(s, DESC_NXTDESC_MSB), (next >> 32) as u32);
                d.write_volatile(word(s, DESC_BUFFER_ADDRESS), addr as u32);
                d.write_volatile(word(s, DESC_BUFFER_ADDRESS_MSB), (addr >> 32) as u32);
                let control = match ch {
                    0 => bytes as u32 | DESC_CTRL_TXSOF | DESC_CTRL_TXEOF,
                    _ => bytes as u32,
                };
                d.write_volatile(word(s, DESC_CONTROL), control);
                d.write_volatile(word(s, DESC_STATUS), 0);
            }
            d.sync_for_device(n * W * 4)?;
            let reg = [MM2S, S2MM][ch];
            set(reg, CURDESC, base as u32)?;
            set(reg, CURDESC_MSB, (base >> 32) as u32)?;
            set(reg, DMACR, DMACR_RESET_VALUE | DMACR_RS)?;
        }
        for b in &bufs[1] {
            b.sync_for_cpu(bytes)?;
        }
        let tail = |ch: usize, slot: usize| {
            let a = bases[ch] + slot as u64 * DESC_ALIGN;
            dmaflow::platform::dma_wmb();
            set([MM2S, S2MM][ch], TAILDESC_MSB, (a >> 32) as u32)?;
            set([MM2S, S2MM][ch], TAILDESC, a as u32)
        };
        // Descriptors `from` and the `k - 1` after it, cleaned for the
        // device (they may wrap around the end of the circle).
        let clean = |d: &DmaBuf<u32>, from: usize, k: usize| -> Result<(), Error> {
            let end = from + k;
            d.sync_range_for_device(from * W * 4, (end.min(n) - from) * W * 4)?;
            if end > n {
                d.sync_range_for_device(0, (end - n) * W * 4)?;
            }
            Ok(())
        };
        // Every RX descriptor but one (the one left out) to S2MM.
        tail(1, n - 2)?;
        // A status the engine wrote: the line dropped first (explicit
        // maintenance; never a line the CPU wrote and has not cleaned).
        let status = |d: &DmaBuf<u32>, s: usize| {
            let _ = d.sync_range_for_cpu(s * DESC_ALIGN as usize, DESC_ALIGN as usize);
            d.load_word(word(s, DESC_STATUS)).unwrap_or(0)
        };
        let (mut sent, mut received, mut reclaimed) = (0u64, 0u64, 0u64);
        let (mut tx_slot, mut tx_old, mut rx_slot) = (0usize, 0usize, 0usize);
        let start = Instant::now();
        while received < packets {
            // A burst out: as many as the receive side has room for.
            let k = (packets - sent).min(slots as u64 - (sent - received)) as usize;
            if k > 0 {
                // TX descriptors the burst needs back: every one before is
                // handed over, so the newest of them tells for all.
                let short = (sent - reclaimed + k as u64).saturating_sub(slots as u64) as usize;
                if short > 0 {
                    let last = ahead(tx_old, short - 1);
                    let waiting = Instant::now();
                    while status(&desc[0], last) & DESC_STS_CMPLT == 0 {
                        if waiting.elapsed() > PATIENCE {
                            return Err(baseline(format!(
                                "MM2S stopped completing ({reclaimed} of {sent} sent)"
                            )));
                        }
                        std::hint::spin_loop();
                    }
                    // Every reclaimed descriptor's line as the engine left
                    // it, before its STATUS is written again.
                    let end = tx_old + short;
                    desc[0].sync_range_for_cpu(tx_old * W * 4, (end.min(n) - tx_old) * W * 4)?;
                    if end > n {
                        desc[0].sync_range_for_cpu(0, (end - n) * W * 4)?;
                    }
                    reclaimed += short as u64;
                    tx_old = ahead(last, 1);
                }
                let from = tx_slot;
                for _ in 0..k {
                    let b = &mut bufs[0][tx_slot];
                    (work.fill)(sent, &mut b.as_mut_slice()[..bytes]);
                    b.sync_for_device(bytes)?;
                    desc[0].write_volatile(word(tx_slot, DESC_STATUS), 0);
                    tx_slot = ahead(tx_slot, 1);
                    sent += 1;
                }
                clean(&desc[0], from, k)?;
                tail(0, before(tx_slot))?;
            }
            // A burst in: wait for the first, take what else is there.
            let from = rx_slot;
            let mut got = 0;
            let mut waiting: Option<Instant> = None;
            while received < sent {
                let s = status(&desc[1], rx_slot);
                if s & DESC_STS_CMPLT == 0 {
                    if got > 0 {
                        break;
                    }
                    if waiting.get_or_insert_with(Instant::now).elapsed() > PATIENCE {
                        return Err(baseline(format!(
                            "S2MM stopped completing ({received} of {sent} sent received)"
                        )));
                    }
                    std::hint::spin_loop();
                    continue;
                }
                dmaflow::platform::dma_rmb();
                let len = (s & DESC_LENGTH_MASK) as usize;
                let b = &bufs[1][rx_slot];
                b.sync_for_cpu(len.min(bytes))?;
                let whole = s & DESC_STS_RXEOF != 0 && len == bytes;
                if !whole || !(work.intact)(received, &b.as_slice()[..len.min(bytes)]) {
                    return Err(Error::Corrupted {
                        what: format!("bare scatter-gather ring: packet {received}"),
                        got: len as u32,
                        expected: bytes as u32,
                    });
                }
                b.sync_for_cpu(bytes)?;
                desc[1].write_volatile(word(rx_slot, DESC_STATUS), 0);
                rx_slot = ahead(rx_slot, 1);
                received += 1;
                got += 1;
            }
            // Back to S2MM: every descriptor but the one before the oldest
            // expected.
            if got > 0 {
                clean(&desc[1], from, got)?;
                tail(1, before(before(rx_slot)))?;
            }
        }
        Ok((start.elapsed().as_secs_f64(), received))
    };
    match run(&mut desc, &mut bufs) {
        Ok((t, counted)) if counted == packets => Ok(t),
        Ok((_, counted)) => Err(baseline(format!(
            "{counted} packets counted at the sink, {packets} sent"
        ))),
        Err(e) => {
            if !halt() {
                for d in &mut desc {
                    d.surrender();
                }
                for b in bufs.iter_mut().flatten() {
                    b.surrender();
                }
            }
            Err(e)
        }
    }
}
