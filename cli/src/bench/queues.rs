//! The queues dmaflow's is measured against (rtrb, ringbuf, vmcircbuffer's
//! lock-free variant, a crossbeam channel of batch buffers), ready-made for
//! `ring` and `readers`, and the threads every queue of theirs runs on: one
//! writer and its readers pinned and started together ([`together`]).

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dmaflow::platform::cpu::{allowed_cores, pin};

use super::error::Error;

/// Pins this thread to the `i`-th core this process may use (modulo their
/// number).
pub fn pin_to(i: usize) {
    let cores = allowed_cores(None).unwrap_or_default();
    if let Some(&c) = cores.get(i % cores.len().max(1)) {
        let _ = pin(None, &[c]);
    }
}

/// Runs `writer` and `readers` on threads started together, the writer on
/// the first core allowed and reader i on core i + 1 (modulo the cores), the
/// same for every queue: a pair left to the scheduler sometimes shares a core
/// and its caches, which spreads the runs over 5x. Returns the seconds from
/// the first one's start to the last one's end (each read on its own thread,
/// so a descheduled caller does not shorten the run) and each reader's
/// checksum.
pub fn together<W, R>(
    name: &'static str,
    writer: W,
    readers: Vec<R>,
) -> Result<(f64, Vec<u32>), Error>
where
    W: FnOnce() -> Result<(), Error> + Send,
    R: FnOnce() -> Result<u32, Error> + Send,
{
    let start = Barrier::new(readers.len() + 1);
    let go = |i| {
        pin_to(i);
        start.wait();
        Instant::now()
    };
    std::thread::scope(|s| {
        let w = s.spawn(move || (go(0), writer(), Instant::now()));
        let rs: Vec<_> = (readers.into_iter().enumerate())
            .map(|(i, r)| s.spawn(move || (go(i + 1), r(), Instant::now())))
            .collect();
        let (mut first, done, mut last) = w.join().map_err(|_| Error::Panicked(name))?;
        done?;
        let mut sums = Vec::new();
        for r in rs {
            let (t0, sum, t1) = r.join().map_err(|_| Error::Panicked(name))?;
            sums.push(sum?);
            (first, last) = (first.min(t0), last.max(t1));
        }
        Ok(((last - first).as_secs_f64(), sums))
    })
}

/// [`together`] with one reader: the seconds and its checksum.
pub fn two_threads<P, C>(name: &'static str, producer: P, consumer: C) -> Result<(f64, u32), Error>
where
    P: FnOnce() -> Result<(), Error> + Send,
    C: FnOnce() -> Result<u32, Error> + Send,
{
    first(together(name, producer, vec![consumer]))
}

/// A run's seconds and its one reader's checksum.
pub fn first(run: Result<(f64, Vec<u32>), Error>) -> Result<(f64, u32), Error> {
    run.map(|(secs, sums)| (secs, sums[0]))
}

/// One batch size's stream, in items, and the queue it crosses.
pub struct Shape {
    /// Items in the stream.
    pub items: usize,
    /// Batches the writer puts.
    pub batches: usize,
    /// Items per batch.
    pub batch: usize,
    /// The queue's capacity in items.
    pub queue: usize,
    /// The program that reads in another process.
    pub reader: Option<std::path::PathBuf>,
    /// The readers' looks at the queue that found items, summed (each
    /// reader adds its count once, when it is done: [`Shape::looked`]).
    pub looks: AtomicU64,
}

impl Shape {
    /// Adds one reader's count of looks that found items.
    pub fn looked(&self, looks: u64) {
        self.looks.fetch_add(looks, Ordering::Relaxed);
    }
}

/// How a peer's waiting sides wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waits {
    /// dmaflow's spin-then-yield schedule ([`dmaflow::ring::Backoff`]: spin
    /// as long as a `sched_yield` costs on this machine, then yield), the
    /// one dmaflow's own `Wait::Yield` runs: every queue on equal terms.
    Shared,
    /// What the crate gives a user out of the box: rtrb, ringbuf and
    /// vmcircbuffer's lock-free variant offer no wait (a caller retries at
    /// once, a pause instruction between looks); crossbeam's channel waits
    /// its own way (`send`/`recv`: spin, then park).
    Own,
}

/// The peer queues, each measured by [`lock_free`] or on its own terms.
#[cfg(feature = "peers")]
mod peer {
    use std::mem::MaybeUninit;

    use vmcircbuffer::NoMetadata;
    use vmcircbuffer::lockfree::{Circular, CircularError, Reader};

    use dmaflow::ring::Backoff;

    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{Error, Shape, Waits, first, together, two_threads};
    use crate::bench::peers::{checksum, fill};

    /// One side's wait between two looks, as [`Waits`] says.
    enum Waiter {
        Shared(Backoff),
        Own,
    }

    impl Waiter {
        fn new(waits: Waits) -> Self {
            match waits {
                Waits::Shared => Waiter::Shared(Backoff::new()),
                Waits::Own => Waiter::Own,
            }
        }

