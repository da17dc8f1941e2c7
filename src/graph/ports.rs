//! The ports a node reads and writes: `Output` and `Input` ends of a graph's
//! queues, which wait through the runtime so that stalls are seen.

use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::{Ordering, fence};

use crate::ring::{self, Pod, Reader, Writer};

use super::Error;
use super::runtime::*;

/// The writing end of an edge, owned by one node.
pub struct Output<T: Pod> {
    pub(super) w: Option<Writer<T>>,
    pub(super) edge: Arc<Edge>,
    pub(super) rt: Arc<Runtime>,
    pub(super) node: usize,
    pub(super) port: String,
}

impl<T: Pod> Output<T> {
    pub(super) fn writer_mut(&mut self) -> &mut Writer<T> {
        // `w` is only taken in `drop`.
        self.w
            .as_mut()
            .unwrap_or_else(|| unreachable!("output used after drop"))
    }

    pub(super) fn port_error(&self, source: ring::Error) -> Error {
        Error::Port {
            node: self.rt.node_name(self.node),
            port: self.port.clone(),
            source,
        }
    }

    pub(super) fn aborted(&self) -> Error {
        Error::Aborted {
            node: self.rt.node_name(self.node),
        }
    }

    /// Grows the queue if a reader's threshold, the runtime or `n` asks for it.
    pub(super) fn apply_growth(&mut self, n: usize) -> Result<(), Error> {
        let want = self.edge.grow_to.load(Ordering::SeqCst).max(n);
        if want > self.writer_mut().capacity() {
            self.writer_mut()
                .grow(want)
                .map_err(|e| self.port_error(e))?;
            let cap = self.writer_mut().capacity();
            self.edge.capacity.store(cap, Ordering::SeqCst);
            // Readers waiting on a threshold the queue could not hold may go on.
            self.rt.wake(&self.edge, Side::Read);
        }
        Ok(())
    }

    /// Whether `n` slots are free (they are then reserved), without forming
    /// a slice over them.
    pub(super) fn has_room(&mut self, n: usize) -> Result<bool, Error> {
        match self.writer_mut().has_room(n) {
            Ok(free) => Ok(free),
            Err(e) => Err(self.port_error(e)),
        }
    }

    /// Capacity of the queue in items.
    pub fn capacity(&self) -> usize {
        self.edge.capacity.load(Ordering::Relaxed)
    }

