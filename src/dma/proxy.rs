//! The structure of a kernel DMA driver (Xilinx dma-proxy): a driver thread owns
//! the engine and copies through its own DMA buffers.

use super::{Completion, Engine, Error, Timing};
use crate::axi;
use crate::mem::DmaBuf;
use crate::platform::{IrqLine, RegisterSpace};

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
    /// The driver thread's CPU time so far, in nanoseconds (updated after every
    /// request, before the reply).
    cpu_ns: std::sync::Arc<std::sync::atomic::AtomicU64>,
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
        let cpu_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let cpu = cpu_ns.clone();
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
                    if result.is_err() {
                        // After a failure the buffers are not reused: the engine
                        // was halted before the error came back, or they were
                        // lost to it.
                        bufs = None;
                    }
                    cpu.store(
                        crate::platform::cpu::thread_cpu_time().as_nanos() as u64,
                        std::sync::atomic::Ordering::Release,
                    );
                    // The caller may have gone; nothing to do then.
                    let _ = req.reply.send(result);
                }
            })?;
        Ok(Proxy {
            requests: Some(tx),
            cpu_ns,
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

    /// CPU time the driver thread has used so far (as of its last reply): the
    /// host cost of the kernel-style path beside the caller's own.
    pub fn driver_cpu_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.cpu_ns.load(std::sync::atomic::Ordering::Acquire))
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
