//! `dmaflow bgsub`'s file tool: a file of 8-bit frames in, a file of masks out,
//! on the emulated coprocessor (a process network whose middle node is the
//! coprocessor, frames and masks in queues in its DMA memory) or in software
//! (identical bytes), the output appearing only on success.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dmaflow::accel::bgsub;
use dmaflow::accel::stage::StageStats;
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params};
use dmaflow::graph::Graph;
use dmaflow::mem::CachePolicy;
use dmaflow::rig::Rig;
use dmaflow::sim::{BgSubCore, Clock};

use super::partial::PartialFile;

fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where `dmaflow bgsub` runs the algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The coprocessor on the emulated fabric as a node of a process network
    /// (file source -> coprocessor -> file sink), through two DMA engines.
    Sim,
    /// The software implementation.
    Cpu,
    /// The kernels on CUDA device N (the background kept in device memory).
    Cuda(usize),
}

/// A background subtractor on the CPU or a GPU, frame by frame.
enum Subtractor {
    Cpu(BackgroundSubtractor),
    Gpu(dmaflow::gpu::kernels::Bgsub),
}

impl Subtractor {
    fn new(params: Params, device: Device) -> Result<Subtractor, FileError> {
        Ok(match device {
            Device::Cuda(n) => {
                let gpu = dmaflow::gpu::Gpu::open(n)?;
                let k = Arc::new(dmaflow::gpu::Kernels::load(&gpu)?);
                Subtractor::Gpu(dmaflow::gpu::kernels::Bgsub::new(k, params)?)
            }
            _ => Subtractor::Cpu(BackgroundSubtractor::new(params)),
        })
    }

    fn process(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), FileError> {
        match self {
            Subtractor::Cpu(s) => s.process(frame, mask)?,
            Subtractor::Gpu(s) => s.process(frame, mask)?,
        }
        Ok(())
    }
}

/// Why `dmaflow bgsub` could not turn a frame file into a mask file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The input is not a whole number of frames.
    #[error(
        "{path}: {len} bytes is not a whole number of {width}x{height} frames ({frame} bytes each)"
    )]
    BadLength {
        /// The file.
        path: std::path::PathBuf,
        /// Its length.
        len: usize,
        /// Frame width.
        width: usize,
        /// Frame height.
        height: usize,
        /// Bytes per frame.
        frame: usize,
    },
    /// Width or height unusable.
    #[error(transparent)]
    Params(#[from] dmaflow::dsp::bgsub::Error),
    /// The input is not a file of frames (a directory, say).
    #[error("{path}: not a file of frames ({what})")]
    NotAFile {
        /// The path given.
        path: std::path::PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The coprocessor's board could not be set up.
    #[error("coprocessor: {0}")]
    Device(#[from] dmaflow::rig::Error),
    /// The graph source -> coprocessor -> sink failed.
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
    /// Whether the caller's input is at fault (missing or malformed file, bad
    /// size) rather than the run.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            FileError::Io { .. }
                | FileError::BadLength { .. }
                | FileError::Params(_)
                | FileError::NotAFile { .. }
                | FileError::Gpu(dmaflow::gpu::Error::NoDevice { .. })
        ) || matches!(self, FileError::Net(e) if e.is_bad_input())
    }
}

/// What `bgsub_file` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// Frames turned into masks.
    pub frames: usize,
    /// On the coprocessor: what the CPU copied on the way.
    pub copies: Option<super::Copies>,
}

/// Reads raw 8-bit frames from `input`, writes one mask per frame to `output`
/// (through a temporary file renamed at the end, so a failure leaves no partial
/// output).
pub fn bgsub_file(
    params: Params,
    input: &std::path::Path,
    output: &std::path::Path,
    device: Device,
) -> Result<Done, FileError> {
    let n = params.frame_bytes();
    let mut src = std::fs::File::open(input).map_err(io(input))?;
    let meta = src.metadata().map_err(io(input))?;
    if meta.is_dir() {
        return Err(FileError::NotAFile {
            path: input.to_path_buf(),
            what: "a directory",
        });
    }
    let bad_length = |len: u64| FileError::BadLength {
        path: input.to_path_buf(),
        len: len as usize,
        width: params.width,
        height: params.height,
        frame: n,
    };
    // A regular file's length is known up front; a pipe's is found at its end.
    if meta.is_file() && (meta.len() == 0 || !meta.len().is_multiple_of(n as u64)) {
        return Err(bad_length(meta.len()));
    }
    if device == Device::Sim {
        return bgsub_stream(
            params,
            super::Source::File(input.to_path_buf()),
            super::Sink::File(output.to_path_buf()),
            device,
        );
    }
    let (partial, file) = PartialFile::create(output).map_err(io(output))?;
    let mut frames = Vec::new();
    src.read_to_end(&mut frames).map_err(io(input))?;
    if frames.is_empty() || !frames.len().is_multiple_of(n) {
        return Err(bad_length(frames.len() as u64));
    }
    let mut masks = vec![0u8; frames.len()];
    let mut sub = Subtractor::new(params, device)?;
    for (f, m) in frames.chunks(n).zip(masks.chunks_mut(n)) {
        sub.process(f, m)?;
    }
    let mut file = file;
    file.write_all(&masks)
        .and_then(|()| file.sync_all())
        .map_err(io(partial.path()))?;
    partial.finish().map_err(io(output))?;
    Ok(Done {
        frames: frames.len() / n,
        copies: None,
    })
}