    /// Waits until `n` contiguous slots are free and returns them (growing the
    /// queue if `n` exceeds it).
    pub fn reserve(&mut self, n: usize) -> Result<&mut [T], Error> {
        self.wait_room(n)?;
        let w = self
            .w
            .as_mut()
            .unwrap_or_else(|| unreachable!("output used after drop"));
        match w.try_reserve(n) {
            Ok(Some(s)) => Ok(s),
            // Only this writer takes free slots, and it just saw `n` of them.
            Ok(None) => unreachable!("free slots cannot disappear from under the writer"),
            Err(source) => Err(Error::Port {
                node: self.rt.node_name(self.node),
                port: self.port.clone(),
                source,
            }),
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
        if self.rt.abort.load(Ordering::Acquire) {
            return Err(self.aborted());
        }
        if n > self.capacity() {
            return Ok(false);
        }
        self.has_room(n)
    }

    /// Waits until `n` slots are free (they are then reserved).
    fn wait_room(&mut self, n: usize) -> Result<(), Error> {
        loop {
            if self.rt.abort.load(Ordering::Acquire) {
                return Err(self.aborted());
            }
            self.apply_growth(n)?;
            if self.has_room(n)? {
                break;
            }
            let rt = self.rt.clone();
            let mut s = lock(&rt.sched);
            s.status[self.node] = Status::Blocked {
                edge: self.edge.id,
                side: Side::Write,
                amount: n,
            };
            let cap = self.writer_mut().capacity() as u64;
            let target = self.writer_mut().position() + n as u64 - cap;
            self.edge.writer_target.store(target, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let grow = self.edge.grow_to.load(Ordering::SeqCst) > cap as usize;
            if !grow && !rt.abort.load(Ordering::SeqCst) && !self.has_room(n)? {
                rt.check_stall(&mut s);
                if matches!(s.status[self.node], Status::Blocked { .. }) {
                    s = self
                        .edge
                        .writer_cv
                        .wait(s)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            s.status[self.node] = Status::Running;
        }
        Ok(())
    }

    /// Publishes the first `k` reserved items.
    pub fn commit(&mut self, k: usize) -> Result<(), Error> {
        if let Err(e) = self.writer_mut().commit(k) {
            return Err(self.port_error(e));
        }
        fence(Ordering::SeqCst);
        if self.edge.readers_target.load(Ordering::SeqCst) <= self.writer_mut().position() {
            self.rt.wake(&self.edge, Side::Read);
        }
        Ok(())
    }

    /// `n` contiguous free slots if they are free now (no waiting, no growth).
    pub fn try_reserve(&mut self, n: usize) -> Result<Option<&mut [T]>, Error> {
        if self.rt.abort.load(Ordering::Acquire) {
            return Err(self.aborted());
        }
        let w = self
            .w
            .as_mut()
            .unwrap_or_else(|| unreachable!("output used after drop"));
        match w.try_reserve(n) {
            Ok(s) => Ok(s),
            Err(source) => Err(Error::Port {
                node: self.rt.node_name(self.node),
                port: self.port.clone(),
                source,
            }),
        }
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
}

impl<T: Pod> Drop for Output<T> {
    fn drop(&mut self) {
        // Close the queue first, then wake its readers so they see the end.
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
    pub(super) port: String,
}

impl<T: Pod> Input<T> {
    pub(super) fn reader_mut(&mut self) -> &mut Reader<T> {
        // `r` is only taken in `drop`.
        self.r
            .as_mut()
            .unwrap_or_else(|| unreachable!("input used after drop"))
    }

    pub(super) fn port_error(&self, source: ring::Error) -> Error {
        Error::Port {
            node: self.rt.node_name(self.node),
            port: self.port.clone(),
            source,
        }
    }

    /// `Some(threshold to use)` once `threshold` items are readable or the stream
    /// has ended.
    pub(super) fn ready(&mut self, threshold: usize) -> Result<Option<usize>, Error> {
        let r = self.reader_mut();
        match r.try_peek(threshold) {
            Ok(Some(_)) => Ok(Some(threshold)),
            Ok(None) => Ok(None),
            Err(ring::Error::ThresholdTooLarge { .. }) => {
                if r.is_writer_closed() {
                    // The queue will not grow any more: hand over what is left.
                    Ok(Some(r.capacity()))
                } else {
                    Ok(None)
                }
            }
            Err(e) => Err(self.port_error(e)),
        }
    }

    /// Waits until at least `threshold` items are readable (growing the queue if the
    /// threshold exceeds it) and returns them; at the end of the stream returns what
    /// is left, and finally an empty slice.
    pub fn peek(&mut self, threshold: usize) -> Result<&[T], Error> {
        if threshold > self.edge.capacity.load(Ordering::SeqCst) {
            self.edge.grow_to.fetch_max(threshold, Ordering::SeqCst);
            self.rt.wake(&self.edge, Side::Write);
        }
        let t = loop {
            if self.rt.abort.load(Ordering::Acquire) {
                return Err(Error::Aborted {
                    node: self.rt.node_name(self.node),
                });
            }
            if let Some(t) = self.ready(threshold)? {
                break t;
            }
            let rt = self.rt.clone();
            let mut s = lock(&rt.sched);
            s.status[self.node] = Status::Blocked {
                edge: self.edge.id,
                side: Side::Read,
                amount: threshold,
            };
            let target = self.reader_mut().position() + threshold as u64;
            self.edge.readers_target.fetch_min(target, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if !rt.abort.load(Ordering::SeqCst) && self.ready(threshold)?.is_none() {
                rt.check_stall(&mut s);
                if matches!(s.status[self.node], Status::Blocked { .. }) {
                    s = self
                        .edge
                        .readers_cv
                        .wait(s)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            s.status[self.node] = Status::Running;
        };
        let r = self
            .r
            .as_mut()
            .unwrap_or_else(|| unreachable!("input used after drop"));
        match r.peek(t) {
            Ok(s) => Ok(s),
            Err(source) => Err(Error::Port {
                node: self.rt.node_name(self.node),
                port: self.port.clone(),
                source,
            }),
        }
    }

    /// The readable items if at least `threshold` are readable now, or the
    /// stream has ended (then what is left, possibly nothing); `None` otherwise.
    /// Never waits and never grows the queue.
    pub fn try_peek(&mut self, threshold: usize) -> Result<Option<&[T]>, Error> {
        if self.rt.abort.load(Ordering::Acquire) {
            return Err(Error::Aborted {
                node: self.rt.node_name(self.node),
            });
        }
        let Some(t) = self.ready(threshold)? else {
            return Ok(None);
        };
        let node = self.node;
        let r = self
            .r
            .as_mut()
            .unwrap_or_else(|| unreachable!("input used after drop"));
        match r.peek(t) {
            Ok(s) => Ok(Some(s)),
            Err(source) => Err(Error::Port {
                node: self.rt.node_name(node),
                port: self.port.clone(),
                source,
            }),
        }
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
    pub fn consume(&mut self, m: usize) -> Result<(), Error> {
        if let Err(e) = self.reader_mut().consume(m) {
            return Err(self.port_error(e));
        }
        fence(Ordering::SeqCst);
        if self.edge.writer_target.load(Ordering::SeqCst) <= self.reader_mut().position() {
            self.rt.wake(&self.edge, Side::Write);
        }
        Ok(())
    }

    /// Capacity of the queue in items, as this reader last saw it.
    pub fn capacity(&self) -> usize {
        self.r.as_ref().map_or(0, Reader::capacity)
    }
}

impl<T: Pod> Drop for Input<T> {
    fn drop(&mut self) {
        drop(self.r.take());
        self.rt.wake(&self.edge, Side::Write);
    }
}
