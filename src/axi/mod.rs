//! A register-exact driver for the Xilinx AXI DMA IP (PG021), direct register mode,
//! written against [`RegisterSpace`] and [`IrqLine`] only: the same code drives a
//! real board through UIO and the emulated fabric.

pub mod regs;
mod ring;

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::mem::DmaBuf;
use crate::platform::{self, IrqLine, RegisterSpace};
use regs::*;
pub use ring::DescRing;

/// Which of the engine's two channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Memory-mapped to stream: reads memory, feeds the stream.
    Mm2s,
    /// Stream to memory-mapped: writes what the stream delivers.
    S2mm,
}

impl Channel {
    /// Offset of the channel's registers.
    pub fn base(self) -> usize {
        match self {
            Channel::Mm2s => MM2S,
            Channel::S2mm => S2MM,
        }
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Mm2s => "MM2S",
            Channel::S2mm => "S2MM",
        })
    }
}

/// What went wrong with the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer-length register width is outside 8..=26 bits.
    #[error("buffer length register width {0} is outside 8..=26 bits")]
    BadLengthWidth(u32),
    /// A transfer of zero bytes.
    #[error("{channel}: a transfer of zero bytes")]
    ZeroLength {
        /// The channel.
        channel: Channel,
    },
    /// A transfer longer than the buffer-length register holds.
    #[error("{channel}: {len} bytes is more than the {max}-byte limit of the length register")]
    TooLong {
        /// The channel.
        channel: Channel,
        /// Bytes asked for.
        len: usize,
        /// Largest transfer.
        max: usize,
    },
    /// The engine reported an error (decoded from DMASR); the engine has been reset.
    #[error("{channel}: {what} (DMASR {dmasr:#010x}); the engine was reset")]
    Device {
        /// The channel.
        channel: Channel,
        /// The error bits by name.
        what: String,
        /// DMASR as read.
        dmasr: u32,
    },
    /// The engine did not finish in time.
    #[error("{channel}: no completion within {timeout:?} (DMASR {dmasr:#010x})")]
    Timeout {
        /// The channel.
        channel: Channel,
        /// How long we waited.
        timeout: Duration,
        /// DMASR when we gave up.
        dmasr: u32,
    },
    /// More descriptors needed than the descriptor ring holds.
    #[error("{channel}: {needed} descriptors needed, the ring holds {capacity}")]
    RingFull {
        /// The channel.
        channel: Channel,
        /// Descriptors the transfer needs.
        needed: usize,
        /// Descriptors in the ring.
        capacity: usize,
    },
    /// The engine was built without scatter-gather (DMASR.SGIncld is 0).
    #[error("{0}: the engine has no scatter-gather engine (SGIncld is 0)")]
    NoSg(Channel),
    /// Waited on a descriptor ring with nothing handed to the engine.
    #[error("{0}: no descriptor in flight to wait for")]
    RingEmpty(Channel),
    /// The register window or interrupt line failed.
    #[error(transparent)]
    Platform(#[from] platform::Error),
}

/// How a caller learns that a transfer finished.
pub enum Wait<'a> {
    /// Busy-poll DMASR.
    Poll,
    /// Poll DMASR, yielding the CPU between reads.
    Yield,
    /// Sleep on the channel's interrupt line.
    Irq(&'a dyn IrqLine),
}

/// Driver settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Width of the buffer-length register in bits (the IP's c_sg_length_width).
    pub length_width: u32,
    /// Longest wait for any completion.
    pub timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            length_width: 23,
            timeout: Duration::from_secs(1),
        }
    }
}

