//! The file tools behind `dmaflow fir` and `dmaflow bgsub`.

pub mod bgsub;
pub mod fir;
pub mod partial;

/// Where a tool's input comes from: a file (or pipe), or a network edge.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file.
    File(std::path::PathBuf),
    /// A ZeroMQ source (PULL or SUB).
    Net(dmaflow_net::Edge),
}

/// Where a tool's output goes.
#[derive(Debug, Clone)]
pub enum Sink {
    /// A file, written beside and renamed on success.
    File(std::path::PathBuf),
    /// A ZeroMQ sink (PUSH or PUB).
    Net(dmaflow_net::Edge),
}

/// What the CPU copied in a run on a coprocessor: bytes moved by the CPU on the
/// way from the source to the sink, and bytes delivered to the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copies {
    /// Bytes the CPU copied.
    pub copied: u64,
    /// Bytes the sink received.
    pub delivered: u64,
}

impl std::fmt::Display for Copies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per = if self.delivered == 0 {
            0.0
        } else {
            self.copied as f64 / self.delivered as f64
        };
        write!(
            f,
            "the CPU copied {} bytes on the way ({per:.2} per byte delivered, {} delivered)",
            self.copied, self.delivered
        )
    }
}
