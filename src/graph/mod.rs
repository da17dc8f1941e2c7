//! Kahn process networks on zero-copy queues: Computational Process Networks
//! (paper 001, §VI).
//!
//! A [`Graph`] is a set of named nodes, each a Kahn process running on its own
//! thread, joined by one-way typed queues ([`crate::ring`]). A node talks to the
//! rest only through its ports: an [`Output`] (`reserve`/`commit`) and any number of
//! [`Input`]s (`peek(threshold)`/`consume`, the firing threshold of CPN). Reads
//! block, so the output of a graph depends only on its input, never on the
//! schedule (Kahn's determinism).
//!
//! The runtime knows when each node is blocked and on what. When every live node is
//! blocked and at least one waits to write to a full queue, the smallest such queue
//! grows by what its writer asked for (Parks' bounded scheduling), so a graph that
//! only looks deadlocked goes on. When every node waits to read, the graph stops
//! with [`Error::Deadlock`] naming the cycle. A node that fails or panics stops the
//! graph with that node's error; the others are woken, stopped and joined.
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
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::ring::{self, Builder, Pod, Reader, Wait, Writer};

/// Any error a node body may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a node body returns.
pub type NodeResult = Result<(), BoxError>;

/// Default queue size in bytes when none is given.
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 10;

/// What went wrong in a process network.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue operation on a port failed.
    #[error("node {node}, port {port}: {source}")]
    Port {
        /// Node owning the port.
        node: String,
        /// Port name.
        port: String,
        /// What the queue reported.
        source: ring::Error,
    },
    /// A node's body returned an error.
    #[error("node {node} failed: {source}")]
    Node {
        /// The failing node.
        node: String,
        /// Its error.
        source: BoxError,
    },
    /// A node's body panicked.
    #[error("node {node} panicked: {message}")]
    Panicked {
        /// The node.
        node: String,
        /// The panic message.
        message: String,
    },
    /// Every live node waits to read: no node can ever run again.
    #[error("deadlock: {cycle}")]
    Deadlock {
        /// The cycle of waiting nodes, each with the queue it waits on.
        cycle: String,
    },
    /// The graph is stopping because another node failed; returned by port calls.
    #[error("node {node} stopped: another node failed")]
    Aborted {
        /// The node whose port call was stopped.
        node: String,
    },
    /// A node was named in a connection but never given a body.
    #[error("node {0} is connected but has no body")]
    NoBody(String),
    /// Two bodies for one node name.
    #[error("node {0} is defined twice")]
    DuplicateNode(String),
    /// A port was connected twice.
    #[error("port {port} of node {node} is connected twice")]
    DuplicatePort {
        /// The node.
        node: String,
        /// The port.
        port: String,
    },
    /// A node's thread could not be started.
    #[error("cannot start node {node}: {source}")]
    Spawn {
        /// The node.
        node: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Write,
    Read,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Running,
    Done,
    /// Waiting on `edge` to write `amount` items or to read `amount` items.
    Blocked {
        edge: usize,
        side: Side,
        amount: usize,
    },
}

/// Scheduling state of one edge, shared by its ports and the runtime.
struct Edge {
    id: usize,
    /// `from.port -> to.port, ...` for messages.
    label: String,
    writer_node: usize,
    capacity: AtomicUsize,
    /// Capacity a reader's threshold (or the runtime) asked the writer to grow to.
    grow_to: AtomicUsize,
    /// The slowest reader position at which the blocked writer can go on.
    writer_target: AtomicU64,
    /// The write position at which some blocked reader can go on.
    readers_target: AtomicU64,
    writer_cv: Condvar,
    readers_cv: Condvar,
}

struct Sched {
    names: Vec<String>,
    status: Vec<Status>,
    edges: Vec<Arc<Edge>>,
    failure: Option<Error>,
}

struct Runtime {
    sched: Mutex<Sched>,
    abort: AtomicBool,
}

impl Runtime {
    fn node_name(&self, node: usize) -> String {
        lock(&self.sched).names[node].clone()
    }

