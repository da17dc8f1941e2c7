//! Kahn process networks on zero-copy queues: Computational Process Networks
//! (paper 001, §VI).
//!
//! A [`Graph`] is a set of named nodes, each a Kahn process, joined by one-way
//! typed queues ([`crate::ring`]). A node runs on a thread of its own
//! ([`Graph::node`]) or as a task on the graph's worker pool ([`Graph::task`],
//! one worker per core: a hand-over between tasks is no context switch). A
//! node talks to the rest only through its ports: an [`Output`]
//! (`reserve`/`commit`) and any number of [`Input`]s (`peek(threshold)`/`consume`,
//! the firing threshold of CPN). Reads wait (a thread sleeps, a task yields its
//! worker), so the output of a graph depends only on its input, never on the
//! schedule or the number of workers (Kahn's determinism).
//!
//! A task node keeps these promises when it waits only on its ports: it
//! awaits `peek_async`, `reserve_async` or `write_async` (several at once
//! if it likes: a select or join over port futures waits on all of them, in
//! a task, under [`block_on`] or under another executor's `block_on`) and
//! nothing else that could wait (another future, a lock, a sleep; those
//! belong on a thread node). A blocking port call that would wait is
//! [`Error::BlockingInTask`]; [`block_on`] inside a task panics. A task
//! that goes past [`Graph::set_task_hold_limit`] without reaching a port
//! call (a blocking call, a spin) stops the graph with
//! [`Error::TaskHeldWorker`], naming it and what it last did; only the time
//! since its last port call counts, so a slow stage is never stopped. A
//! task yields its worker at its next port call after
//! [`DEFAULT_TASK_BUDGET`] port calls that did not wait, or once one poll
//! has run [`DEFAULT_TASK_SLICE`] ([`Graph::set_task_budget`],
//! [`Graph::set_task_slice`]), so neither a task whose queues are always
//! ready nor a slow stage keeps the others from their worker. A port
//! future may be dropped before it is ready (the node then simply no longer
//! waits on it).
//!
//! The runtime knows when each node is blocked and on what. When every live
//! node is blocked, it first looks for nodes that each wait to read what
//! another of them would write (a cycle of read waits, such as a feedback
//! loop without its initial items): no growth can free them, so the graph
//! stops with [`Error::Deadlock`] naming the cycle, whatever else waits to
//! write. Otherwise, when a writer waits on a full queue, the smallest such
//! queue grows (at least doubling, Parks' bounded scheduling), so a graph
//! that only looks deadlocked goes on; a queue already at its limit is
//! [`Error::QueueLimit`], naming it and its writer. When every node waits
//! to read, the graph stops with [`Error::Deadlock`] naming the cycle. A node that fails or panics stops the
//! graph with that node's error; the others are woken, stopped and joined.
//!
//! A node whose every reader has finished ends too, as in every SDR runtime's
//! `head` idiom: a write to a queue nobody reads any more returns
//! [`Error::Port`] with [`ring::Error::Closed`], and a node that returns that
//! error when no output of it has a reader left has ended normally (the graph
//! does not fail); while another output still has a reader, it is the
//! graph's error, never a silent truncation. A graph ends, grows a
//! queue or reports: it never hangs.
//!
//! ```
//! use dmaflow::graph::Graph;
//! let mut g = Graph::new();
//! let (mut out, mut inp) = g.connect::<u32>(("count", "out"), ("sum", "in"))?;
//! g.node("count", move || {
//!     for i in 0..1000u32 {
//!         out.write(&[i])?;
//!     }
//!     Ok(())
//! })?;
//! let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
//! let t = total.clone();
//! g.node("sum", move || {
//!     loop {
//!         let s = inp.peek(1)?;
//!         if s.is_empty() {
//!             return Ok(());
//!         }
//!         let n = s.len();
//!         t.fetch_add(s.iter().map(|&x| x as u64).sum(), std::sync::atomic::Ordering::Relaxed);
//!         inp.consume(n)?;
//!     }
//! })?;
//! g.run()?;
//! assert_eq!(total.load(std::sync::atomic::Ordering::Relaxed), 999 * 1000 / 2);
//! # Ok::<(), dmaflow::graph::Error>(())
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::ring::{self, Builder, Pod, Wait};
use crate::sync::lock;

