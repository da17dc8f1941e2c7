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

/// How long a baseline transfer may take before it is called lost.
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
