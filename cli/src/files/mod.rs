//! The file tools behind `dmaflow fir` and `dmaflow bgsub`.

pub mod bgsub;
pub mod fir;
pub mod partial;

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
