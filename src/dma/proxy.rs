//! The structure of a kernel DMA driver (Xilinx dma-proxy): a driver thread owns
//! the engines and copies through its own DMA buffers.

use super::{Completion, Engine, Error, Lane, Timing, two_way_together};
use crate::axi;
use crate::mem::DmaBuf;
use crate::platform::{IrqLine, RegisterSpace};

/// What one engine of a request sends, and how many bytes may come back.
type Job = (Vec<u8>, usize);

/// What the driver thread answers: what each engine received, and the first
/// engine's timing.
type Answer = Result<(Vec<Vec<u8>>, Timing), Error>;

/// One request to the proxy's driver thread: a job per engine.
struct Request {
    jobs: Vec<Job>,
    reply: std::sync::mpsc::SyncSender<Answer>,
}

/// The structure of a kernel DMA driver such as Xilinx dma-proxy: a driver thread
/// owns the engines and their DMA buffers; each call hands it the caller's data
/// (the "system call"), the thread copies it into DMA memory, programs the
/// engines, sleeps on their interrupts, copies the results out and wakes the
/// caller. A coprocessor with several streams (one engine each) is driven as
/// one: every engine's transfer starts before any is waited for.
pub struct Proxy {
    requests: Option<std::sync::mpsc::Sender<Request>>,
    engines: usize,
    /// The driver thread's CPU time so far, in nanoseconds (updated after every
    /// request, before the reply).
    cpu_ns: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
    timing: std::cell::Cell<Timing>,
}

/// The driver thread's side of one request: copies in, transfers on every
/// engine together, copies out. `bufs` are the driver's DMA buffers (kept while
/// large enough).
fn serve<R: RegisterSpace, I: IrqLine>(
    engines: &[Engine<R, I>],
    bufs: &mut Vec<(DmaBuf<u8>, DmaBuf<u8>)>,
    jobs: Vec<Job>,
) -> Answer {
    if jobs.len() != engines.len() {
        return Err(Error::Lanes {
            got: jobs.len(),
            engines: engines.len(),
        });
    }
    if jobs
        .iter()
        .any(|(data, rx_len)| data.is_empty() || *rx_len == 0)
    {
        return Err(Error::Empty);
    }
    // Reuse the driver's DMA buffers while they are large enough.
    let fits = bufs.len() == jobs.len()
        && bufs
            .iter()
            .zip(&jobs)
            .all(|((t, r), (data, rx_len))| t.len() >= data.len() && r.len() >= *rx_len);
    if !fits {
        bufs.clear();
        for (e, (data, rx_len)) in engines.iter().zip(&jobs) {
            bufs.push((e.pool().alloc::<u8>(data.len())?, e.pool().alloc(*rx_len)?));
        }
    }
    for ((t, _), (data, _)) in bufs.iter_mut().zip(&jobs) {
        crate::copies::copy(&mut t.as_mut_slice()[..data.len()], data);
    }
    let mut lanes: Vec<Lane<'_, R, I>> = engines
        .iter()
        .zip(bufs.iter_mut())
        .zip(&jobs)
        .map(|((engine, (t, r)), (data, rx_len))| Lane {
            engine,
            tx: t,
            tx_len: data.len(),
            rx: r,
            rx_len: *rx_len,
        })
        .collect();
    let received = two_way_together(&mut lanes, Completion::Irq)?;
    drop(lanes);
    let out = jobs
        .into_iter()
        .zip(bufs.iter())
        .zip(received)
        .map(|(((mut v, _), (_, r)), n)| {
            v.clear();
            v.extend_from_slice(&r.as_slice()[..n]);
            v
        })
        .collect();
    Ok((out, engines[0].last_timing()))
}

impl Proxy {
    /// Starts the driver thread, which takes the engine over.
    pub fn start<R, I>(engine: Engine<R, I>) -> std::io::Result<Self>
    where
        R: RegisterSpace + Send + 'static,
        I: IrqLine + Send + 'static,
    {
        Self::start_all(vec![engine])
    }

    /// Starts the driver thread for a coprocessor with several streams, one
    /// engine each, all taken over by the thread. At least one engine is needed.
    pub fn start_all<R, I>(engines: Vec<Engine<R, I>>) -> std::io::Result<Self>
    where
        R: RegisterSpace + Send + 'static,
        I: IrqLine + Send + 'static,
    {
        if engines.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a proxy driver needs at least one DMA engine",
            ));
        }
        let count = engines.len();
        let (tx, rx) = std::sync::mpsc::channel::<Request>();
        let cpu_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let cpu = cpu_ns.clone();
        let thread = std::thread::Builder::new()
            .name("dmaflow-proxy".into())
            .spawn(move || {
                let mut bufs = Vec::new();
                for req in rx {
                    let result = serve(&engines, &mut bufs, req.jobs);
                    if result.is_err() {
                        // After a failure the buffers are not reused: the engines
                        // were halted before the error came back, or they were
                        // lost to them.
                        bufs.clear();
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
            engines: count,
            cpu_ns,
            thread: Some(thread),
            timing: std::cell::Cell::new(Timing::default()),
        })
    }

    /// Sends `data` and returns what comes back (at most `rx_len` bytes), blocking
    /// until the driver thread has done the transfer. The vector is reused for the
    /// answer. For a proxy with one engine.
    pub fn transfer(&self, data: Vec<u8>, rx_len: usize) -> Result<Vec<u8>, Error> {
        let mut out = self.transfer_all(vec![(data, rx_len)])?;
        Ok(out.pop().unwrap_or_default())
    }

    /// One transfer on every engine at once: `jobs[i]` is what engine `i` sends
    /// and how many bytes it may receive; returns what each received, in the
    /// same order (the vectors are reused for the answers). Blocks until the
    /// driver thread has done them all.
    pub fn transfer_all(&self, jobs: Vec<(Vec<u8>, usize)>) -> Result<Vec<Vec<u8>>, Error> {
        if jobs.len() != self.engines {
            return Err(Error::Lanes {
                got: jobs.len(),
                engines: self.engines,
            });
        }
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
            .send(Request { jobs, reply })
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

    /// Where the driver thread's time went in the last transfer on its first
    /// engine (its own view: the hand-over to and from the caller is not
    /// included).
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