/// Names the error bits of a DMASR value.
pub fn decode_errors(dmasr: u32) -> String {
    let names = [
        (DMASR_DMA_INT_ERR, "DMAIntErr"),
        (DMASR_DMA_SLV_ERR, "DMASlvErr"),
        (DMASR_DMA_DEC_ERR, "DMADecErr"),
        (DMASR_SG_INT_ERR, "SGIntErr"),
        (DMASR_SG_SLV_ERR, "SGSlvErr"),
        (DMASR_SG_DEC_ERR, "SGDecErr"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| dmasr & bit != 0)
        .map(|&(_, n)| n)
        .collect();
    v.join("+")
}

/// An AXI DMA engine in direct register mode.
pub struct AxiDma<R> {
    regs: R,
    cfg: Config,
    /// Bytes of the transfer in flight per channel (MM2S, S2MM).
    pending: [Cell<usize>; 2],
    /// Last DMACR and address-MSB values written per channel, so that a start
    /// writes only the registers that change (None after a reset).
    written_cr: [Cell<Option<u32>>; 2],
    written_msb: [Cell<Option<u32>>; 2],
    /// Whether the channel's interrupt bits are known to be clear (after a reset
    /// or a collected completion).
    clean: [Cell<bool>; 2],
}

impl<R: RegisterSpace> AxiDma<R> {
    /// A driver for the engine behind `regs`; resets it.
    pub fn new(regs: R, cfg: Config) -> Result<Self, Error> {
        if !(8..=26).contains(&cfg.length_width) {
            return Err(Error::BadLengthWidth(cfg.length_width));
        }
        let dma = AxiDma {
            regs,
            cfg,
            pending: [Cell::new(0), Cell::new(0)],
            written_cr: [Cell::new(None), Cell::new(None)],
            written_msb: [Cell::new(None), Cell::new(None)],
            clean: [Cell::new(false), Cell::new(false)],
        };
        dma.reset()?;
        Ok(dma)
    }

    /// Largest transfer the length register allows.
    pub fn max_len(&self) -> usize {
        (1usize << self.cfg.length_width) - 1
    }

    fn reg(&self, ch: Channel, r: usize) -> Result<u32, Error> {
        Ok(self.regs.read(ch.base() + r)?)
    }

    fn set(&self, ch: Channel, r: usize, v: u32) -> Result<(), Error> {
        Ok(self.regs.write(ch.base() + r, v)?)
    }

    /// Reads a channel's DMASR.
    pub fn status(&self, ch: Channel) -> Result<u32, Error> {
        self.reg(ch, DMASR)
    }

    /// Soft-resets the engine (both channels) and waits for the reset to finish.
    pub fn reset(&self) -> Result<(), Error> {
        self.set(Channel::Mm2s, DMACR, DMACR_RESET)?;
        let deadline = Instant::now() + self.cfg.timeout;
        while self.reg(Channel::Mm2s, DMACR)? & DMACR_RESET != 0 {
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    channel: Channel::Mm2s,
                    timeout: self.cfg.timeout,
                    dmasr: self.status(Channel::Mm2s)?,
                });
            }
            std::hint::spin_loop();
        }
        for i in 0..2 {
            self.pending[i].set(0);
            self.written_cr[i].set(None);
            self.written_msb[i].set(None);
            self.clean[i].set(true);
        }
        Ok(())
    }

    /// Writes `value` to register `r` unless the last write there was the same.
    fn set_cached(
        &self,
        ch: Channel,
        r: usize,
        cache: &Cell<Option<u32>>,
        value: u32,
    ) -> Result<(), Error> {
        if cache.get() != Some(value) {
            self.set(ch, r, value)?;
            cache.set(Some(value));
        }
        Ok(())
    }

    /// Starts a direct-mode transfer of `len` bytes at bus address `addr`, with the
    /// completion interrupt enabled if `irq`.
    pub fn start(&self, ch: Channel, addr: u64, len: usize, irq: bool) -> Result<(), Error> {
        if len == 0 {
            return Err(Error::ZeroLength { channel: ch });
        }
        if len > self.max_len() {
            return Err(Error::TooLong {
                channel: ch,
                len,
                max: self.max_len(),
            });
        }
        let mut cr = DMACR_RS | (1 << DMACR_IRQ_THRESHOLD_SHIFT);
        if irq {
            cr |= DMACR_IOC_IRQ_EN | DMACR_ERR_IRQ_EN;
        }
        let i = ch as usize;
        self.set_cached(ch, DMACR, &self.written_cr[i], cr)?;
        // Stale interrupt bits (a completion nobody collected) would end the wait
        // for this transfer early: clear them.
        if !self.clean[i].get() {
            self.set(ch, DMASR, DMASR_IRQ_MASK)?;
        }
        self.clean[i].set(false);
        self.set(ch, ADDR, addr as u32)?;
        self.set_cached(ch, ADDR_MSB, &self.written_msb[i], (addr >> 32) as u32)?;
        self.pending[ch as usize].set(len);
        self.set(ch, LENGTH, len as u32)?;
        Ok(())
    }

    /// Reads DMASR; if it shows an error, names it, resets the engine and fails.
    fn checked_status(&self, ch: Channel) -> Result<u32, Error> {
        let sr = self.status(ch)?;
        if sr & DMASR_ERR_MASK != 0 {
            let what = decode_errors(sr);
            self.reset()?;
            return Err(Error::Device {
                channel: ch,
                what,
                dmasr: sr,
            });
        }
        Ok(sr)
    }

    /// Acknowledges the completion interrupt bit of `ch` (write 1 to clear).
    fn acknowledge(&self, ch: Channel) -> Result<(), Error> {
        self.set(ch, DMASR, DMASR_IOC_IRQ)?;
        self.clean[ch as usize].set(true);
        Ok(())
    }

    /// Checks once whether the transfer on `ch` finished: `Some(bytes)` (for S2MM
    /// the bytes actually received) when it did.
    pub fn poll(&self, ch: Channel) -> Result<Option<usize>, Error> {
        if self.checked_status(ch)? & DMASR_IOC_IRQ == 0 {
            return Ok(None);
        }
        self.acknowledge(ch)?;
        let n = match ch {
            Channel::Mm2s => self.pending[0].get(),
            Channel::S2mm => (self.reg(ch, LENGTH)? & ((1 << self.cfg.length_width) - 1)) as usize,
        };
        self.pending[ch as usize].set(0);
        Ok(Some(n))
    }

    /// Repeats `check` until it gives an answer, waiting between tries as `how`
    /// says, at most the configured timeout; re-arms the interrupt line after.
    fn wait_for<T>(
        &self,
        ch: Channel,
        how: &Wait<'_>,
        mut check: impl FnMut() -> Result<Option<T>, Error>,
    ) -> Result<T, Error> {
        let deadline = Instant::now() + self.cfg.timeout;
        loop {
            if let Some(v) = check()? {
                if let Wait::Irq(line) = how {
                    line.enable()?;
                }
                return Ok(v);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    channel: ch,
                    timeout: self.cfg.timeout,
                    dmasr: self.status(ch)?,
                });
            }
            match how {
                Wait::Poll => std::hint::spin_loop(),
                Wait::Yield => std::thread::yield_now(),
                // Unmask before sleeping: an interrupt taken without a wait (a
                // completion seen by polling, an error) leaves the line masked.
                Wait::Irq(line) => match line.enable().and_then(|()| line.wait(deadline - now)) {
                    Ok(_) | Err(platform::Error::Timeout(_)) => {}
                    Err(e) => return Err(e.into()),
                },
            }
        }
    }

    /// Waits for the transfer on `ch` to finish, at most the configured timeout.
    pub fn wait(&self, ch: Channel, how: &Wait<'_>) -> Result<usize, Error> {
        self.wait_for(ch, how, || self.poll(ch))
    }
}

