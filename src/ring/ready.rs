//! Readiness futures: a reader or a writer of a queue waiting in async code,
//! without a thread of its own per queue.
//!
//! `reader.readable(threshold).await` resolves once `threshold` items are
//! readable (or the writer is gone); `writer.writable(n).await` once `n` slots
//! are free. Then the non-blocking calls ([`Reader::try_peek`],
//! [`Writer::try_reserve`]) succeed. The other side wakes the waiting task
//! when it publishes or releases, as it wakes a sleeping thread, so the queue
//! must wait in [`Wait::Block`](super::Wait::Block) mode (the default); in the other modes
//! nothing wakes a task, and a pending future asks its executor to poll it
//! again at once (a busy wait through the executor). Any executor works
//! (tokio's, a single-threaded one running both ends included).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{Error, Pod, Reader, Writer};

/// The future of [`Reader::readable`].
#[must_use = "a future does nothing unless awaited"]
pub struct Readable<'a, T> {
    reader: &'a mut Reader<T>,
    threshold: usize,
}

impl<T: Pod> Future for Readable<'_, T> {
    /// The items readable, at least the threshold unless the writer is gone
    /// (then possibly fewer, and 0 at the end of the stream).
    type Output = Result<usize, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.reader.side.poll_available(this.threshold, cx)
    }
}

/// The future of [`Writer::writable`].
#[must_use = "a future does nothing unless awaited"]
pub struct Writable<'a, T> {
    writer: &'a mut Writer<T>,
    n: usize,
}

impl<T: Pod> Future for Writable<'_, T> {
    /// `Ok` once the slots are free; [`Error::Closed`] when every reader is
    /// gone, [`Error::ReserveTooLarge`] beyond the capacity.
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.writer.side.poll_free(this.n, cx)
    }
}

impl<T: Pod> Reader<T> {
    /// Resolves once at least `threshold` items are readable or the writer is
    /// gone; [`try_peek`](Reader::try_peek) with the same threshold then
    /// returns them. Wakes through the writer only in [`Wait::Block`](super::Wait::Block) mode.
    pub fn readable(&mut self, threshold: usize) -> Readable<'_, T> {
        Readable {
            reader: self,
            threshold,
        }
    }
}

impl<T: Pod> Writer<T> {
    /// Resolves once `n` slots are free; [`try_reserve`](Writer::try_reserve)
    /// of `n` then returns them. Wakes through the readers only in
    /// [`Wait::Block`](super::Wait::Block) mode.
    pub fn writable(&mut self, n: usize) -> Writable<'_, T> {
        Writable { writer: self, n }
    }
}
