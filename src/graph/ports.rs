//! The ports a node reads and writes: `Output` and `Input` ends of a graph's
//! queues, which wait through the runtime so that stalls are seen.

use std::future::Future;
use std::sync::Arc;

use crate::ring::{self, Pod, Reader, Writer};
use crate::sync::Ordering;

use super::call::{Call, PortCall};
use super::error::Error;
use super::runtime::{Edge, ReadEnd, Runtime, Side, WaitError, WriteEnd, out_of_budget};

impl<T: Pod> WriteEnd for Writer<T> {
    fn capacity(&self) -> usize {
        Writer::capacity(self)
    }
    fn position(&self) -> u64 {
        Writer::position(self)
    }
    fn grow(&mut self, min_items: usize) -> Result<(), ring::Error> {
        Writer::grow(self, min_items)
    }
    fn has_room(&mut self, n: usize) -> Result<bool, ring::Error> {
        Writer::has_room(self, n)
    }
}

impl<T: Pod> ReadEnd for Reader<T> {
    fn position(&self) -> u64 {
        Reader::position(self)
    }
    fn ready(&mut self, threshold: usize) -> Result<Option<usize>, ring::Error> {
        match self.try_peek(threshold).map(|s| s.is_some()) {
            Ok(true) => Ok(Some(threshold)),
            Ok(false) => Ok(None),
            // The queue will not grow any more: hand over what is left.
            Err(ring::Error::ThresholdTooLarge { .. }) if self.is_writer_closed() => {
                Ok(Some(self.capacity()))
            }
            Err(ring::Error::ThresholdTooLarge { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The writing end of an edge, owned by one node.
pub struct Output<T: Pod> {
    pub(super) w: Option<Writer<T>>,
    pub(super) edge: Arc<Edge>,
    pub(super) rt: Arc<Runtime>,
    pub(super) node: usize,
    /// The owning node's name (kept here: messages never need the runtime's lock).
    pub(super) name: Arc<str>,
    pub(super) port: String,
}

/// [`Output::reserve_async`] (`n` slots) or [`Output::reserve_up_to_async`]
/// (every free slot up to `n`, at least one).
struct Reserve<'a, T: Pod> {
    out: &'a mut Output<T>,
    n: usize,
    up_to: bool,
}

impl<'a, T: Pod> PortCall for Reserve<'a, T> {
    type Output = Result<&'a mut [T], Error>;

    #[inline(always)]
    fn now(self) -> Result<Self::Output, (Self, bool)> {
        let spent = out_of_budget(self.out.edge.id, Side::Write);
        let want = if self.up_to { self.n.max(1) } else { self.n };
        if let (false, Some(free)) = (spent, self.out.free_now(want))
            && (free == want || self.up_to && free > 0)
            && let Ok(Some(d)) = self.out.writer_mut().try_reserve(free)
        {
            let (ptr, len) = (d.as_mut_ptr(), d.len());
            // SAFETY: `d` is borrowed from `*self.out`, borrowed for `'a`
            // and consumed with `self` here (never used again): the slots
            // are the caller's for `'a`. (The borrow checker cannot see
            // that the early return ends the port's use.)
            return Ok(Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) }));
        }
        // Anything else (an error included) takes the waiting path, which
        // reports it.
        Err((self, spent))
    }
}

impl<'a, T: Pod> Reserve<'a, T> {
    /// The call where it must wait.
    async fn wait(self, spent: bool) -> Result<&'a mut [T], Error> {
        let Reserve { out, n, up_to } = self;
        out.wait_room_async(if up_to { 1 } else { n }, spent)
            .await?;
        if up_to {
            out.reserve_free_up_to(n)
        } else {
            out.reserve_free(n)
        }
    }
}

/// [`Input::peek_async`].
struct Peek<'a, T: Pod> {
    inp: &'a mut Input<T>,
    threshold: usize,
}

impl<'a, T: Pod> PortCall for Peek<'a, T> {
    type Output = Result<&'a [T], Error>;

    #[inline(always)]
    fn now(self) -> Result<Self::Output, (Self, bool)> {
        let spent = out_of_budget(self.inp.edge.id, Side::Read);
        if !spent
            && !self.inp.rt.aborted()
            && let Ok(Some(s)) = self.inp.reader_mut().try_peek(self.threshold)
        {
            let (ptr, len) = (s.as_ptr(), s.len());
            // SAFETY: `s` is borrowed from `*self.inp`, borrowed for `'a`
            // and consumed with `self` here (never used again): the items
            // are the caller's to read for `'a`. (The borrow checker cannot
            // see that the early return ends the port's use.)
            return Ok(Ok(unsafe { std::slice::from_raw_parts(ptr, len) }));
        }
        // Anything else (an error included) takes the waiting path, which
        // reports it.
        Err((self, spent))
    }
}

