//! The file tools behind `dmaflow fir` and `dmaflow bgsub`: their ends (a
//! file or a ZeroMQ edge on either side), the output file that appears only
//! on success, and their one error type.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use dmaflow::accel::stage::StageStats;
use dmaflow::graph::{Graph, Input, Output};
use dmaflow::mem::CachePolicy;
use dmaflow::rig::Rig;
use dmaflow::ring::RegionSource;
use dmaflow::sim::{Clock, StreamProcessor};
use tempfile::TempPath;

pub mod bgsub;
pub mod fir;

/// One end of a tool: a file (or pipe), or a network edge.
#[derive(Debug, Clone)]
pub enum End {
    /// A file; an output file is written beside and renamed on success.
    File(PathBuf),
    /// A ZeroMQ edge: PULL or SUB as a source, PUSH or PUB as a sink.
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
                write!(f, "{width}x{height} frames ({} bytes each)", self.bytes())
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
    /// The input is a directory.
    #[error("{path}: not a file of {} (a directory)", .of.name())]
    NotAFile {
        /// The path given.
        path: PathBuf,
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

/// An item the file ends read and write as little-endian bytes.
pub(crate) trait Item: bytemuck::Pod + Send {
    /// Between its little-endian form and this machine's (the same both ways).
    fn swap_le(mut self) -> Self {
        if cfg!(target_endian = "big") {
            bytemuck::bytes_of_mut(&mut self).reverse();
        }
        self
    }
}

impl<T: bytemuck::Pod + Send> Item for T {}

/// The memory a tool's queues live in: a coprocessor's DMA memory, or the
/// graph's own.
type Memory = Option<Arc<dyn RegionSource>>;

/// An emulated board of `ddr_bytes` with `core` behind its DMA engines, and
/// its DMA memory for the queues.
pub(crate) fn board(
    ddr_bytes: usize,
    core: Box<dyn StreamProcessor>,
) -> Result<(Rig, Memory), FileError> {
    let rig = Rig::new(
        ddr_bytes,
        Clock::Unlimited,
        true,
        CachePolicy::Coherent,
        core,
    )?;
    let memory = rig.engines[0]
        .pool()
        .queue_memory()
        .map_err(dmaflow::rig::Error::from)?;
    Ok((rig, Some(memory)))
}

/// What a file tool did.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    /// Samples or frames that went through.
    pub items: u64,
    /// On the coprocessor: its node's statistics (what the CPU copied on the
    /// way, bytes delivered).
    pub copies: Option<StageStats>,
    /// What crossed each network end, a line each (and one of the first tags
    /// that crossed, at their offsets in the end's stream, where any did).
    pub net: Vec<String>,
}

/// A coprocessor's board and its node's statistics, let go after the run.
pub(crate) type OnBoard = Option<(Rig, Arc<Mutex<StageStats>>)>;

/// Runs a tool as one graph `source -> name -> sink`, then lets the board
/// go. The queues into and out of the middle node hold at least `into` and
/// `out_of` items, in `memory`; `middle` adds the node `name` between them
/// (before any file is touched). The node `source` writes `lead` zero items
/// and then the input, `chunk` items at a time (a file must hold whole units
/// `of`); the node `sink` takes everything, into a file that appears only on
/// success. Returns the units read or received, the coprocessor's statistics
/// and what crossed each network end; a file that ends inside a unit is named.
pub(crate) fn run<T: Item>(
    (source, sink): (End, End),
    (name, (into, out_of), memory): (&str, (usize, usize), &Memory),
    (chunk, lead, of): (usize, usize, Unit),
    middle: impl FnOnce(&mut Graph, Input<T>, Output<T>) -> Result<OnBoard, FileError>,
) -> Result<Done, FileError> {
    let mut g = Graph::new();
    let connect = |g: &mut Graph, from, to, n| match memory {
        Some(m) => g.connect_in::<T>(from, to, n, m.clone()),
        None => g.connect_with_capacity::<T>(from, to, n),
    };
    let (mut out, m_in) = connect(&mut g, ("source", "out"), (name, "in"), into)?;
    let (m_out, input) = connect(&mut g, (name, "out"), ("sink", "in"), out_of)?;
    let board = middle(&mut g, m_in, m_out)?;
    if lead > 0 {
        out.write(&vec![T::zeroed(); lead])?;
    }
    let mut ends = Vec::new();
    let read = match source {
        End::Net(edge) => {
            let at = edge.endpoint.to_string();
            let stats = dmaflow_net::add_source(&mut g, "source", edge, out)?;
            ends.push((at, "received", stats));
            None
        }
        End::File(path) => Some((file_source(&mut g, &path, out, (chunk, of))?, path)),
    };
    let output = match sink {
        End::Net(edge) => {
            let at = edge.endpoint.to_string();
            let stats = dmaflow_net::add_sink(&mut g, "sink", edge, input)?;
            ends.push((at, "sent", stats));
            None
        }
        End::File(path) => Some((file_sink(&mut g, &path, input)?, path)),
    };
    let result = g.run();
    let copies = board.map(|(_rig, s)| *s.lock().unwrap_or_else(PoisonError::into_inner));
    let bytes = match read {
        Some((ended, path)) => match ended.get() {
            Some(&len) if !of.whole(len) => return Err(FileError::BadLength { path, len, of }),
            // None: the source failed before its end (`result` says why).
            ended => ended.copied().unwrap_or(0),
        },
        None => ends[0].2.snapshot().1 * size_of::<T>() as u64,
    };
    result?;
    if let Some((partial, path)) = output {
        partial.persist(&path).map_err(|e| io(&path)(e.error))?;
    }
    let mut net = Vec::new();
    for (at, direction, stats) in ends {
        let (messages, items, lost, tags) = stats.snapshot();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let (copied, waited_ms) = (load(&stats.copied), load(&stats.waited_ns) as f64 / 1e6);
        let (lost, wait) = if direction == "sent" {
            let dropped = load(&stats.dropped_at_hwm);
            (format!("{dropped} dropped at the high-water mark"), "room")
        } else {
            (format!("{lost} lost on the way"), "data")
        };
        net.push(format!(
            "{at}: {direction} {items} samples in {messages} messages ({lost}, {tags} tags; \
             {copied} bytes copied, {waited_ms:.1} ms waited for {wait})"
        ));
        let seen: Vec<String> = stats.tags_seen().iter().map(|t| t.to_string()).collect();
        if !seen.is_empty() {
            net.push(format!("{direction}: tags {}", seen.join(", ")));
        }
    }
    let items = bytes / of.bytes() as u64;
    Ok(Done { items, copies, net })
}

/// Adds the node `source` writing the file at `path` into `out`, `chunk`
/// items at a time; the file must hold whole units `of` (a directory is
/// refused, and so is a regular file of another length; a pipe's length is
/// found at its end). Returns its length in
/// bytes, set once it ends.
fn file_source<T: Item>(
    g: &mut Graph,
    path: &Path,
    mut out: Output<T>,
    (chunk, of): (usize, Unit),
) -> Result<Arc<OnceLock<u64>>, FileError> {
    let mut src = std::fs::File::open(path).map_err(io(path))?;
    let meta = src.metadata().map_err(io(path))?;
    let path = path.to_path_buf();
    if meta.is_dir() {
        return Err(FileError::NotAFile { path, of });
    }
    if meta.is_file() && !of.whole(meta.len()) {
        let len = meta.len();
        return Err(FileError::BadLength { path, len, of });
    }
    let ended = Arc::new(OnceLock::new());
    let (seen, mut total) = (ended.clone(), 0);
    let shown = path.display().to_string();
    g.node("source", move || {
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
            total += filled as u64;
            if filled < want {
                let _ = seen.set(total);
                if !of.whole(total) {
                    return Err(format!("{shown}: ends inside one of its {}", of.name()).into());
                }
                return Ok(());
            }
        }
    })?;
    Ok(ended)
}

/// Adds the node `sink` writing everything from `input` into a temporary
/// file beside `path` (whose directory must exist), renamed to `path` by
/// [`TempPath::persist`] and removed if dropped before.
fn file_sink<T: Item>(
    g: &mut Graph,
    path: &Path,
    mut input: Input<T>,
) -> Result<TempPath, FileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        let path = path.to_path_buf();
        return Err(FileError::NoDirectory { path });
    }
    let name = path
        .file_name()
        .unwrap_or("output".as_ref())
        .to_string_lossy();
    // Made as `File::create` makes a file (0o666 less the umask).
    let (file, partial) = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(io(path))?
        .into_parts();
    let tmp = partial.display().to_string();
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
    Ok(partial)
}