        #[inline]
        fn wait(&mut self) {
            match self {
                Waiter::Shared(b) => b.snooze(),
                Waiter::Own => std::hint::spin_loop(),
            }
        }

        #[inline]
        fn reset(&mut self) {
            if let Waiter::Shared(b) = self {
                b.reset();
            }
        }
    }

    /// [`fill`] for uninitialised slots.
    fn fill_uninit(s: &mut [MaybeUninit<f32>], first: u32) {
        for (k, x) in s.iter_mut().enumerate() {
            x.write(f32::from_bits(first.wrapping_add(k as u32)));
        }
    }

    /// A lock-free peer on [`together`]'s threads. The writer puts `batches`
    /// batches of `batch` items, each by `put` (given the batch's first
    /// sequence number) once there is room (`put` gives `false` while there
    /// is none); each reader, until it has read every item, has its `take`
    /// read what is readable and give how many items it read and their
    /// checksum (none: it waits), and adds how many of its looks found
    /// items to `looks` when it is done. Every side waits as `waits` says.
    fn lock_free<T>(
        name: &'static str,
        waits: Waits,
        (batches, batch): (usize, usize),
        mut put: impl FnMut(u32) -> Result<bool, Error> + Send,
        (takes, looks): (Vec<T>, &AtomicU64),
    ) -> Result<(f64, Vec<u32>), Error>
    where
        T: FnMut() -> Result<(usize, u32), Error> + Send,
    {
        let writer = move || {
            let mut backoff = Waiter::new(waits);
            for b in 0..batches {
                while !put((b * batch) as u32)? {
                    backoff.wait();
                }
                backoff.reset();
            }
            Ok(())
        };
        let reader = |mut take: T| {
            move || {
                let (mut sum, mut got, mut found) = (0u32, 0usize, 0u64);
                let mut backoff = Waiter::new(waits);
                while got < batches * batch {
                    match take()? {
                        (0, _) => backoff.wait(),
                        (n, s) => {
                            backoff.reset();
                            sum = sum.wrapping_add(s);
                            got += n;
                            found += 1;
                        }
                    }
                }
                looks.fetch_add(found, Ordering::Relaxed);
                Ok(sum)
            }
        };
        together(name, writer, takes.into_iter().map(reader).collect())
    }

    /// vmcircbuffer's lock-free variant (its `sync` one takes a mutex and a
    /// condition variable per call) of `queue` items, [`lock_free`] with
    /// `readers` readers, each reader taking whatever is readable, or with
    /// `per_take` exactly that many items (the last ones: what is left);
    /// its sides wait as `waits` says, the readers' looks that found items
    /// added to `looks`.
    pub fn vmcircbuffer(
        waits: Waits,
        queue: usize,
        readers: usize,
        (batches, batch): (usize, usize),
        (per_take, looks): (Option<usize>, &AtomicU64),
    ) -> Result<(f64, Vec<u32>), Error> {
        let peer = Error::peer::<CircularError>("vmcircbuffer");
        let mut w = Circular::with_capacity::<f32, NoMetadata>(queue, readers).map_err(peer)?;
        let rs = (0..readers).map(|_| w.add_reader().map_err(peer));
        let rs: Vec<Reader<f32, NoMetadata>> = rs.collect::<Result<_, _>>()?;
        let put = move |first| {
            if w.slice().len() < batch {
                return Ok(false);
            }
            fill(&mut w.slice()[..batch], first);
            w.produce(batch, &[]);
            Ok(true)
        };
        let (least, most) = per_take.map_or((1, usize::MAX), |n| (n, n));
        let take = |mut r: Reader<f32, NoMetadata>| {
            let mut left = batches * batch;
            move || {
                let s = r.slice();
                if s.len() < least.min(left) {
                    return Ok((0, 0));
                }
                let k = most.min(s.len());
                let sum = checksum(&s[..k]);
                r.consume(k);
                left -= k;
                Ok((k, sum))
            }
        };
        let takes = rs.into_iter().map(take).collect();
        lock_free("vmcircbuffer", waits, (batches, batch), put, (takes, looks))
    }

    /// rtrb's queue of `sh.queue` items, written and read in chunks in
    /// place, its sides waiting as `waits` says.
    pub fn rtrb(sh: &Shape, waits: Waits) -> Result<(f64, u32), Error> {
        let (mut p, mut c) = rtrb::RingBuffer::<f32>::new(sh.queue);
        let bi = sh.batch;
        let put = move |first| {
            let Ok(mut chunk) = p.write_chunk_uninit(bi) else {
                return Ok(false);
            };
            let (x, y) = chunk.as_mut_slices();
            let xl = x.len() as u32;
            fill_uninit(x, first);
            fill_uninit(y, first.wrapping_add(xl));
            // SAFETY: both slices were fully initialised just above.
            unsafe { chunk.commit_all() };
            Ok(true)
        };
        let take = move || {
            let n = c.slots();
            if n == 0 {
                return Ok((0, 0));
            }
            let chunk = c.read_chunk(n).map_err(Error::peer("rtrb"))?;
            let (x, y) = chunk.as_slices();
            let sum = checksum(x).wrapping_add(checksum(y));
            chunk.commit_all();
            Ok((n, sum))
        };
        first(lock_free(
            "rtrb",
            waits,
            (sh.batches, sh.batch),
            put,
            (vec![take], &sh.looks),
        ))
    }

