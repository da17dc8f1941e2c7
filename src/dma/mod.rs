//! Transfers over an AXI DMA engine, as an application uses them: a two-way
//! transfer (MM2S out, S2MM back) either zero-copy, on [`DmaBuf`]s the application
//! fills and reads in place, or through standard I/O, copying through buffers the
//! driver owns. Completion by busy-polling, polling with `sched_yield`, or
//! interrupts.

mod ring;

pub use ring::PacketRing;

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
    /// Hand the request to a kernel-style driver thread ([`Proxy`]) that copies
    /// through its own DMA buffers and sleeps on the interrupt. The thread owns the
    /// engine, so this mode is used through [`Proxy::start`]; [`Engine`]'s own calls
    /// refuse it with [`Error::ProxyOnly`].
    Proxy,
}

/// How a message is cut into transfers (paper 002).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// One transfer of the whole message.
    Unique,
    /// Transfers of at most this many bytes.
    Blocks(usize),
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
    /// Asked to move more bytes than the buffer holds.
    #[error("cannot move {len} bytes through a {capacity}-byte buffer")]
    TooLong {
        /// Bytes asked for.
        len: usize,
        /// Buffer size.
        capacity: usize,
    },
    /// A transfer of zero bytes.
    #[error("a transfer of zero bytes")]
    Empty,
    /// `Completion::Proxy` given to an engine's own calls.
    #[error("Completion::Proxy runs through dma::Proxy, whose driver thread owns the engine")]
    ProxyOnly,
}

/// Where the time of the last two-way transfer went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timing {
    /// From programming the channels to MM2S completion (summed over blocks).
    pub tx: std::time::Duration,
    /// From MM2S completion to S2MM completion (summed over blocks).
    pub rx: std::time::Duration,
}

/// An AXI DMA engine with its two interrupt lines and its DMA memory.
pub struct Engine<R, I> {
    dma: AxiDma<R>,
    irq: [I; 2],
    pool: DmaPool,
    timing: std::cell::Cell<Timing>,
}

impl<R: RegisterSpace, I: IrqLine> Engine<R, I> {
    /// An engine; `irq_mm2s` and `irq_s2mm` are the channels' interrupt lines.
    pub fn new(dma: AxiDma<R>, irq_mm2s: I, irq_s2mm: I, pool: DmaPool) -> Self {
        Engine {
            dma,
            irq: [irq_mm2s, irq_s2mm],
            pool,
            timing: std::cell::Cell::new(Timing::default()),
        }
    }

    /// Where the time of the last two-way transfer or message went.
    pub fn last_timing(&self) -> Timing {
        self.timing.get()
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
            Completion::Proxy => return Err(Error::ProxyOnly),
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
        let rx_len = rx.len();
        self.two_way_into(tx, tx_len, rx, rx_len, c)
    }

