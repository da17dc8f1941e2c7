//! `dmaflow bgsub`'s file tool: a file of 8-bit frames in, a file of masks out,
//! on the emulated coprocessor or in software (identical bytes), the output
//! appearing only on success.

use dmaflow::axi::Config as AxiConfig;
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params};
use dmaflow::rig::BgSubCoprocessor;
use dmaflow::sim::Clock;

/// Where `dmaflow bgsub` runs the algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The coprocessor on the emulated fabric, through two DMA engines.
    Sim,
    /// The software implementation.
    Cpu,
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
    /// A frame larger than one transfer of the coprocessor's DMA engine.
    #[error(
        "a {width} x {height} frame ({frame} bytes) is more than one transfer of the coprocessor's \
         DMA engine carries ({max} bytes); use --device cpu for frames this large"
    )]
    FrameTooLarge {
        /// Frame width.
        width: usize,
        /// Frame height.
        height: usize,
        /// Bytes per frame.
        frame: usize,
        /// Largest transfer.
        max: usize,
    },
    /// The coprocessor failed.
    #[error("coprocessor: {0}")]
    Device(#[from] dmaflow::rig::Error),
}

impl FileError {
    /// Whether the caller's input is at fault (missing or malformed file, bad
    /// size) rather than the run.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, FileError::Device(_))
    }
}

/// Reads raw 8-bit frames from `input`, writes one mask per frame to `output`
/// (through a temporary file renamed at the end, so a failure leaves no partial
/// output). Returns the number of frames.
pub fn bgsub_file(
    params: Params,
    input: &std::path::Path,
    output: &std::path::Path,
    device: Device,
) -> Result<usize, FileError> {
    let io = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| FileError::Io { path, source }
    };
    let n = params.frame_bytes();
    // The coprocessor moves a frame in one transfer per stream: refuse before
    // reading anything a frame its engine cannot carry.
    let max = (1usize << AxiConfig::default().length_width) - 1;
    if device == Device::Sim && n > max {
        return Err(FileError::FrameTooLarge {
            width: params.width,
            height: params.height,
            frame: n,
            max,
        });
    }
    let frames = std::fs::read(input).map_err(io(input))?;
    if frames.is_empty() || !frames.len().is_multiple_of(n) {
        return Err(FileError::BadLength {
            path: input.to_path_buf(),
            len: frames.len(),
            width: params.width,
            height: params.height,
            frame: n,
        });
    }
    let mut masks = vec![0u8; frames.len()];
    match device {
        Device::Cpu => {
            let mut sub = BackgroundSubtractor::new(params);
            for (f, m) in frames.chunks(n).zip(masks.chunks_mut(n)) {
                sub.process(f, m)?;
            }
        }
        Device::Sim => {
            let mut hw = BgSubCoprocessor::new(params, Clock::Unlimited, Completion::Poll)?;
            for (f, m) in frames.chunks(n).zip(masks.chunks_mut(n)) {
                hw.process(f, m)?;
            }
        }
    }
    let name = output
        .file_name()
        .map_or_else(|| "masks".into(), |s| s.to_string_lossy().into_owned());
    let tmp = output.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    if let Err(e) = std::fs::write(&tmp, &masks).and_then(|()| std::fs::rename(&tmp, output)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(output)(e));
    }
    Ok(frames.len() / n)
}
