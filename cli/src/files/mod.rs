//! The file tools behind `dmaflow fir` and `dmaflow bgsub`: their ends (a
//! file or a ZeroMQ edge on either side), the output file that appears only
//! on success, and their one error type.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use dmaflow::graph::{Graph, Input, Output};

pub mod bgsub;
pub mod fir;
pub mod partial;

use partial::PartialFile;

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

/// What a tool's input file holds: a whole number of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Little-endian `f32` samples (an empty file is none of them).
    Samples,
    /// 8-bit frames of `width` x `height` pixels (an empty file is refused).
    Frames {
        /// Frame width.
        width: usize,
        /// Frame height.
        height: usize,
    },
}

impl Unit {
    /// Bytes of one.
    pub fn bytes(self) -> usize {
        match self {
            Unit::Samples => 4,
            Unit::Frames { width, height } => width * height,
        }
    }

    /// What they are, plural.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Samples => "samples",
            Unit::Frames { .. } => "frames",
        }
    }

    /// Whether `len` bytes are a whole number of them.
    fn whole(self, len: u64) -> bool {
        len.is_multiple_of(self.bytes() as u64) && (len != 0 || self == Unit::Samples)
    }
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Unit::Samples => write!(f, "little-endian f32 samples (4 bytes each)"),
            Unit::Frames { width, height } => {
                write!(f, "{width}x{height} frames ({} bytes each)", width * height)
            }
        }
    }
}

