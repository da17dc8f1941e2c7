//! What a node body returns and what can go wrong in a process network.

use crate::ring;

/// Any error a node body may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a node body returns.
pub type NodeResult = Result<(), BoxError>;

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
    /// A task node ([`Graph::task`](crate::graph::Graph::task)) called a blocking port method that had
    /// to wait: it would have held a worker of the pool.
    #[error(
        "node {node}, port {port}: a task node waits with the port's async methods (peek_async, reserve_async, write_async), never a blocking call"
    )]
    BlockingInTask {
        /// The node.
        node: String,
        /// The port.
        port: String,
    },
    /// A port was waited on after its node's body had returned (the port
    /// was kept past the node's end, e.g. by a thread the body started): the
    /// runtime no longer counts that node, so such a wait is refused.
    #[error(
        "node {node}, port {port}: waited on after the node's body returned; a port is used by its node's body only"
    )]
    WaitAfterEnd {
        /// The node.
        node: String,
        /// The port.
        port: String,
    },
    /// A port was waited on from another node's body (or from another
    /// task of an executor while its own node waited on another of its
    /// ports): the runtime counts and wakes each node as one, so such a
    /// wait is refused.
    #[error(
        "node {node}, port {port}: waited on from outside the node's body (another node's, or another task while the node itself waits); a port is used by its node's body only"
    )]
    PortShared {
        /// The node.
        node: String,
        /// The port.
        port: String,
    },
    /// A task node went longer than the graph's hold limit
    /// ([`Graph::set_task_hold_limit`](crate::graph::Graph::set_task_hold_limit)) without reaching a port call or a
    /// yield: it blocked (a lock, a channel, another runtime's `block_on`,
    /// a sleep) or spun without awaiting. The graph is stopped; the worker
    /// is left to the call. (A stage that computes for long between its
    /// port calls is never this: only the time since its last port call
    /// counts.)
    #[error(
        "node {node}: a task went {limit:?} without reaching a port call or a yield ({last}): a blocking call or a spin inside a task node (such work belongs on a thread node)"
    )]
    TaskHeldWorker {
        /// The node.
        node: String,
        /// The limit it went past.
        limit: std::time::Duration,
        /// What it was last seen doing: the queue of its last port call.
        last: String,
    },
    /// Every live node waits, a writer waits on a full queue and that queue
    /// is at its limit ([`Graph::set_queue_limit`](crate::graph::Graph::set_queue_limit)): bounded scheduling
    /// would have to grow it further, so the graph needs more memory than
    /// it may use.
    #[error(
        "queue {queue}: every live node waits and {writer} waits to write {items} items to this full queue, already at its limit of {limit} bytes (Graph::set_queue_limit)"
    )]
    QueueLimit {
        /// The queue (`from.port -> to.port`).
        queue: String,
        /// The node waiting to write to it.
        writer: String,
        /// How many items it waits to write.
        items: usize,
        /// The queue's limit in bytes.
        limit: usize,
    },
    /// A queue's item type is aligned beyond the memory page, which is all
    /// the alignment a queue's slots get.
    #[error(
        "port {port} of node {node}: items aligned to {align} bytes, beyond a queue's page alignment ({page} bytes)"
    )]
    ItemAlignment {
        /// The writing node.
        node: String,
        /// Its port.
        port: String,
        /// The item type's alignment.
        align: usize,
        /// The page size.
        page: usize,
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
