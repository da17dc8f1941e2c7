//! Running an async node body on a thread: one body serves both kinds of
//! node, a task on the worker pool ([`super::Graph::task`]) and a thread of
//! its own ([`super::Graph::node`] calling [`block_on`]).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// Wakes the thread that waits in [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `body` to its end on the calling thread, sleeping while it waits:
/// the ports' async methods then wait as their blocking forms do. For a
/// thread node whose body is written once for both kinds of node:
///
/// ```
/// use dmaflow::graph::{Graph, Input, block_on};
/// async fn drain(mut inp: Input<u8>) -> dmaflow::graph::NodeResult {
///     while !inp.peek_async(1).await?.is_empty() {
///         let n = inp.peek_async(1).await?.len();
///         inp.consume(n)?;
///     }
///     Ok(())
/// }
/// let mut g = Graph::new();
/// let (mut out, inp) = g.connect::<u8>(("source", "out"), ("sink", "in"))?;
/// g.task("source", async move { Ok(out.write_async(&[1, 2, 3]).await?) })?;
/// g.node("sink", move || block_on(drain(inp)))?;
/// g.run()?;
/// # Ok::<(), dmaflow::graph::Error>(())
/// ```
///
/// # Panics
///
/// Called inside a task node (on a worker of the pool), where sleeping would
/// hold the worker and could hang the graph: a task awaits the future
/// instead. The panic stops the graph with that node's
/// [`super::Error::Panicked`].
pub fn block_on<F: Future>(body: F) -> F::Output {
    assert!(
        !super::pool::on_worker(),
        "dmaflow::graph::block_on called inside a task node: a task awaits the future instead \
         (block_on is for thread nodes)"
    );
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut body = std::pin::pin!(body);
    loop {
        if let Poll::Ready(out) = super::runtime::poll_node(body.as_mut(), &mut cx, u32::MAX, None)
        {
            return out;
        }
        // A wake before this park makes it return at once; a spurious
        // return polls again, which a waiting port tolerates.
        std::thread::park();
    }
}