impl<'a, T: Pod> Peek<'a, T> {
    /// The call where it must wait.
    async fn wait(self, spent: bool) -> Result<&'a [T], Error> {
        let Peek { inp, threshold } = self;
        let (r, at) = inp.parts();
        let waited = at
            .rt
            .wait_items_async(at.node, at.edge, r, threshold, spent);
        let t = waited.await.map_err(|e| at.err(e))?;
        inp.peek_ready(t)
    }
}

/// A port's error for a wait that ended without what it waited for (out of
/// the line of the calls that return it).
#[cold]
#[inline(never)]
fn wait_error(name: &str, port: &str, e: WaitError) -> Error {
    match e {
        WaitError::Aborted => Error::Aborted {
            node: name.to_string(),
        },
        WaitError::BlockingInTask => Error::BlockingInTask {
            node: name.to_string(),
            port: port.to_string(),
        },
        WaitError::AfterEnd => Error::WaitAfterEnd {
            node: name.to_string(),
            port: port.to_string(),
        },
        WaitError::Shared => Error::PortShared {
            node: name.to_string(),
            port: port.to_string(),
        },
        WaitError::Queue(source) => Error::Port {
            node: name.to_string(),
            port: port.to_string(),
            source,
        },
    }
}

/// What a port's wait needs besides its queue end: borrowed beside the end,
/// so that the blocking and the async form of a call share the rest.
struct At<'a> {
    edge: &'a Edge,
    rt: &'a Arc<Runtime>,
    node: usize,
    name: &'a str,
    port: &'a str,
}

impl At<'_> {
    fn err(&self, e: WaitError) -> Error {
        wait_error(self.name, self.port, e)
    }

    fn queue_err(&self, source: ring::Error) -> Error {
        self.err(WaitError::Queue(source))
    }
}

impl<T: Pod> Output<T> {
    /// The writing end and what its waits need.
    #[inline]
    fn parts(&mut self) -> (&mut Writer<T>, At<'_>) {
        let Output {
            w,
            edge,
            rt,
            node,
            name,
            port,
        } = self;
        // `w` is only taken in `drop`.
        let w = w
            .as_mut()
            .unwrap_or_else(|| unreachable!("output used after drop"));
        let at = At {
            edge,
            rt,
            node: *node,
            name,
            port,
        };
        (w, at)
    }

    #[inline]
    pub(super) fn writer_mut(&mut self) -> &mut Writer<T> {
        self.parts().0
    }

    pub(super) fn port_error(&self, source: ring::Error) -> Error {
        wait_error(&self.name, &self.port, WaitError::Queue(source))
    }

    pub(super) fn aborted(&self) -> Error {
        wait_error(&self.name, &self.port, WaitError::Aborted)
    }

    /// Capacity of the queue in items.
    pub fn capacity(&self) -> usize {
        self.edge.capacity.load(Ordering::Relaxed)
    }

    /// Waits until `n` contiguous slots are free and returns them (growing the
    /// queue if `n` exceeds it).
    pub fn reserve(&mut self, n: usize) -> Result<&mut [T], Error> {
        self.wait_room(n)?;
        self.reserve_free(n)
    }

    /// [`Output::reserve`] for a task node ([`super::Graph::task`]): waits
    /// without holding a thread.
    pub fn reserve_async(&mut self, n: usize) -> impl Future<Output = Result<&mut [T], Error>> {
        let call = Reserve {
            out: self,
            n,
            up_to: false,
        };
        Call::new(call, Reserve::wait)
    }

    /// Waits until at least one slot is free, then reserves every free slot
    /// up to `max` (at least one): what GNU Radio's `work` gets as its
    /// output space. A node that passes on what it read reserves up to what
    /// it read, and copies as much as it was given.
    pub fn reserve_up_to(&mut self, max: usize) -> Result<&mut [T], Error> {
        self.wait_room(1)?;
        self.reserve_free_up_to(max)
    }