    /// Wakes the nodes blocked on one side of `edge`.
    fn wake(&self, edge: &Edge, side: Side) {
        let mut s = lock(&self.sched);
        Self::wake_locked(&mut s, edge, side);
    }

    fn wake_locked(s: &mut Sched, edge: &Edge, side: Side) {
        for st in &mut s.status {
            if matches!(*st, Status::Blocked { edge: e, side: sd, .. } if e == edge.id && sd == side)
            {
                *st = Status::Running;
            }
        }
        match side {
            Side::Write => {
                edge.writer_target.store(u64::MAX, Ordering::SeqCst);
                edge.writer_cv.notify_all();
            }
            Side::Read => {
                edge.readers_target.store(u64::MAX, Ordering::SeqCst);
                edge.readers_cv.notify_all();
            }
        }
    }

    /// Records the first real failure and wakes everybody to stop.
    fn fail(&self, s: &mut Sched, err: Error) {
        // A node whose readers vanished fails with `Closed`; when the readers
        // vanished because their node failed, that node's error is the cause (it
        // may be recorded second: its ports close before its result arrives).
        let consequence = |e: &Error| {
            matches!(
                e,
                Error::Port {
                    source: ring::Error::Closed,
                    ..
                }
            )
        };
        match &s.failure {
            None => s.failure = Some(err),
            Some(old) if consequence(old) && !consequence(&err) => s.failure = Some(err),
            Some(_) => {}
        }
        self.stop_all(s);
    }

    /// Makes every port call return [`Error::Aborted`] and wakes every waiter.
    fn stop_all(&self, s: &Sched) {
        self.abort.store(true, Ordering::SeqCst);
        for e in &s.edges {
            e.writer_cv.notify_all();
            e.readers_cv.notify_all();
        }
    }

    /// Called with the lock held whenever a node blocks or ends: if every live node
    /// is blocked, grows a queue (artificial deadlock) or fails the graph (real one).
    fn check_stall(&self, s: &mut Sched) {
        let mut any_live = false;
        for st in &s.status {
            match st {
                Status::Running => return,
                Status::Blocked { .. } => any_live = true,
                Status::Done => {}
            }
        }
        if !any_live {
            return;
        }
        // Writers waiting on full queues: grow the smallest queue by its request.
        let mut best: Option<(usize, usize, usize)> = None; // (capacity, node, edge)
        for (node, st) in s.status.iter().enumerate() {
            if let Status::Blocked {
                edge,
                side: Side::Write,
                ..
            } = *st
            {
                let cap = s.edges[edge].capacity.load(Ordering::Relaxed);
                if best.is_none_or(|b| cap < b.0) {
                    best = Some((cap, node, edge));
                }
            }
        }
        if let Some((cap, node, edge)) = best {
            let Status::Blocked { amount, .. } = s.status[node] else {
                return;
            };
            let e = s.edges[edge].clone();
            e.grow_to.fetch_max(cap + amount, Ordering::SeqCst);
            Self::wake_locked(s, &e, Side::Write);
            return;
        }
        // Everybody waits to read: find the cycle of waits.
        let cycle = Self::describe_cycle(s);
        self.fail(s, Error::Deadlock { cycle });
    }

    fn describe_cycle(s: &Sched) -> String {
        let start = s
            .status
            .iter()
            .position(|st| matches!(st, Status::Blocked { .. }))
            .unwrap_or(0);
        let mut seen = vec![usize::MAX; s.status.len()];
        let mut path: Vec<(usize, usize, usize)> = Vec::new(); // (node, edge, amount)
        let mut node = start;
        while seen[node] == usize::MAX {
            seen[node] = path.len();
            let Status::Blocked { edge, amount, .. } = s.status[node] else {
                break;
            };
            path.push((node, edge, amount));
            node = s.edges[edge].writer_node;
        }
        let from = if seen[node] == usize::MAX {
            0
        } else {
            seen[node]
        };
        let mut out = String::new();
        for &(n, e, amount) in &path[from..] {
            out += &format!(
                "{} waits for {} items on {}; ",
                s.names[n], amount, s.edges[e].label
            );
        }
        out += &format!("{} closes the cycle", s.names[node]);
        out
    }
}