    /// ringbuf's heap queue of `sh.queue` items, its vacant and occupied
    /// slices written and read in place, its sides waiting as `waits` says.
    pub fn ringbuf(sh: &Shape, waits: Waits) -> Result<(f64, u32), Error> {
        use ringbuf::traits::{Consumer, Observer, Producer, Raw, Split};
        let (mut p, mut c) = ringbuf::HeapRb::<f32>::new(sh.queue).split();
        let bi = sh.batch;
        let put = move |first| {
            if p.vacant_len() < bi {
                return Ok(false);
            }
            let (x, y) = p.vacant_slices_mut();
            let nx = x.len().min(bi);
            fill_uninit(&mut x[..nx], first);
            fill_uninit(&mut y[..bi - nx], first.wrapping_add(nx as u32));
            // SAFETY: the first `bi` vacant slots were initialised just above.
            unsafe { p.advance_write_index(bi) };
            Ok(true)
        };
        let take = move || {
            let (x, y) = c.as_slices();
            let n = x.len() + y.len();
            let sum = checksum(x).wrapping_add(checksum(y));
            if n > 0 {
                c.skip(n);
            }
            Ok((n, sum))
        };
        first(lock_free(
            "ringbuf",
            waits,
            (sh.batches, sh.batch),
            put,
            (vec![take], &sh.looks),
        ))
    }

    /// A channel of batch buffers: the queue's capacity in batches, each buffer
    /// allocated once and passed back to the producer when read (so the figure is
    /// the channel's, not the allocator's). With [`Waits::Own`] the waits are
    /// crossbeam's own (`send`/`recv`: spin, then park); with [`Waits::Shared`]
    /// each side retries `try_send`/`try_recv` on the shared schedule.
    pub fn crossbeam(sh: &Shape, waits: Waits) -> Result<(f64, u32), Error> {
        use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
        let slots = (sh.queue / sh.batch).max(1);
        let (full_tx, full_rx) = crossbeam_channel::bounded::<Vec<f32>>(slots);
        let (empty_tx, empty_rx) = crossbeam_channel::bounded::<Vec<f32>>(slots);
        for _ in 0..slots {
            empty_tx
                .send(vec![0f32; sh.batch])
                .map_err(Error::peer("crossbeam"))?;
        }
        let gone = || Error::peer::<&str>("crossbeam")("the other side is gone");
        // A receive that waits as `waits` says; `None` once the sender is gone.
        let recv = move |rx: &Receiver<Vec<f32>>, w: &mut Waiter| match waits {
            Waits::Own => rx.recv().ok(),
            Waits::Shared => loop {
                match rx.try_recv() {
                    Ok(v) => {
                        w.reset();
                        break Some(v);
                    }
                    Err(TryRecvError::Empty) => w.wait(),
                    Err(TryRecvError::Disconnected) => break None,
                }
            },
        };
        // A send that waits likewise; the buffer back if the receiver is gone.
        let send = move |tx: &Sender<Vec<f32>>, mut v: Vec<f32>, w: &mut Waiter| match waits {
            Waits::Own => tx.send(v).map_err(|e| e.0),
            Waits::Shared => loop {
                match tx.try_send(v) {
                    Ok(()) => {
                        w.reset();
                        break Ok(());
                    }
                    Err(TrySendError::Full(back)) => {
                        v = back;
                        w.wait();
                    }
                    Err(TrySendError::Disconnected(back)) => break Err(back),
                }
            },
        };
        let (nb, bi) = (sh.batches, sh.batch);
        two_threads(
            "crossbeam",
            move || {
                let mut w = Waiter::new(waits);
                for b in 0..nb {
                    let mut v = recv(&empty_rx, &mut w).ok_or_else(gone)?;
                    fill(&mut v, (b * bi) as u32);
                    send(&full_tx, v, &mut w).map_err(|_| gone())?;
                }
                Ok(())
            },
            move || {
                let mut w = Waiter::new(waits);
                let (mut sum, mut found) = (0u32, 0u64);
                while let Some(v) = recv(&full_rx, &mut w) {
                    found += 1;
                    sum = sum.wrapping_add(checksum(&v));
                    // The producer may be done and gone: nothing then wants it.
                    let _ = send(&empty_tx, v, &mut w);
                }
                sh.looked(found);
                Ok(sum)
            },
        )
    }
}

#[cfg(feature = "peers")]
pub use peer::{crossbeam, ringbuf, rtrb, vmcircbuffer};