/// 32-bit words per SG descriptor (0x40 bytes: the descriptor alignment).
pub const DESC_WORDS: usize = (DESC_ALIGN / 4) as usize;

/// A chain of SG descriptors handed to a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgChain {
    /// Descriptors used, from the start of the ring.
    pub descriptors: usize,
}

impl<R: RegisterSpace> AxiDma<R> {
    /// Scatter-gather: writes one descriptor per piece of `segments` (pieces longer
    /// than the length register are split over several descriptors) into `ring`
    /// (a descriptor ring in DMA memory, [`DESC_WORDS`] words per descriptor),
    /// points CURDESC at the first while the channel is halted, sets RS and starts
    /// the engine by writing TAILDESC. MM2S sends the segments as one packet
    /// (TXSOF on the first descriptor, TXEOF on the last); for S2MM the segments are
    /// the buffers to receive into.
    pub fn sg_start(
        &self,
        ch: Channel,
        ring: &mut DmaBuf<u32>,
        segments: &[(u64, usize)],
        irq: bool,
    ) -> Result<SgChain, Error> {
        if self.status(ch)? & DMASR_SG_INCLD == 0 {
            return Err(Error::NoSg(ch));
        }
        let max = self.max_len();
        let mut pieces = Vec::new();
        for &(addr, len) in segments {
            if len == 0 {
                return Err(Error::ZeroLength { channel: ch });
            }
            let mut off = 0;
            while off < len {
                let n = (len - off).min(max);
                pieces.push((addr + off as u64, n));
                off += n;
            }
        }
        if pieces.is_empty() {
            return Err(Error::ZeroLength { channel: ch });
        }
        let capacity = ring.len() / DESC_WORDS;
        if pieces.len() > capacity {
            return Err(Error::RingFull {
                channel: ch,
                needed: pieces.len(),
                capacity,
            });
        }
        let base = ring.bus_addr();
        let desc_addr = |i: usize| base + (i as u64) * DESC_ALIGN;
        let words = ring.as_mut_slice();
        let last = pieces.len() - 1;
        for (i, &(addr, len)) in pieces.iter().enumerate() {
            let d = &mut words[i * DESC_WORDS..(i + 1) * DESC_WORDS];
            d.fill(0);
            let next = desc_addr(if i == last { 0 } else { i + 1 });
            d[(DESC_NXTDESC / 4) as usize] = next as u32;
            d[(DESC_NXTDESC_MSB / 4) as usize] = (next >> 32) as u32;
            d[(DESC_BUFFER_ADDRESS / 4) as usize] = addr as u32;
            d[(DESC_BUFFER_ADDRESS_MSB / 4) as usize] = (addr >> 32) as u32;
            let mut control = len as u32 & DESC_LENGTH_MASK;
            if ch == Channel::Mm2s {
                if i == 0 {
                    control |= DESC_CTRL_TXSOF;
                }
                if i == last {
                    control |= DESC_CTRL_TXEOF;
                }
            }
            d[(DESC_CONTROL / 4) as usize] = control;
        }
        ring.sync_for_device(pieces.len() * DESC_ALIGN as usize)
            .map_err(ring::mem_err)?;
        self.sg_arm(ch, base, irq)?;
        let tail = desc_addr(last);
        self.set(ch, TAILDESC_MSB, (tail >> 32) as u32)?;
        self.set(ch, TAILDESC, tail as u32)?;
        Ok(SgChain {
            descriptors: pieces.len(),
        })
    }

    /// Waits until every descriptor of `chain` reports Cmplt; returns the bytes each
    /// one transferred (for S2MM: received).
    pub fn sg_wait(
        &self,
        ch: Channel,
        ring: &DmaBuf<u32>,
        chain: SgChain,
        how: &Wait<'_>,
    ) -> Result<Vec<usize>, Error> {
        let status = |i: usize| {
            ring.read_volatile(i * DESC_WORDS + (DESC_STATUS / 4) as usize)
                .unwrap_or(0)
        };
        let last = chain.descriptors - 1;
        self.wait_for(ch, how, || {
            self.checked_status(ch)?;
            // S2MM may finish a packet before the last descriptor: its RXEOF ends it.
            let done = (0..=last).find(|&i| {
                let s = status(i);
                s & DESC_STS_CMPLT != 0
                    && (i == last || (ch == Channel::S2mm && s & DESC_STS_RXEOF != 0))
            });
            let Some(end) = done else {
                return Ok(None);
            };
            self.acknowledge(ch)?;
            Ok(Some(
                (0..=end)
                    .map(|i| (status(i) & DESC_LENGTH_MASK) as usize)
                    .collect(),
            ))
        })
    }
}
