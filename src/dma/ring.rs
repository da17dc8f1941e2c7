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
///
/// With [`Completion::Adaptive`] a receive that has several packets ahead of
/// it on the link waits for half of them by the link's rate
/// ([`Link::expected`](super::Link::expected)): a timer nap when that is
/// long, a spin when short, then the interrupt; the next pass drains the
/// half that arrived while the other half keeps the link busy. The ring
/// counts the times its stream stalled the link ([`starved`](Self::starved)).
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
    /// Packets sent and not yet received, and their bytes (what the link
    /// has ahead of the oldest awaited packet, in a loopback or a core that
    /// answers each packet).
    ahead: usize,
    ahead_bytes: usize,
    /// Counters of the stream (see [`Starved`]).
    starved: Starved,
    /// An overrun was counted and no receive buffer has been handed back
    /// to S2MM since: the same stall is not counted twice.
    rx_stall_counted: bool,
    /// A TX flush has handed packets to MM2S before.
    tx_started: bool,
}

/// The times a [`PacketRing`]'s stream stalled the link, counted by the ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Starved {
    /// Underruns: a send found MM2S done with every packet handed to it (the
    /// link idled waiting for the program). Counted once per flush of new
    /// packets after the first; a stream that sends one packet and waits for
    /// its answer counts one per packet.
    pub underruns: u64,
    /// Overruns: a receive found every buffer handed to S2MM full (the
    /// device had nowhere to write). Counted once per stall: again only
    /// after buffers were handed back.
    pub overruns: u64,
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
            ahead: 0,
            ahead_bytes: 0,
            starved: Starved::default(),
            rx_stall_counted: false,
            tx_started: false,
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

    /// The underruns and overruns the ring has counted so far.
    pub fn starved(&self) -> Starved {
        self.starved
    }

    fn how(&self, ch: Channel) -> Wait<'e> {
        match self.completion {
            Completion::Irq => Wait::Irq(&self.engine.irq[ch as usize]),
            Completion::Yield => Wait::Yield,
            Completion::Adaptive => {
                let link = self.engine.link();
                let wait = if ch == Channel::S2mm && self.ahead > 1 {
                    // Packets queued ahead: wait for half of them by the
                    // link (a nap when that is long), so that one pass then
                    // drains half the ring while the other half keeps the
                    // link busy (NAPI's batch; blk-mq's half-time sleep). A
                    // thread that sleeps is picked soon after it wakes
                    // beside a busy program; one that spins per packet
                    // spends its share.
                    link.expected(self.ahead_bytes / 2)
                } else {
                    // A packet's time on the link from now: the oldest
                    // packet waited for is usually on its way already.
                    link.spin(self.slot_bytes)
                };
                Wait::Adaptive {
                    line: &self.engine.irq[ch as usize],
                    spin_until: std::time::Instant::now() + wait,
                }
            }
            _ => Wait::Poll,
        }
    }

    /// Hands what was pushed on TX to MM2S, counting an underrun when MM2S
    /// had finished everything before.
    fn flush_tx(&mut self) -> Result<(), Error> {
        if self.tx_ring.unflushed() == 0 {
            return Ok(());
        }
        if self.tx_started && self.tx_ring.drained() {
            self.starved.underruns += 1;
        }
        self.tx_started = true;
        let flushed = self.engine.dma.ring_flush(&mut self.tx_ring);
        self.guard(flushed)
    }

    /// Hands the receive buffers given back to S2MM.
    fn flush_rx(&mut self) -> Result<(), Error> {
        if self.rx_ring.unflushed() > 0 {
            self.rx_stall_counted = false;
        }
        let flushed = self.engine.dma.ring_flush(&mut self.rx_ring);
        self.guard(flushed)
    }

    /// Counts an overrun if every buffer handed to S2MM is full (once per
    /// stall).
    fn note_rx_stall(&mut self) {
        if !self.rx_stall_counted && self.rx_ring.drained() {
            self.rx_stall_counted = true;
            self.starved.overruns += 1;
        }
    }

    /// A packet of `len` bytes came back.
    fn received(&mut self, len: usize) {
        self.ahead = self.ahead.saturating_sub(1);
        self.ahead_bytes = if self.ahead == 0 {
            0
        } else {
            self.ahead_bytes.saturating_sub(len)
        };
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
            self.flush_tx()?;
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
            self.flush_tx()?;
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
        self.ahead += 1;
        self.ahead_bytes += len;
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
        self.flush_tx()?;
        Ok(n)
    }

    /// Sends a copy of `data` (standard I/O).
    pub fn send(&mut self, data: &[u8]) -> Result<(), Error> {
        self.send_with(data.len(), |b| crate::copies::copy(b, data))
    }

    /// Hands every packet sent so far to the engine.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.running()?;
        self.flush_tx()?;
        self.flush_rx()
    }

    /// Waits for the oldest S2MM descriptor's completion (flushing what was sent
    /// first); returns its status word without giving it back.
    fn next_status(&mut self) -> Result<u32, Error> {
        self.running()?;
        self.flush_tx()?;
        let how = self.how(Channel::S2mm);
        let waited = self.engine.dma.ring_wait(&self.rx_ring, &how);
        // Nothing arrives when a packet's read failed on MM2S: that
        // descriptor's error is the cause to name.
        let waited = waited.map_err(|e| self.tx_error().unwrap_or(e));
        let status = self.guard(waited)?;
        self.note_rx_stall();
        Ok(status)
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
            Some(status) => {
                self.note_rx_stall();
                self.take(status, read).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Whether the next `count` receive buffers have all been written by
    /// S2MM (`count` packets of one buffer each have arrived), read from the
    /// status of the last of them alone; takes nothing and waits for
    /// nothing. `false` when `count` is 0 or more than the buffers handed to
    /// S2MM, or when the ring has stopped.
    pub fn arrived(&self, count: usize) -> bool {
        !self.stopped && self.rx_ring.completed_through(count)
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
            self.flush_rx()?;
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
                self.flush_rx()?;
                return self.take(status, |_| ()).map(|()| got);
            }
            let n = (status & DESC_LENGTH_MASK) as usize;
            let buf = &self.rx[self.rx_ring.oldest()];
            buf.sync_for_cpu(n)?;
            read(&buf.as_slice()[..n]);
            // Clean and invalidate before the buffer is the device's again.
            buf.sync_for_cpu(self.slot_bytes)?;
            self.reclaim_rx()?;
            self.received(n);
            got += 1;
            if got == max {
                break;
            }
            match self.rx_ring.completed() {
                Some(s) => status = s,
                None => break,
            }
        }
        self.flush_rx()?;
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
                self.flush_rx()?;
                let s = self.next_status()?;
                len += (s & DESC_LENGTH_MASK) as usize;
                self.repost_oldest()?;
                if s & DESC_STS_RXEOF != 0 {
                    self.received(len);
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
        self.received(n);
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