    /// [`Output::reserve_up_to`] for a task node.
    pub fn reserve_up_to_async(
        &mut self,
        max: usize,
    ) -> impl Future<Output = Result<&mut [T], Error>> {
        let call = Reserve {
            out: self,
            n: max,
            up_to: true,
        };
        Call::new(call, Reserve::wait)
    }

    /// Slots free now, at most `max`, where a task may take them without
    /// the runtime; `None` where the runtime has something to do (the graph
    /// is stopping, or a growth was asked for). The readers' positions are
    /// looked at only when fewer than `max` were free as last seen.
    #[inline]
    fn free_now(&mut self, max: usize) -> Option<usize> {
        let (w, at) = self.parts();
        if at.rt.aborted() || at.edge.grow_to.load(Ordering::SeqCst) > w.capacity() {
            return None;
        }
        Some(w.free_up_to(max))
    }

    /// Waits, as a thread node, until `n` slots are free (they are then reserved).
    fn wait_room(&mut self, n: usize) -> Result<(), Error> {
        let (w, at) = self.parts();
        at.rt
            .wait_room(at.node, at.edge, w, n)
            .map_err(|e| at.err(e))
    }

    /// Waits, as a task node, until `n` slots are free (they are then
    /// reserved), yielding first if the poll's budget is `spent`.
    async fn wait_room_async(&mut self, n: usize, spent: bool) -> Result<(), Error> {
        let (w, at) = self.parts();
        let waited = at.rt.wait_room_async(at.node, at.edge, w, n, spent).await;
        waited.map_err(|e| at.err(e))
    }

    /// Reserves every free slot up to `max` (at least one, known to be free).
    fn reserve_free_up_to(&mut self, max: usize) -> Result<&mut [T], Error> {
        let k = self.writer_mut().free_up_to(max).max(1);
        self.reserve_free(k)
    }

    /// Reserves `k` slots known to be free.
    #[inline]
    fn reserve_free(&mut self, k: usize) -> Result<&mut [T], Error> {
        let (w, at) = self.parts();
        match w.try_reserve(k) {
            Ok(Some(s)) => Ok(s),
            // Only this writer takes free slots, and it just saw `k` of them.
            Ok(None) => unreachable!("free slots cannot disappear from under the writer"),
            Err(source) => Err(at.queue_err(source)),
        }
    }

    /// Reserves `n` slots for a device to write, waiting for them if `block`
    /// (growing the queue if `n` exceeds it: only while the device holds none
    /// of its slots), without forming a slice over them: some may be slots a
    /// device is writing. `Ok(false)` when they are not free and `!block`.
    pub(crate) fn reserve_for_device(&mut self, n: usize, block: bool) -> Result<bool, Error> {
        if block {
            self.wait_room(n)?;
            return Ok(true);
        }
        if self.rt.aborted() {
            return Err(self.aborted());
        }
        if n > self.capacity() {
            return Ok(false);
        }
        self.writer_mut()
            .has_room(n)
            .map_err(|e| self.port_error(e))
    }

    /// Publishes the first `k` reserved items.
    #[inline]
    pub fn commit(&mut self, k: usize) -> Result<(), Error> {
        if let Err(e) = self.writer_mut().commit(k) {
            return Err(self.port_error(e));
        }
        let position = self.writer_mut().position();
        self.rt.after_commit(&self.edge, position);
        Ok(())
    }

    /// `n` contiguous free slots if they are free now (no waiting; the queue
    /// grows only where a reader asked it to: a threshold beyond the queue,
    /// or slots lent elsewhere when it closed).
    pub fn try_reserve(&mut self, n: usize) -> Result<Option<&mut [T]>, Error> {
        if self.rt.aborted() {
            return Err(self.aborted());
        }
        let (w, at) = self.parts();
        // A reader's threshold beyond the queue asked it to grow: a writer
        // that only polls never blocks where the runtime could grow it, so
        // the request is applied here (growth is not a wait).
        if at.edge.grow_to.load(Ordering::SeqCst) > w.capacity() {
            at.rt
                .apply_growth(at.edge, w, 0)
                .map_err(|source| at.queue_err(source))?;
        }
        if n > w.capacity() {
            return Err(at.queue_err(ring::Error::ReserveTooLarge {
                requested: n,
                capacity: w.capacity(),
            }));
        }
        if !at
            .rt
            .room_without_growth(at.edge, w, n)
            .map_err(|e| at.err(e))?
        {
            return Ok(None);
        }
        w.try_reserve(n).map_err(|source| at.queue_err(source))
    }