/// A process network under construction.
pub struct Graph {
    rt: Arc<Runtime>,
    ids: HashMap<String, usize>,
    bodies: Vec<Option<Box<dyn FnOnce() -> NodeResult + Send>>>,
    ports: HashSet<(usize, String)>,
    queue_bytes: usize,
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
            rt: Arc::new(Runtime {
                sched: Mutex::new(Sched {
                    names: Vec::new(),
                    status: Vec::new(),
                    edges: Vec::new(),
                    failure: None,
                }),
                abort: AtomicBool::new(false),
            }),
            ids: HashMap::new(),
            bodies: Vec::new(),
            ports: HashSet::new(),
            queue_bytes: DEFAULT_QUEUE_BYTES,
        }
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
        let mut s = lock(&self.rt.sched);
        s.names.push(name.to_string());
        s.status.push(Status::Running);
        id
    }

    fn claim_port(&mut self, node: usize, port: &str) -> Result<(), Error> {
        if !self.ports.insert((node, port.to_string())) {
            return Err(Error::DuplicatePort {
                node: lock(&self.rt.sched).names[node].clone(),
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
        let wn = self.node_id(from.0);
        let rn = self.node_id(to.0);
        self.claim_port(wn, from.1)?;
        self.claim_port(rn, to.1)?;
        let (w, r) = Builder::<T>::new(min_items)
            .wait(Wait::Spin)
            .build()
            .map_err(|source| Error::Port {
                node: from.0.to_string(),
                port: from.1.to_string(),
                source,
            })?;
        let mut s = lock(&self.rt.sched);
        let edge = Arc::new(Edge {
            id: s.edges.len(),
            label: format!("{}.{} -> {}.{}", from.0, from.1, to.0, to.1),
            writer_node: wn,
            capacity: AtomicUsize::new(w.capacity()),
            grow_to: AtomicUsize::new(0),
            writer_target: AtomicU64::new(u64::MAX),
            readers_target: AtomicU64::new(u64::MAX),
            writer_cv: Condvar::new(),
            readers_cv: Condvar::new(),
        });
        s.edges.push(edge.clone());
        drop(s);
        let input = Input {
            r: Some(r),
            edge: edge.clone(),
            rt: self.rt.clone(),
            node: rn,
            port: to.1.to_string(),
        };
        let output = Output {
            w: Some(w),
            edge,
            rt: self.rt.clone(),
            node: wn,
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
        Ok(Input {
            r: Some(r),
            edge: out.edge.clone(),
            rt: self.rt.clone(),
            node: rn,
            port: to.1.to_string(),
        })
    }

    /// Gives node `name` its body. It runs on its own thread when the graph runs;
    /// the ports it captured are closed when it returns.
    pub fn node<F>(&mut self, name: &str, body: F) -> Result<(), Error>
    where
        F: FnOnce() -> NodeResult + Send + 'static,
    {
        let id = self.node_id(name);
        if self.bodies[id].is_some() {
            return Err(Error::DuplicateNode(name.to_string()));
        }
        self.bodies[id] = Some(Box::new(body));
        Ok(())
    }

    /// Runs every node and waits for all of them.
    pub fn run(self) -> Result<(), Error> {
        self.start()?.join()
    }

    /// Starts every node on its own thread.
    pub fn start(self) -> Result<Running, Error> {
        let names = lock(&self.rt.sched).names.clone();
        if let Some(i) = self.bodies.iter().position(Option::is_none) {
            return Err(Error::NoBody(names[i].clone()));
        }
        let mut threads = Vec::new();
        for (id, body) in self.bodies.into_iter().enumerate() {
            let Some(body) = body else { continue };
            let rt = self.rt.clone();
            let name = names[id].clone();
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || run_node(&rt, id, &name, body));
            match spawned {
                Ok(h) => threads.push(h),
                Err(source) => {
                    // Stop what was started; the nodes not started never run.
                    let mut s = lock(&self.rt.sched);
                    for st in s.status.iter_mut().skip(id) {
                        *st = Status::Done;
                    }
                    self.rt.stop_all(&s);
                    drop(s);
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(Error::Spawn {
                        node: names[id].clone(),
                        source,
                    });
                }
            }
        }
        Ok(Running {
            threads,
            rt: self.rt,
        })
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

fn run_node(rt: &Runtime, id: usize, name: &str, body: Box<dyn FnOnce() -> NodeResult + Send>) {
    // The body (and with it every port it captured) is consumed here, so its
    // queues are closed before the node is marked done.
    let result = catch_unwind(AssertUnwindSafe(body));
    let mut s = lock(&rt.sched);
    s.status[id] = Status::Done;
    let err = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => match e.downcast::<Error>() {
            Ok(e) if matches!(*e, Error::Aborted { .. }) => None,
            Ok(e) => Some(match *e {
                e @ (Error::Port { .. } | Error::Deadlock { .. }) => e,
                e => Error::Node {
                    node: name.to_string(),
                    source: Box::new(e),
                },
            }),
            Err(e) => Some(Error::Node {
                node: name.to_string(),
                source: e,
            }),
        },
        Err(p) => Some(Error::Panicked {
            node: name.to_string(),
            message: panic_message(p.as_ref()),
        }),
    };
    match err {
        Some(e) => rt.fail(&mut s, e),
        None => rt.check_stall(&mut s),
    }
}

/// A started graph.
pub struct Running {
    threads: Vec<JoinHandle<()>>,
    rt: Arc<Runtime>,
}

impl Running {
    /// Waits for every node; the first failure (if any) is the graph's error.
    pub fn join(self) -> Result<(), Error> {
        for t in self.threads {
            // Panics are caught inside the thread; a join error cannot carry one.
            let _ = t.join();
        }
        match lock(&self.rt.sched).failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The writing end of an edge, owned by one node.
pub struct Output<T: Pod> {
    w: Option<Writer<T>>,
    edge: Arc<Edge>,
    rt: Arc<Runtime>,
    node: usize,
    port: String,
}

impl<T: Pod> Output<T> {
    fn writer_mut(&mut self) -> &mut Writer<T> {
        // `w` is only taken in `drop`.
        self.w
            .as_mut()
            .unwrap_or_else(|| unreachable!("output used after drop"))
    }

    fn port_error(&self, source: ring::Error) -> Error {
        Error::Port {
            node: self.rt.node_name(self.node),
            port: self.port.clone(),
            source,
        }
    }

    fn aborted(&self) -> Error {
        Error::Aborted {
            node: self.rt.node_name(self.node),
        }
    }

    /// Grows the queue if a reader's threshold, the runtime or `n` asks for it.
    fn apply_growth(&mut self, n: usize) -> Result<(), Error> {
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

    fn has_room(&mut self, n: usize) -> Result<bool, Error> {
        match self.writer_mut().try_reserve(n) {
            Ok(s) => Ok(s.is_some()),
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

    /// Copies `items` into the queue (in pieces no larger than the queue).
    pub fn write(&mut self, mut items: &[T]) -> Result<(), Error> {
        while !items.is_empty() {
            let n = items.len().min(self.capacity());
            self.reserve(n)?.copy_from_slice(&items[..n]);
            self.commit(n)?;
            items = &items[n..];
        }
        Ok(())
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
    r: Option<Reader<T>>,
    edge: Arc<Edge>,
    rt: Arc<Runtime>,
    node: usize,
    port: String,
}

impl<T: Pod> Input<T> {
    fn reader_mut(&mut self) -> &mut Reader<T> {
        // `r` is only taken in `drop`.
        self.r
            .as_mut()
            .unwrap_or_else(|| unreachable!("input used after drop"))
    }

    fn port_error(&self, source: ring::Error) -> Error {
        Error::Port {
            node: self.rt.node_name(self.node),
            port: self.port.clone(),
            source,
        }
    }

    /// `Some(threshold to use)` once `threshold` items are readable or the stream
    /// has ended.
    fn ready(&mut self, threshold: usize) -> Result<Option<usize>, Error> {
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
