//! Transfers over an AXI DMA engine, as an application uses them: a two-way
//! transfer (MM2S out, S2MM back) either zero-copy, on [`DmaBuf`]s the application
//! fills and reads in place, or through standard I/O, copying through buffers the
//! driver owns. Completion by busy-polling, polling with `sched_yield`, or
//! interrupts.

use crate::axi::{self, AxiDma, Channel, Wait};
use crate::mem::{self, DmaBuf, DmaPool};
use crate::platform::{IrqLine, RegisterSpace};

/// How the caller learns that a transfer finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Busy-poll DMASR ("user-level polling").
    Poll,
    /// Poll DMASR, yielding between reads ("user-level scheduled").
    Yield,
    /// Sleep on the channel's interrupt line.
    Irq,
}

/// What went wrong with a transfer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine failed.
    #[error(transparent)]
    Axi(#[from] axi::Error),
    /// DMA memory failed (or a buffer from another pool was given).
    #[error(transparent)]
    Mem(#[from] mem::Error),
    /// Asked to send more bytes than the buffer holds.
    #[error("cannot send {len} bytes from a {capacity}-byte buffer")]
    TooLong {
        /// Bytes asked for.
        len: usize,
        /// Buffer size.
        capacity: usize,
    },
    /// A transfer of zero bytes.
    #[error("a transfer of zero bytes")]
    Empty,
}

/// An AXI DMA engine with its two interrupt lines and its DMA memory.
pub struct Engine<R, I> {
    dma: AxiDma<R>,
    irq: [I; 2],
    pool: DmaPool,
}

impl<R: RegisterSpace, I: IrqLine> Engine<R, I> {
    /// An engine; `irq_mm2s` and `irq_s2mm` are the channels' interrupt lines.
    pub fn new(dma: AxiDma<R>, irq_mm2s: I, irq_s2mm: I, pool: DmaPool) -> Self {
        Engine {
            dma,
            irq: [irq_mm2s, irq_s2mm],
            pool,
        }
    }

    /// The pool zero-copy buffers must come from.
    pub fn pool(&self) -> &DmaPool {
        &self.pool
    }

    fn wait(&self, ch: Channel, c: Completion) -> Result<usize, Error> {
        let how = match c {
            Completion::Poll => Wait::Poll,
            Completion::Yield => Wait::Yield,
            Completion::Irq => Wait::Irq(&self.irq[ch as usize]),
        };
        Ok(self.dma.wait(ch, &how)?)
    }

    /// Zero-copy two-way transfer: sends the first `tx_len` bytes of `tx`, receives
    /// into `rx`; returns the bytes received (the stream's TLAST may end it early).
    /// The buffers are borrowed for the whole transfer, so the CPU cannot touch
    /// them while the device does.
    pub fn two_way(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &mut DmaBuf<u8>,
        c: Completion,
    ) -> Result<usize, Error> {
        self.pool.check(tx)?;
        self.pool.check(rx)?;
        if tx_len == 0 {
            return Err(Error::Empty);
        }
        if tx_len > tx.len() {
            return Err(Error::TooLong {
                len: tx_len,
                capacity: tx.len(),
            });
        }
        // Check both lengths before starting either channel, so a refusal leaves
        // nothing half-started.
        for (channel, len) in [(Channel::Mm2s, tx_len), (Channel::S2mm, rx.len())] {
            if len > self.dma.max_len() {
                return Err(axi::Error::TooLong {
                    channel,
                    len,
                    max: self.dma.max_len(),
                }
                .into());
            }
        }
        let irq = c == Completion::Irq;
        tx.sync_for_device(tx_len)?;
        self.dma
            .start(Channel::S2mm, rx.bus_addr(), rx.len(), irq)?;
        self.dma.start(Channel::Mm2s, tx.bus_addr(), tx_len, irq)?;
        self.wait(Channel::Mm2s, c)?;
        let n = self.wait(Channel::S2mm, c)?;
        rx.sync_for_cpu(n)?;
        Ok(n)
    }

    /// Standard-I/O two-way transfer: copies `data` into a driver-owned DMA buffer,
    /// transfers, and copies what comes back into `out`; returns the bytes received.
    pub fn write_read(&self, data: &[u8], out: &mut [u8], c: Completion) -> Result<usize, Error> {
        if data.is_empty() || out.is_empty() {
            return Err(Error::Empty);
        }
        let mut tx = self.pool.alloc::<u8>(data.len())?;
        let mut rx = self.pool.alloc::<u8>(out.len())?;
        tx.as_mut_slice().copy_from_slice(data);
        let n = self.two_way(&tx, data.len(), &mut rx, c)?;
        out[..n].copy_from_slice(&rx.as_slice()[..n]);
        Ok(n)
    }
}