    /// Items committed so far.
    pub fn position(&self) -> u64 {
        self.w.as_ref().map_or(0, Writer::position)
    }

    /// Where `n` slots from `from` past the write position lie for a device,
    /// for a queue in DMA memory (see [`Writer::dma_spans`]).
    pub fn dma_spans(&self, from: usize, n: usize) -> Result<Vec<ring::DmaSpan>, Error> {
        let w = self.w.as_ref().ok_or_else(|| self.aborted())?;
        w.dma_spans(from, n).map_err(|e| self.port_error(e))
    }

    /// Cache maintenance of a span the device writes (see [`Writer::sync_for_cpu`]).
    pub fn sync_for_cpu(&self, span: ring::DmaSpan) -> Result<(), Error> {
        let w = self.w.as_ref().ok_or_else(|| self.aborted())?;
        w.sync_for_cpu(span).map_err(|e| self.port_error(e))
    }

    /// Keeps the queue's current memory for a device (see [`ring::MemoryHold`]).
    pub fn hold(&self) -> Option<ring::MemoryHold> {
        self.w.as_ref().map(Writer::hold)
    }

    /// For a queue in DMA memory, which memory (the lending pool's id).
    pub fn dma_memory_id(&self) -> Option<u64> {
        self.w.as_ref().and_then(Writer::dma_memory_id)
    }

    /// For a queue in DMA memory, whether it needs no cache maintenance.
    pub fn dma_coherent(&self) -> Option<bool> {
        self.w.as_ref().and_then(Writer::dma_coherent)
    }

    /// Copies `items` into the queue (in pieces no larger than the queue).
    pub fn write(&mut self, items: &[T]) -> Result<(), Error> {
        let capacity = self.capacity();
        crate::copies::write_in_pieces(self, items, capacity, Self::reserve, Self::commit)
    }

    /// [`Output::write`] for a task node: copies `items` into the queue in
    /// pieces no larger than the queue, waiting without holding a thread.
    pub async fn write_async(&mut self, items: &[T]) -> Result<(), Error> {
        for piece in items.chunks(self.capacity().max(1)) {
            crate::copies::copy(self.reserve_async(piece.len()).await?, piece);
            self.commit(piece.len())?;
        }
        Ok(())
    }
}

impl<T: Pod> Drop for Output<T> {
    fn drop(&mut self) {
        // Whether a reader is still there, recorded before the queue closes;
        // then close it and wake its readers so they see the end.
        if self.w.is_some() {
            self.edge.writer_closing();
        }
        drop(self.w.take());
        self.rt.wake(&self.edge, Side::Read);
    }
}

/// A reading end of an edge, owned by one node.
pub struct Input<T: Pod> {
    pub(super) r: Option<Reader<T>>,
    pub(super) edge: Arc<Edge>,
    pub(super) rt: Arc<Runtime>,
    pub(super) node: usize,
    /// The owning node's name (kept here: messages never need the runtime's lock).
    pub(super) name: Arc<str>,
    pub(super) port: String,
}

impl<T: Pod> Input<T> {
    /// The reading end and what its waits need.
    #[inline]
    fn parts(&mut self) -> (&mut Reader<T>, At<'_>) {
        let Input {
            r,
            edge,
            rt,
            node,
            name,
            port,
        } = self;
        // `r` is only taken in `drop`.
        let r = r
            .as_mut()
            .unwrap_or_else(|| unreachable!("input used after drop"));
        let at = At {
            edge,
            rt,
            node: *node,
            name,
            port,
        };
        (r, at)
    }

    #[inline]
    pub(super) fn reader_mut(&mut self) -> &mut Reader<T> {
        self.parts().0
    }

    pub(super) fn port_error(&self, source: ring::Error) -> Error {
        wait_error(&self.name, &self.port, WaitError::Queue(source))
    }

    /// Waits until at least `threshold` items are readable (growing the queue if the
    /// threshold exceeds it) and returns them; at the end of the stream returns what
    /// is left, and finally an empty slice. A threshold of 0 never waits: it
    /// returns what is readable now, possibly nothing before the end (so a
    /// loop that stops on an empty slice peeks with 1 or more).
    pub fn peek(&mut self, threshold: usize) -> Result<&[T], Error> {
        let (r, at) = self.parts();
        let t = at
            .rt
            .wait_items(at.node, at.edge, r, threshold)
            .map_err(|e| at.err(e))?;
        self.peek_ready(t)
    }