    /// [`two_way`](Self::two_way) receiving into the first `rx_len` bytes of `rx`.
    pub fn two_way_into(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &mut DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<usize, Error> {
        self.check_two_way(tx, tx_len, rx, rx_len, c)?;
        let t0 = self.start_two_way(tx, tx_len, rx, rx_len, c)?;
        let n = self.finish(c, t0)?;
        rx.sync_for_cpu(n)?;
        Ok(n)
    }

    /// Everything that can refuse a two-way transfer, checked before any channel
    /// starts.
    fn check_two_way(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<(), Error> {
        if c == Completion::Proxy {
            return Err(Error::ProxyOnly);
        }
        self.pool.check(tx)?;
        self.pool.check(rx)?;
        if tx_len == 0 || rx_len == 0 {
            return Err(Error::Empty);
        }
        for (len, capacity) in [(tx_len, tx.len()), (rx_len, rx.len())] {
            if len > capacity {
                return Err(Error::TooLong { len, capacity });
            }
        }
        for (channel, len) in [(Channel::Mm2s, tx_len), (Channel::S2mm, rx_len)] {
            if len > self.dma.max_len() {
                return Err(axi::Error::TooLong {
                    channel,
                    len,
                    max: self.dma.max_len(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// Programs S2MM, then MM2S (checked already); returns when MM2S started.
    fn start_two_way(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<std::time::Instant, Error> {
        tx.sync_for_device(tx_len)?;
        self.timing.set(Timing::default());
        self.dma
            .start(Channel::S2mm, rx.bus_addr(), rx_len, c == Completion::Irq)?;
        let t0 = std::time::Instant::now();
        self.dma
            .start(Channel::Mm2s, tx.bus_addr(), tx_len, c == Completion::Irq)?;
        Ok(t0)
    }

    /// Waits for the two-way transfer in flight, started at `t0`; returns the
    /// bytes received and adds its times to the last timing.
    fn finish(&self, c: Completion, t0: std::time::Instant) -> Result<usize, Error> {
        self.wait(Channel::Mm2s, c)?;
        let t1 = std::time::Instant::now();
        let n = self.wait(Channel::S2mm, c)?;
        let mut t = self.timing.get();
        t.tx += t1 - t0;
        t.rx += t1.elapsed();
        self.timing.set(t);
        Ok(n)
    }

    /// Standard-I/O transfer of a whole message, partitioned and buffered as asked:
    /// `Unique` sends it as one transfer, `Blocks(k)` as k-byte blocks (each
    /// answered by its own block); with `depth` driver buffers (2 = double
    /// buffering) the CPU copies the next block in while the current one is in
    /// flight. Returns the bytes received into `out`.
    pub fn send_message(
        &self,
        data: &[u8],
        out: &mut [u8],
        partition: Partition,
        depth: usize,
        c: Completion,
    ) -> Result<usize, Error> {
        if c == Completion::Proxy {
            return Err(Error::ProxyOnly);
        }
        if data.is_empty() || depth == 0 {
            return Err(Error::Empty);
        }
        if out.len() < data.len() {
            return Err(Error::TooLong {
                len: data.len(),
                capacity: out.len(),
            });
        }
        let block = match partition {
            Partition::Unique => data.len(),
            Partition::Blocks(0) => return Err(Error::Empty),
            Partition::Blocks(k) => k.min(data.len()),
        };
        let mut tx = Vec::with_capacity(depth);
        let mut rx = Vec::with_capacity(depth);
        for _ in 0..depth {
            tx.push(self.pool.alloc::<u8>(block)?);
            rx.push(self.pool.alloc::<u8>(block)?);
        }
        let chunks: Vec<&[u8]> = data.chunks(block).collect();
        let mut received = 0;
        // Block i lives in buffer i % depth; the copy of block i + 1 overlaps the
        // transfer of block i.
        tx[0].as_mut_slice()[..chunks[0].len()].copy_from_slice(chunks[0]);
        self.timing.set(Timing::default());
        for (i, chunk) in chunks.iter().enumerate() {
            let b = i % depth;
            tx[b].sync_for_device(chunk.len())?;
            let t0 = std::time::Instant::now();
            self.dma.start(
                Channel::S2mm,
                rx[b].bus_addr(),
                chunk.len(),
                c == Completion::Irq,
            )?;
            self.dma.start(
                Channel::Mm2s,
                tx[b].bus_addr(),
                chunk.len(),
                c == Completion::Irq,
            )?;
            if let Some(next) = chunks.get(i + 1) {
                let nb = (i + 1) % depth;
                if nb != b {
                    tx[nb].as_mut_slice()[..next.len()].copy_from_slice(next);
                }
            }
            let n = self.finish(c, t0)?;
            rx[b].sync_for_cpu(n)?;
            out[received..received + n].copy_from_slice(&rx[b].as_slice()[..n]);
            received += n;
            if let Some(next) = chunks.get(i + 1) {
                let nb = (i + 1) % depth;
                if nb == b {
                    tx[nb].as_mut_slice()[..next.len()].copy_from_slice(next);
                }
            }
        }
        Ok(received)
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

/// One engine's part of a [`two_way_together`] transfer: send the first `tx_len`
/// bytes of `tx`, receive into `rx`.
pub struct Lane<'a, R, I> {
    /// The engine.
    pub engine: &'a Engine<R, I>,
    /// What to send.
    pub tx: &'a DmaBuf<u8>,
    /// Bytes of `tx` to send.
    pub tx_len: usize,
    /// Where the answer goes.
    pub rx: &'a mut DmaBuf<u8>,
}

/// Two-way transfers on several engines at once (a coprocessor with several
/// streams): every lane is checked first, then all are started, then all are
/// waited for. Returns the bytes each lane received.
pub fn two_way_together<R: RegisterSpace, I: IrqLine>(
    lanes: &mut [Lane<'_, R, I>],
    c: Completion,
) -> Result<Vec<usize>, Error> {
    for l in lanes.iter() {
        l.engine
            .check_two_way(l.tx, l.tx_len, l.rx, l.rx.len(), c)?;
    }
    let starts = lanes
        .iter()
        .map(|l| l.engine.start_two_way(l.tx, l.tx_len, l.rx, l.rx.len(), c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut received = Vec::with_capacity(lanes.len());
    for (l, t0) in lanes.iter_mut().zip(starts) {
        let n = l.engine.finish(c, t0)?;
        l.rx.sync_for_cpu(n)?;
        received.push(n);
    }
    Ok(received)
}

/// One request to the proxy's driver thread.
struct Request {
    data: Vec<u8>,
    rx_len: usize,
    reply: std::sync::mpsc::SyncSender<Result<(Vec<u8>, Timing), Error>>,
}

/// The structure of a kernel DMA driver such as Xilinx dma-proxy: a driver thread
/// owns the engine and its DMA buffers; each call hands it the caller's data (the
/// "system call"), the thread copies it into DMA memory, programs the engine, sleeps
/// on the interrupt, copies the result out and wakes the caller.
pub struct Proxy {
    requests: Option<std::sync::mpsc::Sender<Request>>,
    thread: Option<std::thread::JoinHandle<()>>,
    timing: std::cell::Cell<Timing>,
}

impl Proxy {
    /// Starts the driver thread, which takes the engine over.
    pub fn start<R, I>(engine: Engine<R, I>) -> std::io::Result<Self>
    where
        R: RegisterSpace + Send + 'static,
        I: IrqLine + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("dmaflow-proxy".into())
            .spawn(move || {
                let mut bufs: Option<(DmaBuf<u8>, DmaBuf<u8>)> = None;
                for req in rx {
                    let result = (|| {
                        if req.data.is_empty() || req.rx_len == 0 {
                            return Err(Error::Empty);
                        }
                        // Reuse the driver's DMA buffers while they are large enough.
                        let fits = bufs.as_ref().is_some_and(|(t, r)| {
                            t.len() >= req.data.len() && r.len() >= req.rx_len
                        });
                        if !fits {
                            bufs = None;
                            bufs = Some((
                                engine.pool().alloc::<u8>(req.data.len())?,
                                engine.pool().alloc::<u8>(req.rx_len)?,
                            ));
                        }
                        let Some((t, r)) = bufs.as_mut() else {
                            return Err(Error::Empty);
                        };
                        t.as_mut_slice()[..req.data.len()].copy_from_slice(&req.data);
                        let n = engine.two_way_into(
                            t,
                            req.data.len(),
                            r,
                            req.rx_len,
                            Completion::Irq,
                        )?;
                        let mut out = req.data;
                        out.clear();
                        out.extend_from_slice(&r.as_slice()[..n]);
                        Ok((out, engine.last_timing()))
                    })();
                    // The caller may have gone; nothing to do then.
                    let _ = req.reply.send(result);
                }
            })?;
        Ok(Proxy {
            requests: Some(tx),
            thread: Some(thread),
            timing: std::cell::Cell::new(Timing::default()),
        })
    }

    /// Sends `data` and returns what comes back (at most `rx_len` bytes), blocking
    /// until the driver thread has done the transfer. The vector is reused for the
    /// answer.
    pub fn transfer(&self, data: Vec<u8>, rx_len: usize) -> Result<Vec<u8>, Error> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let gone = || {
            Error::Axi(axi::Error::Platform(crate::platform::Error::Io {
                path: "proxy driver thread".into(),
                source: std::io::Error::other("the driver thread has stopped"),
            }))
        };
        self.requests
            .as_ref()
            .ok_or_else(gone)?
            .send(Request {
                data,
                rx_len,
                reply,
            })
            .map_err(|_| gone())?;
        let (out, timing) = answer.recv().map_err(|_| gone())??;
        self.timing.set(timing);
        Ok(out)
    }

    /// Where the driver thread's time went in the last transfer (its own view:
    /// the hand-over to and from the caller is not included).
    pub fn last_timing(&self) -> Timing {
        self.timing.get()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