/// Default queue size in bytes when none is given.
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 10;

/// Default limit on the bytes one queue may grow to (4 GiB on 64-bit
/// machines, 256 MiB on 32-bit ones, whose address space holds a mirrored
/// queue twice): see [`Graph::set_queue_limit`].
pub const DEFAULT_QUEUE_LIMIT: usize = if usize::BITS >= 64 {
    4 << 30
} else {
    256 << 20
};

mod block_on;
mod call;
mod error;
mod pool;
mod ports;
mod runtime;

pub use block_on::block_on;
pub use error::{BoxError, Error, NodeResult};
pub use ports::{Input, Output};
use runtime::{Edge, Runtime, Status, run_node};

/// A process network under construction.
pub struct Graph {
    rt: Arc<Runtime>,
    ids: HashMap<String, usize>,
    /// Node names by id, kept outside the runtime's lock.
    names: Vec<Arc<str>>,
    bodies: Vec<Option<Body>>,
    ports: HashSet<(usize, String)>,
    queue_bytes: usize,
    queue_limit: usize,
    workers: Option<usize>,
    task_hold_limit: std::time::Duration,
    task_budget: u32,
    task_slice: std::time::Duration,
}

/// Default for [`Graph::set_task_hold_limit`].
pub const DEFAULT_TASK_HOLD_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Default budget in calls ([`Graph::set_task_budget`]): port calls that
/// did not wait a task makes in one poll before it yields its worker.
pub const DEFAULT_TASK_BUDGET: u32 = 128;

/// Default budget in time ([`Graph::set_task_slice`]): how long one poll of
/// a task runs before the task yields its worker at its next port call.
pub const DEFAULT_TASK_SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// How a node runs.
enum Body {
    /// On a thread of its own ([`Graph::node`]).
    Thread(Box<dyn FnOnce() -> NodeResult + Send>),
    /// As a task on the worker pool ([`Graph::task`]).
    Task(pool::NodeFuture),
}

impl Default for Graph {
    fn default() -> Self {
        Self::new()
    }
}

impl Graph {
    /// An empty graph whose queues default to [`DEFAULT_QUEUE_BYTES`].
    pub fn new() -> Self {
        Graph {
            rt: Arc::new(Runtime::new()),
            ids: HashMap::new(),
            names: Vec::new(),
            bodies: Vec::new(),
            ports: HashSet::new(),
            queue_bytes: DEFAULT_QUEUE_BYTES,
            queue_limit: DEFAULT_QUEUE_LIMIT,
            workers: None,
            task_hold_limit: DEFAULT_TASK_HOLD_LIMIT,
            task_budget: DEFAULT_TASK_BUDGET,
            task_slice: DEFAULT_TASK_SLICE,
        }
    }

    /// The number of worker threads that run the task nodes (default: one
    /// per core the process may use). Never more workers than tasks start,
    /// and at least one (0 counts as 1).
    pub fn set_workers(&mut self, workers: usize) {
        self.workers = Some(workers.max(1));
    }

    /// How long a task node may go without reaching a port call or a
    /// yield (default [`DEFAULT_TASK_HOLD_LIMIT`]). A task waits by
    /// awaiting its ports; one that blocks (a lock, a channel, another
    /// runtime's `block_on`, a sleep) or spins without awaiting holds a
    /// worker the other tasks need, so past this limit the graph stops
    /// with [`Error::TaskHeldWorker`] naming it and what it last did,
    /// instead of hanging. Only the time since the task's last async port
    /// call counts: a slow stage that computes for a long time between its
    /// port calls is never stopped. The worker is left to the blocking call
    /// (never joined) and another takes its place.
    pub fn set_task_hold_limit(&mut self, limit: std::time::Duration) {
        self.task_hold_limit = limit;
    }

