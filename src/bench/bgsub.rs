//! `dmaflow bench bgsub`: paper 000's application. Approximate-median background
//! subtraction as a coprocessor in the fabric ([`BgSubCore`]), fed through two
//! AXI DMA engines (frame and background in, new background and mask out, the
//! paper's two channels) at 100 MHz x 1 B, against the software implementation
//! ([`crate::dsp::bgsub`]) on the CPU; every mask is checked frame by frame.

use std::time::Instant;

use serde_json::json;

use super::{Error, Rig, median, table};
use crate::axi::Config as AxiConfig;
use crate::dma::{Completion, Lane, two_way_together};
use crate::dsp::bgsub::{BackgroundSubtractor, Params, synthetic_frames};
use crate::mem::DmaBuf;
use crate::platform::MemoryModel;
use crate::sim::{BgSubCore, Clock};

/// The coprocessor on its emulated board, driven zero-copy: frames go into DMA
/// buffers, and the new background it returns is the next frame's background
/// input (two buffers, swapped), so the background never passes through the CPU.
pub struct Coprocessor {
    params: Params,
    rig: Rig,
    frame: DmaBuf<u8>,
    mask: DmaBuf<u8>,
    /// Background in, background out (swapped after each frame).
    background: [DmaBuf<u8>; 2],
    started: bool,
    completion: Completion,
}

impl Coprocessor {
    /// A coprocessor for `params`, clocked at `clock`, waited for by `completion`,
    /// on a coherent board.
    pub fn new(params: Params, clock: Clock, completion: Completion) -> Result<Self, Error> {
        Self::on(params, clock, completion, MemoryModel::Coherent)
    }

    /// Like [`new`](Self::new), on a board with memory `model` (a non-coherent
    /// one with explicit cache maintenance).
    pub fn on(
        params: Params,
        clock: Clock,
        completion: Completion,
        model: MemoryModel,
    ) -> Result<Self, Error> {
        let n = params.frame_bytes();
        let rig = Rig::with_model(
            (4 * n + (1 << 20)).next_power_of_two(),
            clock,
            false,
            super::policy_for(model),
            model,
            Box::new(BgSubCore::new(params)),
        )?;
        let pool = rig.engines[0].pool().clone();
        Ok(Coprocessor {
            params,
            frame: pool.alloc(n)?,
            mask: pool.alloc(n)?,
            background: [pool.alloc(n)?, pool.alloc(n)?],
            rig,
            started: false,
            completion,
        })
    }

    /// Processes the next frame into `mask` (the first frame is also the initial
    /// background).
    pub fn process(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), Error> {
        let n = self.params.frame_bytes();
        if frame.len() != n || mask.len() != n {
            return Err(Error::Corrupted {
                what: format!("bgsub frame of {} bytes (frames are {n})", frame.len()),
                got: frame.len() as u32,
                expected: n as u32,
            });
        }
        self.frame.as_mut_slice().copy_from_slice(frame);
        if !self.started {
            self.background[0].as_mut_slice().copy_from_slice(frame);
            self.started = true;
        }
        let [bg_in, bg_out] = &mut self.background;
        let (e0, e1) = (&self.rig.engines[0], &self.rig.engines[1]);
        let got = two_way_together(
            &mut [
                Lane {
                    engine: e0,
                    tx: &self.frame,
                    tx_len: n,
                    rx: bg_out,
                },
                Lane {
                    engine: e1,
                    tx: bg_in,
                    tx_len: n,
                    rx: &mut self.mask,
                },
            ],
            self.completion,
        )?;
        if got != [n, n] {
            return Err(Error::Corrupted {
                what: "bgsub coprocessor answer".into(),
                got: got.iter().min().copied().unwrap_or(0) as u32,
                expected: n as u32,
            });
        }
        mask.copy_from_slice(self.mask.as_slice());
        self.background.swap(0, 1);
        Ok(())
    }

