//! What can go wrong while an experiment runs or writes its report.

use super::plot;

/// What went wrong while running an experiment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue under test failed.
    #[error("queue under test failed: {0}")]
    Ring(#[from] dmaflow::ring::Error),
    /// A process network under test failed.
    #[error("graph under test failed: {0}")]
    Graph(#[from] dmaflow::graph::Error),
    /// A plot could not be written.
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
    /// A report file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A peer implementation failed.
    #[error("{peer} failed: {reason}")]
    Peer {
        /// Name of the implementation.
        peer: &'static str,
        /// What it reported.
        reason: String,
    },
    /// The data that came out was not the data that went in.
    #[error("{what}: checksum {got:#010x}, expected {expected:#010x}")]
    Corrupted {
        /// Which measurement.
        what: String,
        /// Checksum of the data received.
        got: u32,
        /// Checksum of the data sent.
        expected: u32,
    },
    /// The emulated board could not be set up.
    #[error("emulated board: {0}")]
    Platform(#[from] dmaflow::platform::Error),
    /// DMA memory ran out or failed.
    #[error(transparent)]
    Mem(#[from] dmaflow::mem::Error),
    /// The DMA engine failed.
    #[error(transparent)]
    Axi(#[from] dmaflow::axi::Error),
    /// A transfer failed.
    #[error(transparent)]
    Dma(#[from] dmaflow::dma::Error),
    /// An emulated board could not be set up or driven.
    #[error(transparent)]
    Rig(#[from] dmaflow::rig::Error),
    /// A GPU failed or refused what was asked.
    #[error("GPU: {0}")]
    Gpu(#[from] dmaflow::gpu::Error),
    /// A worker thread panicked.
    #[error("worker thread of {0} panicked")]
    Panicked(&'static str),
    /// A real board (`--board ROOT`) lacks what the experiment needs.
    #[error("board under {root}: not ready for this experiment:\n  {}", advice.join("\n  "))]
    Board {
        /// Where the board was looked for.
        root: String,
        /// What is missing, each with what to add (`dmaflow info`'s advice).
        advice: Vec<String>,
    },
    /// The experiment runs on the emulated fabric only.
    #[error(
        "`bench {0}` needs the emulated fabric ({1}): it has no --board form (transfer, twoway and loopback have)"
    )]
    EmulatorOnly(&'static str, &'static str),
}

impl Error {
    /// The [`Error::Io`] of `path` (a file, or what was being done) for its
    /// error: `.map_err(Error::io(path.display()))`.
    pub fn io(path: impl std::fmt::Display) -> impl Fn(std::io::Error) -> Error {
        let path = path.to_string();
        move |source| Error::Io {
            path: path.clone(),
            source,
        }
    }

    /// The [`Error::Peer`] of `peer` for its error `e`: `.map_err(Error::peer("rtrb"))`.
    pub fn peer<E: std::fmt::Display>(peer: &'static str) -> impl Fn(E) -> Error + Copy {
        move |e| Error::Peer {
            peer,
            reason: e.to_string(),
        }
    }
}
