//! The future of a task's port call (`peek_async`, `reserve_async`, ...):
//! at its first poll the call is tried without waiting, inlined into the
//! caller's own poll (most hand-overs need no wait); only a call that must
//! wait becomes the runtime's wait, on the heap, so that the fast path
//! carries no large state and its result never goes through memory.

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
    state: State<C, W, F>,
}

enum State<C, W, F> {
    /// Not polled yet.
    Start(C, W),
    /// Waiting through the runtime.
    Waiting(Pin<Box<F>>),
    /// Ready returned.
    Done,
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
            state: State::Start(call, wait),
        }
    }

    /// The call must wait: its wait, on the heap.
    #[cold]
    #[inline(never)]
    fn begin_wait(&mut self, call: C, wait: W, spent: bool) {
        self.state = State::Waiting(Box::pin(wait(call, spent)));
    }

    /// Polls the wait.
    #[inline(never)]
    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<C::Output> {
        let State::Waiting(w) = &mut self.state else {
            panic!("a port call's future polled after it was ready")
        };
        let out = w.as_mut().poll(cx);
        if out.is_ready() {
            self.state = State::Done;
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
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<C::Output> {
        let this = self.get_mut();
        if let State::Start(..) = this.state {
            let State::Start(call, wait) = std::mem::replace(&mut this.state, State::Done) else {
                unreachable!("matched above")
            };
            match call.now() {
                Ok(out) => return Poll::Ready(out),
                Err((call, spent)) => this.begin_wait(call, wait, spent),
            }
        }
        this.poll_wait(cx)
    }
}