    /// The budget in calls (default [`DEFAULT_TASK_BUDGET`], at least 1): a
    /// task yields its worker once one poll has made this many port calls
    /// that did not wait, so a task whose queues are always ready never
    /// starves the others.
    pub fn set_task_budget(&mut self, calls: u32) {
        self.task_budget = calls.clamp(1, u32::MAX - 1);
    }

    /// The budget in time (default [`DEFAULT_TASK_SLICE`]): a task yields
    /// its worker at its first port call after one poll has run this long,
    /// so a slow stage (a large FFT, a decoder) gives its worker back
    /// between its steps. Looked at by the watchdog a few times per slice.
    pub fn set_task_slice(&mut self, slice: std::time::Duration) {
        self.task_slice = slice.max(std::time::Duration::from_millis(1));
    }

    /// The most bytes each queue connected from now on may grow to (default
    /// [`DEFAULT_QUEUE_LIMIT`]). Queues grow for a firing threshold beyond
    /// them and, as Parks' bounded scheduling asks, when every node waits and
    /// a full queue blocks a writer; a threshold or a growth past the limit is
    /// the port's error ([`ring::Error::QueueLimit`]), never memory exhausted.
    pub fn set_queue_limit(&mut self, bytes: usize) {
        self.queue_limit = bytes;
    }

    /// Default queue size in bytes for later connections (rounded up to pages).
    pub fn queue_bytes(mut self, bytes: usize) -> Self {
        self.queue_bytes = bytes;
        self
    }

    fn node_id(&mut self, name: &str) -> usize {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.bodies.len();
        self.ids.insert(name.to_string(), id);
        self.bodies.push(None);
        self.names.push(Arc::from(name));
        lock(&self.rt.sched).add_node(name);
        id
    }

    fn claim_port(&mut self, node: usize, port: &str) -> Result<(), Error> {
        if !self.ports.insert((node, port.to_string())) {
            return Err(Error::DuplicatePort {
                node: self.names[node].to_string(),
                port: port.to_string(),
            });
        }
        Ok(())
    }

    /// Connects output port `from = (node, port)` to input port `to`, with a queue of
    /// the default size.
    pub fn connect<T: Pod>(
        &mut self,
        from: (&str, &str),
        to: (&str, &str),
    ) -> Result<(Output<T>, Input<T>), Error> {
        let items = self.queue_bytes.div_ceil(std::mem::size_of::<T>().max(1));
        self.connect_with_capacity(from, to, items)
    }

    /// Connects `from` to `to` with a queue of at least `min_items` items.
    pub fn connect_with_capacity<T: Pod>(
        &mut self,
        from: (&str, &str),
        to: (&str, &str),
        min_items: usize,
    ) -> Result<(Output<T>, Input<T>), Error> {
        self.connect_queue(from, to, min_items, None)
    }

    /// Connects `from` to `to` with a queue of at least `min_items` items in
    /// DMA memory from `memory` (and grown there), so that an accelerator node
    /// ([`crate::accel::stage`]) can hand its slots to a DMA engine.
    pub fn connect_in<T: Pod>(
        &mut self,
        from: (&str, &str),
        to: (&str, &str),
        min_items: usize,
        memory: Arc<dyn ring::RegionSource>,
    ) -> Result<(Output<T>, Input<T>), Error> {
        self.connect_queue(from, to, min_items, Some(memory))
    }

