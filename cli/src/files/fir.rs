//! `dmaflow fir`'s file tool: a file of little-endian `f32` samples through a
//! file source -> FIR -> file sink process network, the output appearing only on
//! success.

use dmaflow::accel::stage::{self, StageConfig, StageStats};
use dmaflow::dma::Completion;
use dmaflow::dsp::fir::{Mode, OverlapSave, add_node};
use dmaflow::sim::FirCore;

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{Done, End, FileError, Unit, board, io, run};

/// Where the filter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FirDevice {
    /// The FIR coprocessor on the emulated fabric, an accelerator node whose
    /// DMA engine reads and writes the graph's queues in place (f32
    /// accumulation in time order; within 1e-5 relative of the CPU filter).
    Sim,
    /// Overlap-save in software.
    Cpu,
}

/// Samples per window hop the coprocessor is given (its answer per window).
pub const SIM_HOP: usize = 4096;

/// Reads a whole file of little-endian `f32` samples.
pub fn read_f32_file(path: &Path) -> Result<Vec<f32>, FileError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    if !Unit::Samples.whole(bytes.len() as u64) {
        let (path, len) = (path.to_path_buf(), bytes.len() as u64);
        return Err(FileError::BadLength {
            path,
            len,
            of: Unit::Samples,
        });
    }
    let sample = |c: &[u8]| f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    Ok(bytes.chunks_exact(4).map(sample).collect())
}

/// Filters the samples from `source` into `sink` through a source -> FIR ->
/// sink graph; a file sink's output appears only when everything succeeded.
/// A network end is a dmaflow-net node on the same queues: the filter does
/// not know. On the CPU, `fft_len` is the FFT length (the default for the
/// taps when `None`). Returns the samples filtered, and on the coprocessor
/// what the CPU copied.
pub fn filter(
    taps: &Path,
    ends: (End, End),
    device: FirDevice,
    fft_len: Option<usize>,
) -> Result<Done, FileError> {
    let taps = read_f32_file(taps)?;
    match device {
        FirDevice::Cpu => {
            let fir = OverlapSave::new(&taps, fft_len)?;
            let n = fir.fft_len();
            let chunk = (64 << 10).max(n);
            let caps = (2 * chunk + n, 2 * chunk);
            let how = (chunk, 0, Unit::Samples);
            run(ends, ("fir", caps, &None), how, |g, f_in, f_out| {
                add_node(g, "fir", fir, Mode::ZeroCopy, f_in, f_out)?;
                Ok(None)
            })
        }
        FirDevice::Sim => {
            let (mut rig, memory) = board(64 << 20, Box::new(FirCore::new()))?;
            dmaflow::accel::fir::load_taps(&rig.control()?, &taps)?;
            let (chunk, window) = (64 << 10, SIM_HOP + taps.len() - 1);
            let caps = (2 * chunk + 4 * window, 2 * chunk + 4 * SIM_HOP);
            let cfg = StageConfig {
                window,
                hop: SIM_HOP,
                out_max: SIM_HOP,
                min_window: taps.len(),
                depth: 4,
                completion: Completion::Poll,
            };
            // The coprocessor filters windows that overlap by taps - 1
            // samples: the stream starts with that many zeros (the filter's
            // zero initial state).
            let how = (chunk, taps.len() - 1, Unit::Samples);
            run::<f32>(ends, ("fir", caps, &memory), how, |g, f_in, f_out| {
                let engine = rig.engines.remove(0);
                let stats = Arc::new(Mutex::new(StageStats::default()));
                stage::add_node(g, "fir", engine, cfg, f_in, f_out, stats.clone())?;
                Ok(Some((rig, stats)))
            })
        }
    }
}