/// Why `dmaflow fir` or `dmaflow bgsub` could not turn its input into its output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The input is not a whole number of samples or frames.
    #[error("{path}: {len} bytes is not a whole number of {of}")]
    BadLength {
        /// The file.
        path: PathBuf,
        /// Its length in bytes.
        len: u64,
        /// What it should hold.
        of: Unit,
    },
    /// The input is not a file (a directory, say).
    #[error("{path}: not a file of {} ({what})", .of.name())]
    NotAFile {
        /// The path given.
        path: PathBuf,
        /// What it is.
        what: &'static str,
        /// What it should hold.
        of: Unit,
    },
    /// The output's directory does not exist.
    #[error("{path}: its directory does not exist")]
    NoDirectory {
        /// The output path given.
        path: PathBuf,
    },
    /// The taps or FFT length make no filter.
    #[error("{0}")]
    Filter(#[from] dmaflow::dsp::fir::Error),
    /// Width or height unusable.
    #[error(transparent)]
    Params(#[from] dmaflow::dsp::bgsub::Error),
    /// The FIR coprocessor refused the taps.
    #[error("FIR coprocessor: {0}")]
    Coprocessor(#[from] dmaflow::accel::fir::Error),
    /// The emulated board with the coprocessor could not be set up.
    #[error("emulated board: {0}")]
    Board(#[from] dmaflow::rig::Error),
    /// The graph source -> filter -> sink failed.
    #[error("{0}")]
    Graph(#[from] dmaflow::graph::Error),
    /// A network end could not be set up.
    #[error("{0}")]
    Net(#[from] dmaflow_net::Error),
    /// The GPU could not be used.
    #[error("GPU: {0}")]
    Gpu(#[from] dmaflow::gpu::Error),
}

impl FileError {
    /// Whether the caller's input is at fault (a missing or malformed file,
    /// a bad size or filter, an endpoint, a GPU that is not there) rather
    /// than the run.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            FileError::Io { .. }
                | FileError::BadLength { .. }
                | FileError::NotAFile { .. }
                | FileError::NoDirectory { .. }
                | FileError::Filter(_)
                | FileError::Params(_)
                | FileError::Coprocessor(
                    dmaflow::accel::fir::Error::Taps { .. }
                        | dmaflow::accel::fir::Error::NonFiniteTap(_)
                )
                | FileError::Gpu(dmaflow::gpu::Error::NoDevice { .. })
        ) || matches!(self, FileError::Net(e) if e.is_bad_input())
    }
}

/// The [`FileError::Io`] of `path`.
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens an input file of `of`, refusing a directory and a regular file
/// that is not a whole number of them (a pipe's length is found at its end).
pub(crate) fn open_input(path: &Path, of: Unit) -> Result<std::fs::File, FileError> {
    let file = std::fs::File::open(path).map_err(io(path))?;
    let meta = file.metadata().map_err(io(path))?;
    if meta.is_dir() {
        return Err(FileError::NotAFile {
            path: path.to_path_buf(),
            what: "a directory",
            of,
        });
    }
    if meta.is_file() && !of.whole(meta.len()) {
        return Err(FileError::BadLength {
            path: path.to_path_buf(),
            len: meta.len(),
            of,
        });
    }
    Ok(file)
}

/// The output file, under a temporary name until [`PartialFile::finish`];
/// its directory must exist.
pub(crate) fn create_output(path: &Path) -> Result<(PartialFile, std::fs::File), FileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(FileError::NoDirectory {
            path: path.to_path_buf(),
        });
    }
    PartialFile::create(path).map_err(io(path))
}

/// An item the file ends read and write as little-endian bytes.
pub(crate) trait Item: bytemuck::Pod + Send {
    /// Between its little-endian form and this machine's (the same both ways).
    fn swap_le(self) -> Self;
}

impl Item for u8 {
    fn swap_le(self) -> Self {
        self
    }
}

impl Item for f32 {
    fn swap_le(self) -> Self {
        f32::from_bits(u32::from_le(self.to_bits()))
    }
}

/// A tool's input end once in its graph: a file source with what it read,
/// or a network source with its counts.
pub(crate) enum InEnd {
    /// The file, its bytes read and whether it ended inside a unit.
    File(PathBuf, Unit, Arc<(AtomicU64, AtomicBool)>),
    /// The endpoint and what crossed it.
    Net(String, Arc<dmaflow_net::Stats>),
}

impl InEnd {
    /// Adds the node `source` writing `lead` zero items and then the input
    /// into `out`, `chunk` items at a time; a file must hold whole units.
    pub(crate) fn add<T: Item>(
        g: &mut Graph,
        source: Source,
        mut out: Output<T>,
        (chunk, lead, of): (usize, usize, Unit),
    ) -> Result<InEnd, FileError> {
        let path = match source {
            Source::Net(edge) => {
                if lead > 0 {
                    out.write(&vec![T::zeroed(); lead])?;
                }
                let at = edge.endpoint.to_string();
                return Ok(InEnd::Net(
                    at,
                    dmaflow_net::add_source(g, "source", edge, out)?,
                ));
            }
            Source::File(path) => path,
        };
        let mut src = open_input(&path, of)?;
        let read = Arc::new((AtomicU64::new(0), AtomicBool::new(false)));
        let seen = read.clone();
        let shown = path.display().to_string();
        g.node("source", move || {
            if lead > 0 {
                out.write(&vec![T::zeroed(); lead])?;
            }
            loop {
                let slots = out.reserve(chunk)?;
                // Read straight into the queue's slots; short reads (pipes)
                // are read on until the chunk is full or the input ends.
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(slots);
                let want = bytes.len();
                let mut filled = 0;
                while filled < want {
                    match src.read(&mut bytes[filled..]) {
                        Ok(0) => break,
                        Ok(k) => filled += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("{shown}: {e}").into()),
                    }
                }
                let whole = filled / size_of::<T>();
                if cfg!(target_endian = "big") {
                    for x in &mut slots[..whole] {
                        *x = x.swap_le();
                    }
                }
                out.commit(whole)?;
                let total = seen.0.fetch_add(filled as u64, Ordering::Relaxed) + filled as u64;
                if filled < want {
                    if !of.whole(total) {
                        seen.1.store(true, Ordering::Relaxed);
                        return Err(format!("{shown}: ends inside one of its {}", of.name()).into());
                    }
                    return Ok(());
                }
            }
        })?;
        Ok(InEnd::File(path, of, read))
    }

    /// Items read from the file or received from the network.
    pub(crate) fn items<T>(&self) -> u64 {
        match self {
            InEnd::File(_, _, read) => read.0.load(Ordering::Relaxed) / size_of::<T>() as u64,
            InEnd::Net(_, stats) => stats.snapshot().1,
        }
    }

    /// The endpoint and its counts, for a network source.
    pub(crate) fn net(&self) -> Option<(&String, &dmaflow_net::Stats)> {
        match self {
            InEnd::Net(at, stats) => Some((at, stats)),
            InEnd::File(..) => None,
        }
    }

    /// The file's [`FileError::BadLength`] if it ended inside a unit.
    pub(crate) fn check(&self) -> Result<(), FileError> {
        match self {
            InEnd::File(path, of, read) if read.1.load(Ordering::Relaxed) => {
                Err(FileError::BadLength {
                    path: path.clone(),
                    len: read.0.load(Ordering::Relaxed),
                    of: *of,
                })
            }
            _ => Ok(()),
        }
    }
}

/// A tool's output end once in its graph: a file that appears on
/// [`OutEnd::finish`], or a network sink with its counts.
pub(crate) enum OutEnd {
    /// The temporary file and the output's path.
    File(PartialFile, PathBuf),
    /// The endpoint and what crossed it.
    Net(String, Arc<dmaflow_net::Stats>),
}

impl OutEnd {
    /// Adds the node `sink` writing everything from `input` to `sink`.
    pub(crate) fn add<T: Item>(
        g: &mut Graph,
        sink: Sink,
        mut input: Input<T>,
    ) -> Result<OutEnd, FileError> {
        let output = match sink {
            Sink::Net(edge) => {
                let at = edge.endpoint.to_string();
                return Ok(OutEnd::Net(
                    at,
                    dmaflow_net::add_sink(g, "sink", edge, input)?,
                ));
            }
            Sink::File(output) => output,
        };
        let (partial, file) = create_output(&output)?;
        let tmp = partial.path().display().to_string();
        g.node("sink", move || {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
            let fail = |e: std::io::Error| format!("{tmp}: {e}");
            loop {
                let s = input.peek(1)?;
                if s.is_empty() {
                    break;
                }
                if cfg!(target_endian = "little") {
                    w.write_all(bytemuck::cast_slice(s)).map_err(fail)?;
                } else {
                    for x in s {
                        w.write_all(bytemuck::bytes_of(&x.swap_le()))
                            .map_err(fail)?;
                    }
                }
                let k = s.len();
                input.consume(k)?;
            }
            w.flush().map_err(fail)?;
            w.get_ref().sync_all().map_err(fail)?;
            Ok(())
        })?;
        Ok(OutEnd::File(partial, output))
    }

    /// The endpoint and its counts, for a network sink.
    pub(crate) fn net(&self) -> Option<(&String, &dmaflow_net::Stats)> {
        match self {
            OutEnd::Net(at, stats) => Some((at, stats)),
            OutEnd::File(..) => None,
        }
    }

    /// Gives a file output its final name.
    pub(crate) fn finish(self) -> Result<(), FileError> {
        match self {
            OutEnd::File(partial, output) => partial.finish().map_err(io(&output)),
            OutEnd::Net(..) => Ok(()),
        }
    }
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