    fn connect_queue<T: Pod>(
        &mut self,
        from: (&str, &str),
        to: (&str, &str),
        min_items: usize,
        memory: Option<Arc<dyn ring::RegionSource>>,
    ) -> Result<(Output<T>, Input<T>), Error> {
        let page = rustix::param::page_size();
        if std::mem::align_of::<T>() > page {
            // A queue's slots are only page-aligned: such items would be
            // handed out misaligned.
            return Err(Error::ItemAlignment {
                node: from.0.to_string(),
                port: from.1.to_string(),
                align: std::mem::align_of::<T>(),
                page,
            });
        }
        let wn = self.node_id(from.0);
        let rn = self.node_id(to.0);
        self.claim_port(wn, from.1)?;
        self.claim_port(rn, to.1)?;
        let mut builder = Builder::<T>::new(min_items).wait(Wait::Spin);
        if let Some(m) = memory {
            builder = builder.in_memory(m);
        }
        let (w, r) = builder.build().map_err(|source| Error::Port {
            node: from.0.to_string(),
            port: from.1.to_string(),
            source,
        })?;
        let mut s = lock(&self.rt.sched);
        let edge = Arc::new(Edge::new(
            s.edges.len(),
            format!("{}.{} -> {}.{}", from.0, from.1, to.0, to.1),
            wn,
            w.capacity(),
            std::mem::size_of::<T>(),
            (self.queue_limit / std::mem::size_of::<T>().max(1)).max(w.capacity()),
        ));
        s.edges.push(edge.clone());
        s.readers_of.push(vec![rn]);
        drop(s);
        edge.readers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let input = Input {
            r: Some(r),
            edge: edge.clone(),
            rt: self.rt.clone(),
            node: rn,
            name: self.names[rn].clone(),
            port: to.1.to_string(),
        };
        let output = Output {
            w: Some(w),
            edge,
            rt: self.rt.clone(),
            node: wn,
            name: self.names[wn].clone(),
            port: from.1.to_string(),
        };
        Ok((output, input))
    }