    /// The background model the coprocessor holds now.
    pub fn background(&self) -> &[u8] {
        self.background[0].as_slice()
    }
}

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
    Params(#[from] crate::dsp::bgsub::Error),
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
    Device(#[from] Box<Error>),
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
            let mut hw =
                Coprocessor::new(params, Clock::Unlimited, Completion::Poll).map_err(Box::new)?;
            for (f, m) in frames.chunks(n).zip(masks.chunks_mut(n)) {
                hw.process(f, m).map_err(Box::new)?;
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

/// The paper's fabric clock: 100 MHz x 1 B.
pub const FABRIC: Clock = super::twoway::FABRIC;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Frame width.
    pub width: usize,
    /// Frame height.
    pub height: usize,
    /// Frames per run.
    pub frames: usize,
    /// The board's memory (a non-coherent one runs with explicit maintenance).
    pub memory: MemoryModel,
}

impl Config {
    /// VGA frames as in the paper.
    pub fn full() -> Self {
        Config {
            width: 640,
            height: 480,
            frames: 200,
            memory: MemoryModel::Coherent,
        }
    }

    /// Fewer frames.
    pub fn quick() -> Self {
        Config {
            frames: 40,
            ..Self::full()
        }
    }

    /// A tiny run for tests.
    pub fn tiny() -> Self {
        Config {
            width: 40,
            height: 30,
            frames: 6,
            memory: MemoryModel::Coherent,
        }
    }
}

/// One device's run.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `fabric` (the coprocessor through DMA) or `cpu`.
    pub device: &'static str,
    /// Frame width.
    pub width: usize,
    /// Frame height.
    pub height: usize,
    /// Frames processed.
    pub frames: usize,
    /// Seconds for all of them.
    pub seconds: f64,
    /// Median milliseconds per frame.
    pub frame_ms: f64,
    /// Frames per second at the median frame time (this machine's host steals
    /// CPU time in bursts; the median is what the path itself sustains).
    pub frames_per_s: f64,
    /// Every mask equal to the software implementation's.
    pub verified: bool,
}

/// Runs both devices on the same synthetic video.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Vec<Row>, Error> {
    let p = Params::new(cfg.width, cfg.height, 25, true).map_err(|e| Error::Peer {
        peer: "bgsub",
        reason: e.to_string(),
    })?;
    let n = p.frame_bytes();
    let video = synthetic_frames(&p, cfg.frames, 7);
    let row = |device, times: &[f64], verified| {
        let frame_ms = median(times) * 1e3;
        Row {
            device,
            width: cfg.width,
            height: cfg.height,
            frames: cfg.frames,
            seconds: times.iter().sum(),
            frame_ms,
            frames_per_s: 1e3 / frame_ms,
            verified,
        }
    };
    progress("bgsub cpu");
    let mut sw = BackgroundSubtractor::new(p);
    let mut expected = vec![0u8; video.len()];
    let mut times = Vec::with_capacity(cfg.frames);
    for (f, m) in video.chunks(n).zip(expected.chunks_mut(n)) {
        let t0 = Instant::now();
        sw.process(f, m).map_err(|e| Error::Peer {
            peer: "bgsub",
            reason: e.to_string(),
        })?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let cpu = row("cpu", &times, true);
    progress("bgsub fabric");
    let mut hw = Coprocessor::on(p, FABRIC, Completion::Poll, cfg.memory)?;
    let mut masks = vec![0u8; video.len()];
    let mut times = Vec::with_capacity(cfg.frames);
    for (f, m) in video.chunks(n).zip(masks.chunks_mut(n)) {
        let t0 = Instant::now();
        hw.process(f, m)?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let verified = masks == expected && Some(hw.background()) == sw.background();
    Ok(vec![row("fabric", &times, verified), cpu])
}

/// The result as a table.
pub fn render(rows: &[Row]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.device.to_string(),
                format!("{}x{}", r.width, r.height),
                r.frames.to_string(),
                format!("{:.1}", r.frames_per_s),
                format!("{:.3}", r.frame_ms),
                if r.verified { "yes" } else { "NO" }.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "device",
            "frame",
            "frames",
            "frames/s",
            "median ms/frame",
            "verified",
        ],
        &cells,
    )
}

/// The result as `{"experiment":"bgsub","rows":[...]}`.
pub fn json(rows: &[Row]) -> serde_json::Value {
    json!({
        "experiment": "bgsub",
        "rows": rows.iter().map(|r| json!({
            "device": r.device,
            "width": r.width,
            "height": r.height,
            "frames": r.frames,
            "seconds": r.seconds,
            "frame_ms": r.frame_ms,
            "frames_per_s": r.frames_per_s,
            "verified": r.verified,
        })).collect::<Vec<_>>(),
    })
}

/// The run as a report.
pub fn report(cfg: &Config, rows: &[Row]) -> super::report::Report {
    // Frame and background stream in side by side, one engine each.
    let ideal = 100e6 / (cfg.width * cfg.height) as f64;
    super::report::Report {
        experiment: "bgsub",
        heading: super::on_board(
            format!(
                "bgsub: {} frames of {}x{}, coprocessor on two DMA engines at 100 MHz x 1 B \
             (the fabric's bound: {ideal:.1} frames/s) vs the software implementation",
                cfg.frames, cfg.width, cfg.height
            ),
            cfg.memory,
        ),
        text: render(rows),
        json: json(rows),
        plots: vec![super::plot::LinePlot {
            title: "Background subtraction: frames per second".into(),
            x_label: "frame".into(),
            y_label: "frames/s".into(),
            log_x: false,
            log_y: false,
            series: rows
                .iter()
                .map(|r| super::plot::Series {
                    label: r.device.into(),
                    points: vec![(0.0, r.frames_per_s), (r.frames as f64, r.frames_per_s)],
                })
                .collect(),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_the_non_coherent_board_with_its_data_checked() {
        // Every transfer's data is checked by the run: a missing cache operation
        // fails it with stale data.
        let cfg = Config {
            memory: MemoryModel::NonCoherent,
            ..Config::tiny()
        };
        let rows = run(&cfg, |_| {}).unwrap();
        assert!(!rows.is_empty());
        assert!(rows.iter().all(|r| r.verified), "{rows:?}");
    }

    #[test]
    fn tiny_run_verifies_every_frame_and_is_consistent() {
        let rows = run(&Config::tiny(), |_| {}).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert!(r.verified, "{r:?}");
            assert!((1e3 / r.frame_ms - r.frames_per_s).abs() < 1e-9 * r.frames_per_s);
            assert!(r.frame_ms * 1e-3 <= r.seconds, "{r:?}");
        }
        // The fabric cannot beat its clock: two 1200-byte streams side by side at
        // 100 MB/s take 12 us a frame.
        let fabric = &rows[0];
        assert!(fabric.frame_ms >= 1200.0 / 100e6 * 1e3, "{fabric:?}");
        assert_eq!(json(&rows)["rows"][0]["device"], "fabric");
    }

    #[test]
    fn a_frame_of_the_wrong_size_is_refused() {
        let p = Params::new(8, 8, 25, true).unwrap();
        let mut hw = Coprocessor::new(p, Clock::Unlimited, Completion::Poll).unwrap();
        assert!(hw.process(&[0u8; 63], &mut [0u8; 64]).is_err());
        hw.process(&[5u8; 64], &mut [1u8; 64]).unwrap();
    }
}
