//! `dmaflow fir`'s file tool: a file of little-endian `f32` samples through a
//! file source -> FIR -> file sink process network, the output appearing only on
//! success.

use dmaflow::accel::stage::{self, StageConfig, StageStats};
use dmaflow::dma::Completion;
use dmaflow::dsp::fir::{Mode, OverlapSave, add_node};
use dmaflow::graph;
use dmaflow::mem::CachePolicy;
use dmaflow::rig::Rig;
use dmaflow::sim::{Clock, FirCore};

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Copies, FileError, InEnd, OutEnd, Unit, io};

pub use super::{Sink, Source};

/// What [`filter`] did.
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

/// Reads a whole file of little-endian `f32` samples.
pub fn read_f32_file(path: &Path) -> Result<Vec<f32>, FileError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    if bytes.len() % 4 != 0 {
        return Err(FileError::BadLength {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
            of: Unit::Samples,
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Filters the samples from `source` into `sink` through a source -> FIR ->
/// sink graph; a file sink's output appears only when everything succeeded.
/// A network end is a dmaflow-net node on the same queues: the filter does
/// not know. Returns the samples filtered, and on the coprocessor what the
/// CPU copied.
pub fn filter(
    taps: &Path,
    source: Source,
    sink: Sink,
    device: FirDevice,
) -> Result<Filtered, FileError> {
    let taps = read_f32_file(taps)?;
    let mut g = graph::Graph::new();
    let stats = Arc::new(Mutex::new(StageStats::default()));
    // The filter in the middle, checked before any file is touched.
    let ((s_out, chunk, lead), k_in, mut rig) = match device {
        FirDevice::Cpu { fft_len, mode } => {
            let fir = OverlapSave::new(&taps, fft_len)?;
            let n = fir.fft_len();
            let chunk = (64 << 10).max(n);
            let (s_out, f_in) =
                g.connect_with_capacity::<f32>(("source", "out"), ("fir", "in"), 2 * chunk + n)?;
            let (f_out, k_in) =
                g.connect_with_capacity::<f32>(("fir", "out"), ("sink", "in"), 2 * chunk)?;
            add_node(&mut g, "fir", fir, mode, f_in, f_out)?;
            ((s_out, chunk, 0), k_in, None)
        }
        FirDevice::Sim => {
            let mut rig = Rig::new(
                64 << 20,
                Clock::Unlimited,
                true,
                CachePolicy::Coherent,
                Box::new(FirCore::new()),
            )?;
            dmaflow::accel::fir::load_taps(&rig.control()?, &taps)?;
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
            let cfg = StageConfig {
                window,
                hop: SIM_HOP,
                out_max: SIM_HOP,
                min_window: taps.len(),
                depth: 4,
                completion: Completion::Poll,
            };
            let engine = rig.engines.remove(0);
            stage::add_node(&mut g, "fir", engine, cfg, f_in, f_out, stats.clone())?;
            // The coprocessor filters windows that overlap by taps - 1
            // samples: the stream starts with that many zeros (the filter's
            // zero initial state).
            ((s_out, chunk, taps.len() - 1), k_in, Some(rig))
        }
    };
    let sim = rig.is_some();
    let input = InEnd::add(&mut g, source, s_out, (chunk, lead, Unit::Samples))?;
    let output = OutEnd::add(&mut g, sink, k_in)?;
    let result = g.run();
    rig.take();
    let mut net = Vec::new();
    for (end, direction) in [(input.net(), "received"), (output.net(), "sent")] {
        if let Some((endpoint, stats)) = end {
            net.push(NetEnd {
                endpoint: endpoint.clone(),
                direction,
                counts: stats.snapshot(),
                tags: stats.tags_seen(),
            });
        }
    }
    input.check()?;
    result?;
    let samples = input.items::<f32>();
    output.finish()?;
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
