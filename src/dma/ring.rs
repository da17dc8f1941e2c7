//! A ring of DMA buffers on a scatter-gather engine, for streams of packets: the
//! application fills TX buffers in place and reads RX buffers in place (zero-copy)
//! or copies through them (standard I/O); descriptors are handed to the engine in
//! batches with one TAILDESC write, and the channels run without halting.

use super::{Completion, Engine, Error};
use crate::axi::{
    Channel, DESC_WORDS, DescRing, Wait, regs::DESC_LENGTH_MASK, regs::DESC_STS_RXEOF,
};
use crate::mem::DmaBuf;
use crate::platform::{IrqLine, RegisterSpace};

/// A ring of `slots` TX and `slots` RX buffers of `slot_bytes` each on an engine
/// with scatter-gather.
pub struct PacketRing<'e, R: RegisterSpace, I: IrqLine> {
    engine: &'e Engine<R, I>,
    tx: Vec<DmaBuf<u8>>,
    rx: Vec<DmaBuf<u8>>,
    tx_ring: DescRing,
    rx_ring: DescRing,
    completion: Completion,
    batch: usize,
    slot_bytes: usize,
}

impl<'e, R: RegisterSpace, I: IrqLine> PacketRing<'e, R, I> {
    /// Sets the ring up and hands every RX buffer to S2MM. Descriptors are handed
    /// over `batch` at a time (at least 1; a wait flushes what is pending).
    pub fn new(
        engine: &'e Engine<R, I>,
        slots: usize,
        slot_bytes: usize,
        batch: usize,
        completion: Completion,
    ) -> Result<Self, Error> {
        if completion == Completion::Proxy {
            return Err(Error::ProxyOnly);
        }
        if slot_bytes == 0 || slots == 0 {
            return Err(Error::Empty);
        }
        let max = engine.dma.max_len();
        if slot_bytes > max {
            return Err(crate::axi::Error::TooLong {
                channel: Channel::S2mm,
                len: slot_bytes,
                max,
            }
            .into());
        }
        let pool = &engine.pool;
        let bufs = || -> Result<Vec<DmaBuf<u8>>, Error> {
            (0..slots)
                .map(|_| pool.alloc::<u8>(slot_bytes).map_err(Error::from))
                .collect()
        };
        let (tx, rx) = (bufs()?, bufs()?);
        let irq = completion == Completion::Irq;
        // One descriptor more than buffers: a ring keeps one descriptor unused.
        let descs = || pool.alloc::<u32>((slots + 1) * DESC_WORDS);
        let tx_ring = engine.dma.ring_start(Channel::Mm2s, descs()?, irq)?;
        let mut rx_ring = engine.dma.ring_start(Channel::S2mm, descs()?, irq)?;
        for b in &rx {
            rx_ring.push(b.bus_addr(), slot_bytes, max)?;
        }
        engine.dma.ring_flush(&mut rx_ring)?;
        Ok(PacketRing {
            engine,
            tx,
            rx,
            tx_ring,
            rx_ring,
            completion,
            batch: batch.max(1),
            slot_bytes,
        })
    }

    /// Bytes each buffer holds.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Buffers per direction.
    pub fn slots(&self) -> usize {
        self.tx.len()
    }

    fn how(&self, ch: Channel) -> Wait<'_> {
        match self.completion {
            Completion::Irq => Wait::Irq(&self.engine.irq[ch as usize]),
            Completion::Yield => Wait::Yield,
            _ => Wait::Poll,
        }
    }

    /// Sends a packet of `len` bytes, filled in place by `fill` (zero-copy). Waits
    /// for a free TX buffer when all are in flight.
    pub fn send_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), Error> {
        if len == 0 {
            return Err(Error::Empty);
        }
        if len > self.slot_bytes {
            return Err(Error::TooLong {
                len,
                capacity: self.slot_bytes,
            });
        }
        // Reclaim what the engine has finished with; wait only when all are busy.
        while self.tx_ring.completed().is_some() {
            self.tx_ring.reclaim();
        }
        if self.tx_ring.is_full() {
            self.engine.dma.ring_flush(&mut self.tx_ring)?;
            let how = self.how(Channel::Mm2s);
            self.engine.dma.ring_wait(&self.tx_ring, &how)?;
            self.tx_ring.reclaim();
        }
        // Buffers are used in turn, as descriptors are.
        let slot = (self.tx_ring.pushed() % self.tx.len() as u64) as usize;
        let buf = &mut self.tx[slot];
        fill(&mut buf.as_mut_slice()[..len]);
        buf.sync_for_device(len)?;
        self.tx_ring
            .push(buf.bus_addr(), len, self.engine.dma.max_len())?;
        if self.tx_ring.unflushed() >= self.batch {
            self.engine.dma.ring_flush(&mut self.tx_ring)?;
        }
        Ok(())
    }

    /// Sends a copy of `data` (standard I/O).
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        self.send_with(data.len(), |b| b.copy_from_slice(data))
    }

    /// Hands every packet sent so far to the engine.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.engine.dma.ring_flush(&mut self.tx_ring)?;
        self.engine.dma.ring_flush(&mut self.rx_ring)?;
        Ok(())
    }

    /// Waits for the next packet and lets `read` look at it in place (zero-copy);
    /// the buffer goes back to S2MM afterwards.
    pub fn recv_with<T>(&mut self, read: impl FnOnce(&[u8]) -> T) -> Result<T, Error> {
        self.engine.dma.ring_flush(&mut self.tx_ring)?;
        let how = self.how(Channel::S2mm);
        let status = self.engine.dma.ring_wait(&self.rx_ring, &how)?;
        self.take(status, read)
    }

    /// Like [`recv_with`](Self::recv_with) but returns `None` at once when no
    /// packet has arrived.
    pub fn try_recv_with<T>(&mut self, read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Error> {
        match self.rx_ring.completed() {
            Some(status) => self.take(status, read).map(Some),
            None => Ok(None),
        }
    }

    fn take<T>(&mut self, status: u32, read: impl FnOnce(&[u8]) -> T) -> Result<T, Error> {
        let slot = (self.rx_ring.reclaimed() % self.rx.len() as u64) as usize;
        let n = (status & DESC_LENGTH_MASK) as usize;
        if status & DESC_STS_RXEOF == 0 {
            return Err(Error::TooLong {
                len: n + 1,
                capacity: self.slot_bytes,
            });
        }
        let buf = &self.rx[slot];
        buf.sync_for_cpu(n)?;
        let out = read(&buf.as_slice()[..n]);
        self.rx_ring.reclaim();
        self.rx_ring
            .push(buf.bus_addr(), self.slot_bytes, self.engine.dma.max_len())?;
        if self.rx_ring.unflushed() >= self.batch {
            self.engine.dma.ring_flush(&mut self.rx_ring)?;
        }
        Ok(out)
    }

    /// Receives the next packet into `out` (standard I/O); returns its length.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        let cap = out.len();
        self.recv_with(|p| {
            if p.len() > cap {
                return Err(Error::TooLong {
                    len: p.len(),
                    capacity: cap,
                });
            }
            out[..p.len()].copy_from_slice(p);
            Ok(p.len())
        })?
    }
}

impl<R: RegisterSpace, I: IrqLine> Drop for PacketRing<'_, R, I> {
    fn drop(&mut self) {
        // Stop the engine before its buffers go back to the pool.
        let _ = self.engine.dma.reset();
    }
}