/// Frames from `source` to masks at `sink` as one process network: source ->
/// the coprocessor node (frames and masks in queues in its DMA memory, read
/// and written there by the file ends) or the software as a node -> sink.
/// Either end is a file or a network edge; a file output is renamed into
/// place only on success, and a file that ends inside a frame is named.
pub fn bgsub_stream(
    params: Params,
    source: super::Source,
    sink: super::Sink,
    device: Device,
) -> Result<Done, FileError> {
    let n = params.frame_bytes();
    let chunk = n * (64usize << 10).div_ceil(n);
    let cap = 2 * chunk;
    let mut g = Graph::new();
    let mut rig = None;
    let ((mut s_out, b_in), (b_out, mut k_in)) = match device {
        Device::Sim => {
            let r = Rig::new(
                (4 * cap + 2 * n + (4 << 20)).next_power_of_two(),
                Clock::Unlimited,
                true,
                CachePolicy::Coherent,
                Box::new(BgSubCore::new(params)),
            )?;
            let memory = r.engines[0]
                .pool()
                .queue_memory()
                .map_err(dmaflow::rig::Error::from)?;
            let q = (
                g.connect_in::<u8>(("source", "out"), ("bgsub", "in"), cap, memory.clone())?,
                g.connect_in::<u8>(("bgsub", "out"), ("sink", "in"), cap, memory)?,
            );
            rig = Some(r);
            q
        }
        Device::Cpu | Device::Cuda(_) => (
            g.connect_with_capacity::<u8>(("source", "out"), ("bgsub", "in"), cap)?,
            g.connect_with_capacity::<u8>(("bgsub", "out"), ("sink", "in"), cap)?,
        ),
    };
    // Frames the software node turned into masks.
    let frames = Arc::new(AtomicU64::new(0));
    let counted = frames.clone();
    // A file source: bytes read, and whether the file ended inside a frame
    // (a pipe's length is known only at its end).
    let read = Arc::new(AtomicU64::new(0));
    let seen = read.clone();
    let torn = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let torn_flag = torn.clone();
    let mut torn_path = None;
    match source {
        super::Source::File(path) => {
            let mut src = std::fs::File::open(&path).map_err(io(&path))?;
            torn_path = Some(path.clone());
            g.node("source", move || {
                loop {
                    let slots = s_out.reserve(chunk)?;
                    let mut filled = 0;
                    while filled < slots.len() {
                        match src.read(&mut slots[filled..]) {
                            Ok(0) => break,
                            Ok(k) => filled += k,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(format!("{}: {e}", path.display()).into()),
                        }
                    }
                    let want = slots.len();
                    s_out.commit(filled)?;
                    let total = seen.fetch_add(filled as u64, Ordering::Relaxed) + filled as u64;
                    if filled < want {
                        if total == 0 || !total.is_multiple_of(n as u64) {
                            torn_flag.store(true, Ordering::Relaxed);
                            return Err(format!("{}: ends inside a frame", path.display()).into());
                        }
                        return Ok(());
                    }
                }
            })?;
        }
        super::Source::Net(edge) => {
            dmaflow_net::add_source(&mut g, "source", edge, s_out)?;
        }
    }
    let stats = Arc::new(Mutex::new(StageStats::default()));
    match rig.as_mut() {
        Some(r) => {
            let e1 = r.engines.remove(1);
            let e0 = r.engines.remove(0);
            let cfg = bgsub::Config {
                params,
                completion: Completion::Poll,
            };
            bgsub::add_node(&mut g, "bgsub", [e0, e1], cfg, b_in, b_out, stats.clone())?;
        }
        None => {
            let (mut b_in, mut b_out) = (b_in, b_out);
            // Opened here, so that a missing device is this call's error.
            let mut sub = Subtractor::new(params, device)?;
            g.node("bgsub", move || {
                let mut mask = vec![0u8; n];
                loop {
                    let f = b_in.peek(n)?;
                    if f.is_empty() {
                        return Ok(());
                    }
                    if f.len() < n {
                        return Err(format!(
                            "the stream ended {} bytes into a {n}-byte frame",
                            f.len()
                        )
                        .into());
                    }
                    sub.process(&f[..n], &mut mask)?;
                    b_in.consume(n)?;
                    b_out.write(&mask)?;
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        }
    }
    let mut partial = None;
    match sink {
        super::Sink::File(output) => {
            let (p, file) = PartialFile::create(&output).map_err(io(&output))?;
            let tmp = p.path().to_path_buf();
            partial = Some((p, output));
            g.node("sink", move || {
                let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
                let fail = |e: std::io::Error| format!("{}: {e}", tmp.display());
                loop {
                    let s = k_in.peek(1)?;
                    if s.is_empty() {
                        break;
                    }
                    w.write_all(s).map_err(fail)?;
                    let k = s.len();
                    k_in.consume(k)?;
                }
                w.flush().map_err(fail)?;
                w.get_ref().sync_all().map_err(fail)?;
                Ok(())
            })?;
        }
        super::Sink::Net(edge) => {
            dmaflow_net::add_sink(&mut g, "sink", edge, k_in)?;
        }
    }
    let result = g.run();
    drop(rig);
    if let (true, Some(path)) = (torn.load(Ordering::Relaxed), torn_path) {
        return Err(FileError::BadLength {
            path,
            len: read.load(Ordering::Relaxed) as usize,
            width: params.width,
            height: params.height,
            frame: n,
        });
    }
    result?;
    if let Some((p, output)) = partial {
        p.finish().map_err(io(&output))?;
    }
    let s = *stats.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(match device {
        Device::Sim => Done {
            frames: s.bytes_out as usize / n,
            copies: Some(super::Copies {
                copied: s.bytes_copied,
                delivered: s.bytes_out,
            }),
        },
        Device::Cpu | Device::Cuda(_) => Done {
            frames: frames.load(Ordering::Relaxed) as usize,
            copies: None,
        },
    })
}
