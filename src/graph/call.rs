//! The future of a task's port call (`peek_async`, `reserve_async`, ...):
//! at its first poll the call is tried without waiting, inlined into the
//! caller's own poll (most hand-overs need no wait); only a call that must
//! wait becomes the runtime's wait, built in place inside the future (no
//! allocation per wait). The call's state and its wait are separate fields,
//! so that the fast path moves only the small call out, never the wait's
//! state, and its result never goes through memory.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A port call tried at once.
pub(super) trait PortCall: Sized {
    /// What the call returns.
    type Output;
    /// The call's result if it need not wait, else the call back with
    /// whether the poll's budget was spent.
    fn now(self) -> Result<Self::Output, (Self, bool)>;
}

/// The future of port call `C`, waiting with `W` (given the call and
/// whether the budget was spent) where it must.
pub(super) struct Call<C, W, F> {
    /// The call and its wait until first polled.
    start: Option<(C, W)>,
    /// The wait, once the call had to wait (pinned with the future: never
    /// moved once set).
    wait: Option<F>,
}

impl<C, W, F> Call<C, W, F>
where
    C: PortCall,
    W: FnOnce(C, bool) -> F,
    F: Future<Output = C::Output>,
{
    /// Call `call`, waiting with `wait` where it must.
    #[inline(always)]
    pub(super) fn new(call: C, wait: W) -> Self {
        Call {
            start: Some((call, wait)),
            wait: None,
        }
    }

    /// The wait, pinned with the future.
    #[inline(always)]
    fn wait(self: Pin<&mut Self>) -> Pin<&mut Option<F>> {
        // SAFETY: `wait` is structurally pinned: it is never moved out of
        // a pinned `Call` (only set in place and polled through this pin),
        // `Call` has no `Drop` that could move it, and `Call` is `Unpin`
        // only where `F` is.
        unsafe { self.map_unchecked_mut(|c| &mut c.wait) }
    }

    /// The call must wait: its wait, built in place.
    #[cold]
    #[inline(never)]
    fn begin_wait(self: Pin<&mut Self>, call: C, wait: W, spent: bool) {
        self.wait().set(Some(wait(call, spent)));
    }

    /// Polls the wait.
    #[inline(never)]
    fn poll_wait(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let mut wait = self.wait();
        let Some(w) = wait.as_mut().as_pin_mut() else {
            panic!("a port call's future polled after it was ready")
        };
        let out = w.poll(cx);
        if out.is_ready() {
            // Dropped in place (the wait's borrows end with the call).
            wait.set(None);
        }
        out
    }
}

impl<C, W, F> Future for Call<C, W, F>
where
    C: PortCall + Unpin,
    W: FnOnce(C, bool) -> F + Unpin,
    F: Future<Output = C::Output>,
{
    type Output = C::Output;

    // Inlined into the caller's poll: a call that need not wait costs its
    // own checks and nothing else.
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        // SAFETY: `start` is not structurally pinned (`C` and `W` are
        // `Unpin`, and it is only taken out by value).
        let start = unsafe { &mut self.as_mut().get_unchecked_mut().start };
        if let Some((call, wait)) = start.take() {
            match call.now() {
                Ok(out) => return Poll::Ready(out),
                Err((call, spent)) => self.as_mut().begin_wait(call, wait, spent),
            }
        }
        self.poll_wait(cx)
    }
}
