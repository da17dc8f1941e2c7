//! `dmaflow fir`'s file tool: a file of little-endian `f32` samples through a
//! file source -> FIR -> file sink process network, the output appearing only on
//! success.

use dmaflow::accel::stage::{self, StageConfig, StageStats};
use dmaflow::dma::Completion;
use dmaflow::dsp::fir::{Error, Mode, OverlapSave, add_node};
use dmaflow::graph;
use dmaflow::mem::CachePolicy;
use dmaflow::rig::Rig;
use dmaflow::sim::{Clock, FirCore};

use super::Copies;
use super::partial::PartialFile;

/// Why a file could not be filtered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file of `f32` samples whose length is not a multiple of 4 bytes.
    #[error(
        "{path}: {len} bytes is not a whole number of little-endian f32 samples (4 bytes each)"
    )]
    BadLength {
        /// The file.
        path: std::path::PathBuf,
        /// Its length in bytes.
        len: u64,
    },
    /// The taps or FFT length make no filter.
    #[error("{0}")]
    Filter(#[from] Error),
    /// The input is not a file of samples (a directory, say).
    #[error("{path}: not a file of samples ({what})")]
    NotAFile {
        /// The path given.
        path: std::path::PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The output's directory does not exist.
    #[error("{path}: its directory does not exist")]
    NoDirectory {
        /// The output path given.
        path: std::path::PathBuf,
    },
    /// The filtering graph failed.
    #[error("{0}")]
    Graph(#[from] graph::Error),
    /// The FIR coprocessor refused the taps.
    #[error("FIR coprocessor: {0}")]
    Coprocessor(#[from] dmaflow::accel::fir::Error),
    /// The emulated board could not be set up.
    #[error("emulated board: {0}")]
    Board(#[from] dmaflow::rig::Error),
    /// A network edge could not be set up.
    #[error("{0}")]
    Net(#[from] dmaflow_net::Error),
}

pub use super::{Sink, Source};

/// What `filter_file` did.
#[derive(Debug, Clone, PartialEq)]
pub struct Filtered {
    /// Samples filtered.
    pub samples: u64,
    /// On the coprocessor: what the CPU copied on the way.
    pub copies: Option<Copies>,
    /// What crossed each network end.
    pub net: Vec<NetEnd>,
}

/// What crossed one network end of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct NetEnd {
    /// The endpoint.
    pub endpoint: String,
    /// `"received"` or `"sent"`.
    pub direction: &'static str,
    /// Messages, samples, samples lost on the way (PUB/SUB with tag
    /// headers), tags received.
    pub counts: (u64, u64, u64, u64),
    /// The first tags that crossed, at their offsets in this end's stream.
    pub tags: Vec<dmaflow_net::tags::Tag>,
}

/// Where the filter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirDevice {
    /// Overlap-save in software on the CPU (FFT length, read mode).
    Cpu {
        /// FFT length (the default for the taps when `None`).
        fft_len: Option<usize>,
        /// How the filter node reads its input.
        mode: Mode,
    },
    /// The FIR coprocessor on the emulated fabric, as an accelerator node: the
    /// samples never pass through the CPU between the file source and sink.
    Sim,
}

/// Samples per window hop the coprocessor is given (its answer per window).
pub const SIM_HOP: usize = 4096;

impl FileError {
    /// Whether the error is the caller's input (a missing or malformed file, a bad
    /// filter) rather than a failure while running.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            FileError::Io { .. }
                | FileError::BadLength { .. }
                | FileError::Filter(_)
                | FileError::NotAFile { .. }
                | FileError::NoDirectory { .. }
                | FileError::Net(
                    dmaflow_net::Error::BadEndpoint { .. }
                        | dmaflow_net::Error::UnknownScheme { .. }
                        | dmaflow_net::Error::Socket { .. }
                )
                | FileError::Coprocessor(
                    dmaflow::accel::fir::Error::Taps { .. }
                        | dmaflow::accel::fir::Error::NonFiniteTap(_)
                )
        )
    }
}

fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The filter between the file source and sink.
enum Middle {
    Cpu(OverlapSave, Mode),
    Sim(Rig),
}

/// Reads a whole file of little-endian `f32` samples.
pub fn read_f32_file(path: &std::path::Path) -> Result<Vec<f32>, FileError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    if bytes.len() % 4 != 0 {
        return Err(FileError::BadLength {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Filters the samples of `input` into `output` through a file source -> FIR ->
/// file sink graph. The output appears only when everything succeeded: it is written
/// to a temporary file beside it and renamed at the end. Returns the number of
/// samples filtered, and on the coprocessor what the CPU copied.
pub fn filter_file(
    taps: &std::path::Path,
    input: &std::path::Path,
    output: &std::path::Path,
    device: FirDevice,
) -> Result<Filtered, FileError> {
    filter(
        taps,
        Source::File(input.to_path_buf()),
        Sink::File(output.to_path_buf()),
        device,
    )
}

/// Filters the samples from `source` into `sink` through a source -> FIR ->
/// sink graph; a file sink's output appears only when everything succeeded.
/// A network end is a dmaflow-net node on the same queues: the filter does
/// not know. Returns the samples filtered, and on the coprocessor what the
/// CPU copied.
pub fn filter(
    taps: &std::path::Path,
    source: Source,
    sink: Sink,
    device: FirDevice,
) -> Result<Filtered, FileError> {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex, PoisonError};

    let taps = read_f32_file(taps)?;
    // The filter in the middle, checked before any file is touched.
    let middle = match device {
        FirDevice::Cpu { fft_len, mode } => Middle::Cpu(OverlapSave::new(&taps, fft_len)?, mode),
        FirDevice::Sim => {
            let rig = Rig::new(
                64 << 20,
                Clock::Unlimited,
                true,
                CachePolicy::Coherent,
                Box::new(FirCore::new()),
            )?;
            dmaflow::accel::fir::load_taps(&rig.control()?, &taps)?;
            Middle::Sim(rig)
        }
    };
    let mut g = graph::Graph::new();
    // The coprocessor filters windows that overlap by taps - 1 samples: the
    // stream starts with that many zeros (the filter's zero initial state).
    let sim = matches!(middle, Middle::Sim(_));
    let (chunk, lead, s_out, cpu_node, sim_node, k_in, mut rig) = match middle {
        Middle::Cpu(fir, mode) => {
            let n = fir.fft_len();
            let chunk = (64 << 10).max(n);
            let (s_out, f_in) =
                g.connect_with_capacity::<f32>(("source", "out"), ("fir", "in"), 2 * chunk + n)?;
            let (f_out, k_in) =
                g.connect_with_capacity::<f32>(("fir", "out"), ("sink", "in"), 2 * chunk)?;
            (
                chunk,
                0,
                s_out,
                Some((fir, mode, f_in, f_out)),
                None,
                k_in,
                None,
            )
        }
        Middle::Sim(rig) => {
            let chunk = 64 << 10;
            let memory = rig.engines[0]
                .pool()
                .queue_memory()
                .map_err(dmaflow::rig::Error::from)?;
            let window = SIM_HOP + taps.len() - 1;
            let (s_out, f_in) = g.connect_in::<f32>(
                ("source", "out"),
                ("fir", "in"),
                2 * chunk + 4 * window,
                memory.clone(),
            )?;
            let (f_out, k_in) = g.connect_in::<f32>(
                ("fir", "out"),
                ("sink", "in"),
                2 * chunk + 4 * SIM_HOP,
                memory,
            )?;
            (
                chunk,
                taps.len() - 1,
                s_out,
                None,
                Some((f_in, f_out)),
                k_in,
                Some(rig),
            )
        }
    };
    let mut s_out = s_out;
    let mut k_in = k_in;
    // What the source read, and the input's length if it ends mid-sample.
    let read = Arc::new(Mutex::new((0u64, None::<u64>)));
    let seen = read.clone();
    let mut net_in = None;
    let mut file_path = None;
    match source {
        Source::File(in_path) => {
            let mut src = std::fs::File::open(&in_path).map_err(io_err(&in_path))?;
            let meta = src.metadata().map_err(io_err(&in_path))?;
            if meta.is_dir() {
                return Err(FileError::NotAFile {
                    path: in_path,
                    what: "a directory",
                });
            }
            // A regular file's length is known up front; a pipe's or a /proc
            // file's is found by reading to the end.
            if meta.is_file() && meta.len() != 0 && meta.len() % 4 != 0 {
                return Err(FileError::BadLength {
                    path: in_path,
                    len: meta.len(),
                });
            }
            file_path = Some(in_path.clone());
            g.node("source", move || {
                if lead > 0 {
                    s_out.write(&vec![0.0f32; lead])?;
                }
                loop {
                    let slots = s_out.reserve(chunk)?;
                    // Read straight into the queue's slots; samples are little-endian on
                    // disk. Short reads (pipes) are read on until the chunk is full or the
                    // input ends.
                    let bytes: &mut [u8] = bytemuck::cast_slice_mut(slots);
                    let want = bytes.len();
                    let mut filled = 0;
                    while filled < want {
                        match src.read(&mut bytes[filled..]) {
                            Ok(0) => break,
                            Ok(k) => filled += k,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(format!("{}: {e}", in_path.display()).into()),
                        }
                    }
                    let whole = filled / 4;
                    if cfg!(target_endian = "big") {
                        for x in slots[..whole].iter_mut() {
                            *x = f32::from_bits(u32::from_le(x.to_bits()));
                        }
                    }
                    s_out.commit(whole)?;
                    let mut r = seen.lock().unwrap_or_else(PoisonError::into_inner);
                    r.0 += whole as u64;
                    if filled < want {
                        if filled % 4 != 0 {
                            let len = r.0 * 4 + (filled % 4) as u64;
                            r.1 = Some(len);
                            return Err(format!(
                                "{}: {len} bytes is not a whole number of samples",
                                in_path.display()
                            )
                            .into());
                        }
                        return Ok(());
                    }
                }
            })?;
        }
        Source::Net(edge) => {
            if lead > 0 {
                s_out.write(&vec![0.0f32; lead])?;
            }
            let at = edge.endpoint.to_string();
            net_in = Some((at, dmaflow_net::add_source(&mut g, "source", edge, s_out)?));
        }
    }
    let stats = Arc::new(Mutex::new(StageStats::default()));
    if let Some((fir, mode, f_in, f_out)) = cpu_node {
        add_node(&mut g, "fir", fir, mode, f_in, f_out)?;
    }
    if let (Some((f_in, f_out)), Some(rig)) = (sim_node, rig.as_mut()) {
        let cfg = StageConfig {
            window: SIM_HOP + taps.len() - 1,
            hop: SIM_HOP,
            out_max: SIM_HOP,
            min_window: taps.len(),
            depth: 4,
            completion: Completion::Poll,
        };
        let engine = rig.engines.remove(0);
        stage::add_node(&mut g, "fir", engine, cfg, f_in, f_out, stats.clone())?;
    }
    let mut partial = None;
    let mut net_out = None;
    match sink {
        Sink::File(output) => {
            let dir = match output.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            if !dir.is_dir() {
                return Err(FileError::NoDirectory { path: output });
            }
            let (p, sink_file) = PartialFile::create(&output).map_err(|source| FileError::Io {
                path: output.clone(),
                source,
            })?;
            let tmp_path = p.path().to_path_buf();
            partial = Some((p, output));
            g.node("sink", move || {
                let mut w = std::io::BufWriter::with_capacity(1 << 20, sink_file);
                loop {
                    let s = k_in.peek(1)?;
                    if s.is_empty() {
                        break;
                    }
                    for x in s {
                        w.write_all(&x.to_le_bytes())
                            .map_err(|e| format!("{}: {e}", tmp_path.display()))?;
                    }
                    let k = s.len();
                    k_in.consume(k)?;
                }
                w.flush()
                    .map_err(|e| format!("{}: {e}", tmp_path.display()))?;
                w.get_ref()
                    .sync_all()
                    .map_err(|e| format!("{}: {e}", tmp_path.display()))?;
                Ok(())
            })?;
        }
        Sink::Net(edge) => {
            let at = edge.endpoint.to_string();
            net_out = Some((at, dmaflow_net::add_sink(&mut g, "sink", edge, k_in)?));
        }
    }
    let result = g.run();
    drop(rig);
    let (mut samples, bad_len) = *read.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, stats)) = &net_in {
        samples = stats.snapshot().1;
    }
    let mut net = Vec::new();
    if let Some((endpoint, stats)) = net_in {
        net.push(NetEnd {
            endpoint,
            direction: "received",
            counts: stats.snapshot(),
            tags: stats.tags_seen(),
        });
    }
    if let Some((endpoint, stats)) = net_out {
        net.push(NetEnd {
            endpoint,
            direction: "sent",
            counts: stats.snapshot(),
            tags: stats.tags_seen(),
        });
    }
    if let (Some(len), Some(path)) = (bad_len, file_path) {
        return Err(FileError::BadLength { path, len });
    }
    result?;
    if let Some((partial, output)) = partial {
        partial.finish().map_err(io_err(&output))?;
    }
    let copies = sim.then(|| {
        let s = *stats.lock().unwrap_or_else(PoisonError::into_inner);
        Copies {
            copied: s.bytes_copied,
            delivered: s.bytes_out,
        }
    });
    Ok(Filtered {
        samples,
        copies,
        net,
    })
}