    /// Adds another reader of `out`'s queue, the input port `to`. It sees every item
    /// committed from now on (connect readers before running).
    pub fn tap<T: Pod>(
        &mut self,
        out: &mut Output<T>,
        to: (&str, &str),
    ) -> Result<Input<T>, Error> {
        let rn = self.node_id(to.0);
        self.claim_port(rn, to.1)?;
        let r = out.writer_mut().add_reader();
        lock(&self.rt.sched).readers_of[out.edge.id].push(rn);
        out.edge
            .readers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Input {
            r: Some(r),
            edge: out.edge.clone(),
            rt: self.rt.clone(),
            node: rn,
            name: self.names[rn].clone(),
            port: to.1.to_string(),
        })
    }

    /// Gives node `name` its body. It runs on its own thread when the graph runs;
    /// the ports it captured are closed when it returns. A node that blocks
    /// on anything but its ports (a device, a socket, a file, a Python
    /// callable) is a thread node.
    pub fn node<F>(&mut self, name: &str, body: F) -> Result<(), Error>
    where
        F: FnOnce() -> NodeResult + Send + 'static,
    {
        self.set_body(name, Body::Thread(Box::new(body)))
    }

    /// Gives node `name` an async body, run as a task on the graph's worker
    /// pool: it waits on its ports with their async methods
    /// ([`Input::peek_async`], [`Output::reserve_async`],
    /// [`Output::write_async`]), and while it waits its worker runs other
    /// tasks, so a hand-over between task nodes is no context switch. The
    /// ports it captured are closed when it returns. A blocking port call
    /// that would have to wait fails with [`Error::BlockingInTask`] instead
    /// of holding a worker; a node that must block on anything else belongs
    /// on a thread ([`Graph::node`]). Thread and task nodes mix freely in one
    /// graph, with the same growth, deadlock reports and ends.
    ///
    /// ```
    /// use dmaflow::graph::Graph;
    /// let mut g = Graph::new();
    /// let (mut out, mut inp) = g.connect::<u32>(("count", "out"), ("sum", "in"))?;
    /// g.task("count", async move {
    ///     for i in 0..1000u32 {
    ///         out.write_async(&[i]).await?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    /// let t = total.clone();
    /// g.task("sum", async move {
    ///     loop {
    ///         let s = inp.peek_async(1).await?;
    ///         if s.is_empty() {
    ///             return Ok(());
    ///         }
    ///         let n = s.len();
    ///         t.fetch_add(s.iter().map(|&x| x as u64).sum(), std::sync::atomic::Ordering::Relaxed);
    ///         inp.consume(n)?;
    ///     }
    /// })?;
    /// g.run()?;
    /// assert_eq!(total.load(std::sync::atomic::Ordering::Relaxed), 999 * 1000 / 2);
    /// # Ok::<(), dmaflow::graph::Error>(())
    /// ```
    pub fn task<F>(&mut self, name: &str, body: F) -> Result<(), Error>
    where
        F: std::future::Future<Output = NodeResult> + Send + 'static,
    {
        self.set_body(name, Body::Task(Box::pin(body)))
    }

    fn set_body(&mut self, name: &str, body: Body) -> Result<(), Error> {
        let id = self.node_id(name);
        if self.bodies[id].is_some() {
            return Err(Error::DuplicateNode(name.to_string()));
        }
        self.bodies[id] = Some(body);
        Ok(())
    }

    /// Runs every node and waits for all of them.
    pub fn run(self) -> Result<(), Error> {
        self.start()?.join()
    }

    /// Starts every thread node on its own thread and the task nodes on the
    /// worker pool.
    pub fn start(self) -> Result<Running, Error> {
        let names = self.names;
        if let Some(i) = self.bodies.iter().position(Option::is_none) {
            return Err(Error::NoBody(names[i].to_string()));
        }
        {
            let mut s = lock(&self.rt.sched);
            for (id, body) in self.bodies.iter().enumerate() {
                s.task[id] = matches!(body, Some(Body::Task(_)));
            }
        }
        let mut threads = Vec::new();
        let mut tasks = Vec::new();
        let mut pool = None;
        for (id, body) in self.bodies.into_iter().enumerate() {
            let body = match body {
                Some(Body::Thread(body)) => body,
                Some(Body::Task(f)) => {
                    tasks.push((id, names[id].clone(), f));
                    continue;
                }
                None => continue,
            };
            let rt = self.rt.clone();
            let name = names[id].clone();
            let spawned = std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || run_node(&rt, id, &name, body));
            if let Err(source) = spawned.map(|h| threads.push(h)) {
                return Err(Self::abandon(&self.rt, threads, &names[id], source));
            }
        }
        if !tasks.is_empty() {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let workers = self.workers.unwrap_or(cores).min(tasks.len());
            let first = names[tasks[0].0].clone();
            let turns = pool::Turns {
                budget: self.task_budget,
                slice: self.task_slice,
                hold_limit: self.task_hold_limit,
            };
            match pool::start(&self.rt, tasks, workers, turns) {
                Ok(p) => pool = Some(p),
                Err(source) => return Err(Self::abandon(&self.rt, threads, &first, source)),
            }
        }
        Ok(Running {
            threads,
            pool,
            rt: self.rt,
        })
    }

    /// After node `node` could not start: every node not started is done,
    /// those started are stopped and joined.
    fn abandon(
        rt: &Runtime,
        threads: Vec<JoinHandle<()>>,
        node: &str,
        source: std::io::Error,
    ) -> Error {
        {
            let mut s = lock(&rt.sched);
            // Nodes that run are marked done when they end; the others now.
            for node in 0..s.nodes.len() {
                s.set(node, Status::Done);
            }
            rt.stop_all(&s);
        }
        for t in threads {
            let _ = t.join();
        }
        Error::Spawn {
            node: node.to_string(),
            source,
        }
    }
}

/// A started graph.
pub struct Running {
    threads: Vec<JoinHandle<()>>,
    pool: Option<pool::Pool>,
    rt: Arc<Runtime>,
}

impl Running {
    /// Waits for every node; the first failure (if any) is the graph's error.
    pub fn join(self) -> Result<(), Error> {
        for t in self.threads {
            // Panics are caught inside the thread; a join error cannot carry one.
            let _ = t.join();
        }
        if let Some(p) = self.pool {
            p.join();
        }
        let mut s = lock(&self.rt.sched);
        // No task waits any more: drop what could keep its memory alive.
        s.wakers.iter_mut().for_each(|w| *w = None);
        s.waits.iter_mut().for_each(Vec::clear);
        match s.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