    /// [`Input::peek`] for a task node ([`super::Graph::task`]): waits
    /// without holding a thread.
    pub fn peek_async(&mut self, threshold: usize) -> impl Future<Output = Result<&[T], Error>> {
        let call = Peek {
            inp: self,
            threshold,
        };
        Call::new(call, Peek::wait)
    }

    /// The readable items once a wait for `t` of them has ended.
    #[inline]
    fn peek_ready(&mut self, t: usize) -> Result<&[T], Error> {
        let (r, at) = self.parts();
        r.peek(t).map_err(|source| at.queue_err(source))
    }

    /// The readable items if at least `threshold` are readable now, or the
    /// stream has ended (then what is left, possibly nothing); `None` otherwise.
    /// Never waits and never grows the queue.
    pub fn try_peek(&mut self, threshold: usize) -> Result<Option<&[T]>, Error> {
        let (r, at) = self.parts();
        if at.rt.aborted() {
            return Err(at.err(WaitError::Aborted));
        }
        let Some(t) = r.ready(threshold).map_err(|source| at.queue_err(source))? else {
            return Ok(None);
        };
        r.peek(t).map(Some).map_err(|source| at.queue_err(source))
    }

    /// Where `n` items from `from` past the read position lie for a device, for
    /// a queue in DMA memory (see [`Reader::dma_spans`]).
    pub fn dma_spans(&self, from: usize, n: usize) -> Result<Vec<ring::DmaSpan>, Error> {
        match self.r.as_ref() {
            Some(r) => r.dma_spans(from, n).map_err(|e| self.port_error(e)),
            None => Err(self.port_error(ring::Error::NotDmaMemory)),
        }
    }

    /// Cache maintenance of a span the device reads (see [`Reader::sync_for_device`]).
    pub fn sync_for_device(&self, span: ring::DmaSpan) -> Result<(), Error> {
        match self.r.as_ref() {
            Some(r) => r.sync_for_device(span).map_err(|e| self.port_error(e)),
            None => Err(self.port_error(ring::Error::NotDmaMemory)),
        }
    }

    /// Keeps the queue's current memory for a device (see [`ring::MemoryHold`]).
    pub fn hold(&self) -> Option<ring::MemoryHold> {
        self.r.as_ref().map(Reader::hold)
    }

    /// For a queue in DMA memory, which memory (the lending pool's id).
    pub fn dma_memory_id(&self) -> Option<u64> {
        self.r.as_ref().and_then(Reader::dma_memory_id)
    }

    /// Items consumed so far.
    pub fn position(&self) -> u64 {
        self.r.as_ref().map_or(0, Reader::position)
    }

    /// Releases the first `m` readable items.
    #[inline]
    pub fn consume(&mut self, m: usize) -> Result<(), Error> {
        if let Err(e) = self.reader_mut().consume(m) {
            return Err(self.port_error(e));
        }
        let position = self.reader_mut().position();
        self.rt.after_consume(&self.edge, position);
        Ok(())
    }

    /// Capacity of the queue in items, as this reader last saw it.
    pub fn capacity(&self) -> usize {
        self.r.as_ref().map_or(0, Reader::capacity)
    }

    /// Closes this reading end while slices of it lent elsewhere may still
    /// be read (a Python node that kept a view of its window): the queue's
    /// present memory is kept for them (the hold returned), and the writer
    /// moves the queue to new memory before it reuses any slot this reader
    /// had not consumed, so what they show never changes.
    pub fn close_keeping_memory(self) -> Option<ring::MemoryHold> {
        let hold = self.hold();
        let cap = self.edge.capacity.load(Ordering::SeqCst);
        // Asked before the slots are released (the drop, below): a writer
        // that sees them released sees the request (`Runtime::wait_room`).
        self.edge
            .grow_to
            .fetch_max(cap.saturating_add(1), Ordering::SeqCst);
        drop(self);
        hold
    }
}

impl<T: Pod> Drop for Input<T> {
    fn drop(&mut self) {
        // Counted out before the queue learns of it: a writer that sees the
        // queue without readers (`Closed`) sees this reader gone too.
        self.edge.readers.fetch_sub(1, Ordering::SeqCst);
        drop(self.r.take());
        self.rt.wake(&self.edge, Side::Write);
    }
}
