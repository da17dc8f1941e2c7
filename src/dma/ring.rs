//! A ring of DMA buffers on a scatter-gather engine, for streams of packets: the
//! application fills TX buffers in place and reads RX buffers in place (zero-copy)
//! or copies through them (standard I/O); descriptors are handed to the engine in
//! batches with one TAILDESC write, and the channels run without halting.
//!
//! The ring owns its buffers. After a timeout or an engine error it stops (every
//! later call is [`Error::Stopped`]) with the engine halted; if the engine cannot
//! be halted, the buffers are lost to it and never return to the pool.

use super::{Completion, Engine, Error};
use crate::axi::{
    self, Channel, Coalescing, DESC_WORDS, DescRing, Wait, regs::DESC_LENGTH_MASK,
    regs::DESC_STS_RXEOF,
};
use crate::mem::DmaBuf;
use crate::platform::{IrqLine, RegisterSpace};

/// A ring of `slots` TX and `slots` RX buffers of `slot_bytes` each on an engine
/// with scatter-gather.
///
/// Packets go one at a time ([`send_with`](Self::send_with),
/// [`recv_with`](Self::recv_with)) or by the burst
/// ([`send_burst_with`](Self::send_burst_with): one TAILDESC write per burst;
/// [`recv_burst_with`](Self::recv_burst_with): one wait, then every packet
/// already complete, their buffers handed back with one TAILDESC write). Each
/// descriptor is bound to one buffer for good, so reusing it writes its STATUS
/// (and CONTROL when the length changes) and nothing else; TX descriptors are
/// reclaimed only once fewer than a threshold are free, by reading the status
/// of the newest one handed over (like DPDK's `tx_free_thresh`).
pub struct PacketRing<'e, R: RegisterSpace, I: IrqLine> {
    engine: &'e Engine<R, I>,
    tx: Vec<DmaBuf<u8>>,
    rx: Vec<DmaBuf<u8>>,
    tx_ring: DescRing,
    rx_ring: DescRing,
    completion: Completion,
    batch: usize,
    slot_bytes: usize,
    stopped: bool,
    /// TX descriptors are reclaimed (their statuses read) only when fewer
    /// than this many are free, all at once.
    tx_free_threshold: usize,
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
        Self::with_coalescing(
            engine,
            slots,
            slot_bytes,
            batch,
            completion,
            Coalescing::NONE,
        )
    }

    /// Like [`new`](Self::new), with both channels' interrupts coalesced
    /// (PG021 IRQThreshold and IRQDelay): a waiting [`Completion::Irq`] or
    /// [`Completion::Adaptive`] call then wakes once per `threshold` packets,
    /// or when the delay timer runs out after the last of fewer. A threshold
    /// above 1 without a delay can leave a last partial batch waiting until
    /// the driver's timeout: give a delay with it.
    pub fn with_coalescing(
        engine: &'e Engine<R, I>,
        slots: usize,
        slot_bytes: usize,
        batch: usize,
        completion: Completion,
        coalescing: Coalescing,
    ) -> Result<Self, Error> {
        if completion == Completion::Proxy {
            return Err(Error::ProxyOnly);
        }
        if slot_bytes == 0 || slots == 0 {
            return Err(Error::Empty);
        }
        let max = engine.dma.max_len();
        if slot_bytes > max {
            return Err(axi::Error::TooLong {
                channel: Channel::S2mm,
                len: slot_bytes,
                max,
            }
            .into());
        }
        let pool = &engine.pool;
        // One descriptor more than `slots` (a ring keeps one unused), and a
        // buffer bound to each descriptor for good.
        let bufs = || -> Result<Vec<DmaBuf<u8>>, Error> {
            (0..=slots)
                .map(|_| pool.alloc::<u8>(slot_bytes).map_err(Error::from))
                .collect()
        };
        let (tx, rx) = (bufs()?, bufs()?);
        let irq = completion.sleeps();
        let descs = || pool.alloc::<u32>((slots + 1) * DESC_WORDS);
        let (dma, c) = (&engine.dma, coalescing);
        let tx_ring = dma.ring_start_coalesced(Channel::Mm2s, descs()?, irq, c)?;
        let rx_ring = dma.ring_start_coalesced(Channel::S2mm, descs()?, irq, c)?;
        let mut ring = PacketRing {
            engine,
            tx,
            rx,
            tx_ring,
            rx_ring,
            completion,
            batch: batch.max(1),
            slot_bytes,
            stopped: false,
            tx_free_threshold: (slots / 4).clamp(1, 32),
        };
        for b in &ring.rx {
            // No dirty line may be written back over what S2MM writes.
            b.sync_for_cpu(slot_bytes)?;
        }
        for _ in 0..slots {
            let slot = ring.rx_ring.next_slot();
            // SAFETY: the ring owns `rx[slot]` until its Drop, which halts the
            // engine first or surrenders the buffers to it when it cannot.
            let pushed = unsafe { ring.rx_ring.push(ring.rx[slot].bus_addr(), slot_bytes, max) };
            ring.guard(pushed)?;
        }
        let flushed = engine.dma.ring_flush(&mut ring.rx_ring);
        ring.guard(flushed)?;
        Ok(ring)
    }

    /// Bytes each buffer holds.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Packets per direction that can be in flight at once.
    pub fn slots(&self) -> usize {
        self.tx_ring.capacity()
    }

    fn how(&self, ch: Channel) -> Wait<'e> {
        match self.completion {
            Completion::Irq => Wait::Irq(&self.engine.irq[ch as usize]),
            Completion::Yield => Wait::Yield,
            Completion::Adaptive => Wait::Adaptive {
                line: &self.engine.irq[ch as usize],
                // A packet's time on the link from now: the oldest packet
                // waited for is usually on its way already.
                spin_until: std::time::Instant::now() + self.engine.link().spin(self.slot_bytes),
            },
            _ => Wait::Poll,
        }
    }

    /// Passes `r` on; an error stops the ring with the engine halted (the driver
    /// has recovered it from timeouts and device errors; anything else is
    /// recovered here), or with every buffer lost to it when it cannot be halted.
    fn guard<T>(&mut self, r: Result<T, axi::Error>) -> Result<T, Error> {
        r.map_err(|e| {
            let e = Error::from(e);
            if !self.stopped {
                self.stopped = true;
                let halted = if e.recovered() {
                    !self.engine.dma.is_failed()
                } else {
                    self.engine.dma.recover()
                };
                if halted {
                    self.tx_ring.engine_halted();
                    self.rx_ring.engine_halted();
                } else {
                    self.surrender();
                }
            }
            e
        })
    }

    /// Gives every buffer and descriptor up to an engine that could not be halted.
    fn surrender(&mut self) {
        for b in self.tx.iter_mut().chain(self.rx.iter_mut()) {
            b.surrender();
        }
        self.tx_ring.surrender();
        self.rx_ring.surrender();
    }

    fn running(&self) -> Result<(), Error> {
        if self.stopped {
            return Err(Error::Stopped);
        }
        Ok(())
    }

    /// Checks that the ring runs and that a packet of `len` bytes fits a slot.
    fn ready_to_send(&self, len: usize) -> Result<(), Error> {
        self.running()?;
        if len == 0 {
            return Err(Error::Empty);
        }
        if len > self.slot_bytes {
            return Err(Error::TooLong {
                len,
                capacity: self.slot_bytes,
            });
        }
        Ok(())
    }

    /// Sends a packet of `len` bytes, filled in place by `fill` (zero-copy). Waits
    /// for a free TX buffer when all are in flight.
    pub fn send_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), Error> {
        self.ready_to_send(len)?;
        self.make_tx_room()?;
        self.push_tx(len, fill)?;
        if self.tx_ring.unflushed() >= self.batch {
            let flushed = self.engine.dma.ring_flush(&mut self.tx_ring);
            self.guard(flushed)?;
        }
        Ok(())
    }

    /// Reclaims TX descriptors once fewer than the threshold are free, and
    /// waits for the oldest when none is.
    fn make_tx_room(&mut self) -> Result<(), Error> {
        if self.tx_ring.capacity() - self.tx_ring.in_flight() < self.tx_free_threshold {
            // Every descriptor handed over by one status read when the newest
            // is done (the usual case), else one by one.
            let all = self.tx_ring.posted_in_flight();
            if self.tx_ring.reclaim_batch(all) == 0 {
                while self.tx_ring.completed().is_some() {
                    self.tx_ring.reclaim();
                }
                if let Some(e) = self.tx_error() {
                    return self.guard(Err(e));
                }
            }
        }
        if self.tx_ring.is_full() {
            let flushed = self.engine.dma.ring_flush(&mut self.tx_ring);
            self.guard(flushed)?;
            let how = self.how(Channel::Mm2s);
            let waited = self.engine.dma.ring_wait(&self.tx_ring, &how);
            self.guard(waited)?;
            self.tx_ring.reclaim();
        }
        Ok(())
    }

    /// Fills the TX buffer of the next descriptor with `fill` and pushes it
    /// (not yet handed over). The caller made room and checked `len`.
    fn push_tx(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), Error> {
        // Each descriptor has its own buffer.
        let slot = self.tx_ring.next_slot();
        let buf = &mut self.tx[slot];
        fill(&mut buf.as_mut_slice()[..len]);
        buf.sync_for_device(len)?;
        // SAFETY: the ring owns `buf` and does not hand it out again before its
        // descriptor is reclaimed; its Drop halts the engine first or surrenders
        // the buffer to it.
        let pushed = unsafe {
            self.tx_ring
                .push(buf.bus_addr(), len, self.engine.dma.max_len())
        };
        self.guard(pushed)?;
        Ok(())
    }

    /// Sends up to `count` packets of `len` bytes each, packet `i` of the
    /// burst filled in place by `fill(i, buffer)` (zero-copy), and hands them
    /// to the engine with one TAILDESC write. Sends as many as there are free
    /// TX buffers (waiting for one only when none is) and returns how many it
    /// sent; packets keep their order.
    pub fn send_burst_with(
        &mut self,
        count: usize,
        len: usize,
        mut fill: impl FnMut(usize, &mut [u8]),
    ) -> Result<usize, Error> {
        self.ready_to_send(len)?;
        if count == 0 {
            return Ok(0);
        }
        self.make_tx_room()?;
        let n = count.min(self.tx_ring.capacity() - self.tx_ring.in_flight());
        for i in 0..n {
            self.push_tx(len, |b| fill(i, b))?;
        }
        let flushed = self.engine.dma.ring_flush(&mut self.tx_ring);
        self.guard(flushed)?;
        Ok(n)
    }

    /// Sends a copy of `data` (standard I/O).
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        self.send_with(data.len(), |b| crate::copies::copy(b, data))
    }

    /// Hands every packet sent so far to the engine.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.running()?;
        let flushed = self.engine.dma.ring_flush(&mut self.tx_ring);
        self.guard(flushed)?;
        let flushed = self.engine.dma.ring_flush(&mut self.rx_ring);
        self.guard(flushed)
    }

    /// Waits for the oldest S2MM descriptor's completion (flushing what was sent
    /// first); returns its status word without giving it back.
    fn next_status(&mut self) -> Result<u32, Error> {
        self.running()?;
        let flushed = self.engine.dma.ring_flush(&mut self.tx_ring);
        self.guard(flushed)?;
        let how = self.how(Channel::S2mm);
        let waited = self.engine.dma.ring_wait(&self.rx_ring, &how);
        // Nothing arrives when a packet's read failed on MM2S: that
        // descriptor's error is the cause to name.
        let waited = waited.map_err(|e| self.tx_error().unwrap_or(e));
        self.guard(waited)
    }

    /// The MM2S descriptor error, if the oldest descriptor in flight reports
    /// one (the engine halted with it).
    fn tx_error(&self) -> Option<axi::Error> {
        let s = self.tx_ring.errored()?;
        self.engine.dma.recover();
        Some(axi::Error::Descriptor {
            channel: Channel::Mm2s,
            what: axi::decode_descriptor_errors(s),
            status: s,
        })
    }

    /// Waits for the next packet and lets `read` look at it in place (zero-copy);
    /// the buffer goes back to S2MM afterwards. A packet longer than one buffer is
    /// dropped with [`Error::PacketTooLong`].
    pub fn recv_with<T>(&mut self, read: impl FnOnce(&[u8]) -> T) -> Result<T, Error> {
        let status = self.next_status()?;
        self.take(status, read)
    }

    /// Like [`recv_with`](Self::recv_with) but returns `None` at once when no
    /// packet has arrived.
    pub fn try_recv_with<T>(&mut self, read: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Error> {
        self.running()?;
        match self.rx_ring.completed() {
            Some(status) => self.take(status, read).map(Some),
            None => Ok(None),
        }
    }

    /// Receives the next packet into `out` (standard I/O); returns its length. If
    /// `out` is shorter than the packet, [`Error::OutTooShort`] says so and the
    /// packet stays queued for the next call.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        let status = self.next_status()?;
        let n = (status & DESC_LENGTH_MASK) as usize;
        if status & DESC_STS_RXEOF != 0 && n > out.len() {
            return Err(Error::OutTooShort {
                len: n,
                capacity: out.len(),
            });
        }
        self.take(status, |p| {
            crate::copies::copy(&mut out[..p.len()], p);
            p.len()
        })
    }

    /// Gives the oldest RX descriptor's buffer back to S2MM.
    fn repost_oldest(&mut self) -> Result<(), Error> {
        self.reclaim_rx()?;
        if self.rx_ring.unflushed() >= self.batch {
            let flushed = self.engine.dma.ring_flush(&mut self.rx_ring);
            self.guard(flushed)?;
        }
        Ok(())
    }

    /// Reclaims the oldest RX descriptor and pushes the free one at the head
    /// with its own buffer (not yet handed over).
    fn reclaim_rx(&mut self) -> Result<(), Error> {
        self.rx_ring.reclaim();
        let slot = self.rx_ring.next_slot();
        // SAFETY: as for every RX buffer: owned by the ring until its Drop halts
        // the engine or surrenders the buffer; the descriptor at the head is
        // free, so its buffer is not the device's.
        let pushed = unsafe {
            self.rx_ring.push(
                self.rx[slot].bus_addr(),
                self.slot_bytes,
                self.engine.dma.max_len(),
            )
        };
        self.guard(pushed)?;
        Ok(())
    }

    /// Waits for the next packet, then takes it and every packet already
    /// complete after it, up to `max`, each read in place by `read` (zero-copy),
    /// in order; their buffers go back to S2MM with one TAILDESC write at the
    /// end. Returns how many packets were read (at least 1 when `max` > 0). A
    /// packet longer than one buffer ends the burst with
    /// [`Error::PacketTooLong`] (the packets before it were read).
    pub fn recv_burst_with(
        &mut self,
        max: usize,
        mut read: impl FnMut(&[u8]),
    ) -> Result<usize, Error> {
        if max == 0 {
            return self.running().map(|()| 0);
        }
        let mut status = self.next_status()?;
        let mut got = 0;
        loop {
            if status & DESC_STS_RXEOF == 0 {
                let flushed = self.engine.dma.ring_flush(&mut self.rx_ring);
                self.guard(flushed)?;
                return self.take(status, |_| ()).map(|()| got);
            }
            let n = (status & DESC_LENGTH_MASK) as usize;
            let buf = &self.rx[self.rx_ring.oldest()];
            buf.sync_for_cpu(n)?;
            read(&buf.as_slice()[..n]);
            // Clean and invalidate before the buffer is the device's again.
            buf.sync_for_cpu(self.slot_bytes)?;
            self.reclaim_rx()?;
            got += 1;
            if got == max {
                break;
            }
            match self.rx_ring.completed() {
                Some(s) => status = s,
                None => break,
            }
        }
        let flushed = self.engine.dma.ring_flush(&mut self.rx_ring);
        self.guard(flushed)?;
        Ok(got)
    }

    /// Hands the packet whose first descriptor completed with `status` to `read`,
    /// then gives its buffer back to S2MM. A packet that spans several buffers
    /// (no RXEOF on its first) is drained, every buffer given back, and reported.
    fn take<T>(&mut self, status: u32, read: impl FnOnce(&[u8]) -> T) -> Result<T, Error> {
        let n = (status & DESC_LENGTH_MASK) as usize;
        if status & DESC_STS_RXEOF == 0 {
            let mut len = n;
            self.repost_oldest()?;
            loop {
                let flushed = self.engine.dma.ring_flush(&mut self.rx_ring);
                self.guard(flushed)?;
                let s = self.next_status()?;
                len += (s & DESC_LENGTH_MASK) as usize;
                self.repost_oldest()?;
                if s & DESC_STS_RXEOF != 0 {
                    return Err(Error::PacketTooLong {
                        len,
                        slot: self.slot_bytes,
                    });
                }
            }
        }
        let buf = &self.rx[self.rx_ring.oldest()];
        buf.sync_for_cpu(n)?;
        let out = read(&buf.as_slice()[..n]);
        // Clean and invalidate before the buffer is the device's again.
        buf.sync_for_cpu(self.slot_bytes)?;
        self.repost_oldest()?;
        Ok(out)
    }
}

impl<R: RegisterSpace, I: IrqLine> Drop for PacketRing<'_, R, I> {
    fn drop(&mut self) {
        // Stop the engine before its buffers go back to the pool; if it cannot be
        // stopped, they are lost to it.
        if !self.stopped {
            if self.engine.dma.recover() {
                self.tx_ring.engine_halted();
                self.rx_ring.engine_halted();
            } else {
                self.surrender();
            }
        }
    }
}
