//! `dmaflow bench bgsub`: paper 000's application. Approximate-median background
//! subtraction as a coprocessor in the fabric ([`BgSubCore`]), fed through two
//! AXI DMA engines (frame and background in, new background and mask out, the
//! paper's two channels) at 100 MHz x 1 B, against the software implementation
//! ([`dmaflow::dsp::bgsub`]) on the CPU; every mask is checked frame by frame.
//! The two take turns frame by frame, each frame timed on its own; the
//! fabric's frames are split into copy in, transfer and copy out.

use std::cell::RefCell;
use std::fmt;

use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params, synthetic_frames};
use dmaflow::platform::MemoryModel;
use dmaflow::rig::{BgSubCoprocessor, Placement};
use dmaflow::sim::Clock;

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::error::Error;
use super::frame::{Bench, Findings, Point};
use super::harness::{OnGpu, Setup, Tables, on_board};
use super::meter::{Cost, Meter, Tally};
use super::report::Target;

/// The paper's fabric clock: 100 MHz x 1 B.
pub const FABRIC: Clock = dmaflow::sim::BGSUB_FABRIC;

/// `dmaflow bench bgsub`.
pub static EXPERIMENT: Bench<Config, Frame, Sample> = Bench {
    name: "bgsub",
    on_gpu: Some(OnGpu::Gpu(Tables::KERNELS)),
    emulator_only: "it drives the background-subtraction coprocessor, which the loopback design \
                    lacks",
    question: "Background subtraction on a coprocessor behind two DMA engines vs the CPU (paper \
               000).",
    conditions: Conditions {
        timed: "each frame from the call to the mask in the caller's buffer, software and \
                fabric in turns frame by frame",
        against: "the software implementation on this CPU and the modelled fabric's bound",
        model: "model_us (two 100 MB/s streams side by side); the emulated core computes on \
                this host",
        paper: USER_X86,
    },
    prepare,
    heading,
    figures: "each frame a round: the figures are over the frames (ms/frame the median frame, \
              with its IQR)",
    findings,
    ..Bench::new(Config::at, |c| c.frames, points, measure, columns)
};

/// What to measure.
pub struct Config {
    /// Frame width.
    pub width: usize,
    /// Frame height.
    pub height: usize,
    /// Frames per run: each frame is one round, both devices in turns.
    pub frames: usize,
    /// The board's memory (a non-coherent one runs with explicit maintenance).
    pub memory: MemoryModel,
    /// The video, the definition's masks and both devices, made before the
    /// first frame (none until then).
    pub state: RefCell<Option<State>>,
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        let (width, height, frames) = setup
            .tier
            .pick((640, 480, 200), (640, 480, 40), (40, 30, 6));
        Config {
            width,
            height,
            frames,
            memory: setup.memory,
            state: RefCell::new(None),
        }
    }
}

/// The run's video and both devices, each device at its next frame.
pub struct State {
    /// The synthetic video, frame after frame.
    video: Vec<u8>,
    /// The pixel-by-pixel definition's masks, frame after frame.
    definition: Vec<u8>,
    /// Bytes per frame.
    bytes: usize,
    /// The software implementation.
    cpu: BackgroundSubtractor,
    /// The coprocessor behind its two engines.
    fabric: BgSubCoprocessor,
    /// The fabric's emulated device on a core of its own (kept for the run).
    _placed: Placement,
    /// The next frame of each device (the fabric, the CPU).
    next: [usize; 2],
}

/// Makes the video, the definition's masks and both devices.
fn prepare(cfg: &mut Config, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
    let p = Params::new(cfg.width, cfg.height, 25, true).map_err(Error::peer("bgsub"))?;
    let video = synthetic_frames(&p, cfg.frames, 7);
    progress("bgsub definition (pixel by pixel)");
    let definition = dmaflow::dsp::bgsub::definition(&p, &video);
    let fabric = BgSubCoprocessor::on(p, FABRIC, Completion::Poll, cfg.memory)?;
    let placed = fabric.rig().dedicate_core()?;
    cfg.state = RefCell::new(Some(State {
        video,
        definition,
        bytes: p.frame_bytes(),
        cpu: BackgroundSubtractor::new(p),
        fabric,
        _placed: placed,
        next: [0, 0],
    }));
    Ok(())
}

/// A frame's size, the point's parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// The fabric (the coprocessor through DMA), then the CPU.
fn points(cfg: &Config) -> Vec<Point<Frame>> {
    let at = Frame {
        width: cfg.width,
        height: cfg.height,
    };
    ["fabric", "cpu"]
        .into_iter()
        .map(|series| Point { series, at })
        .collect()
}

/// One device's frame.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Seconds from the call to the mask in the caller's buffer.
    pub seconds: f64,
    /// Host CPU of the driver or computing thread.
    pub cost: Cost,
    /// For the fabric: microseconds of copy in, transfer (streams, emulated
    /// core and driver) and copy out; `NaN` for the CPU.
    pub stages_us: [f64; 3],
    /// What the modelled fabric needs for the frame (two 100 MB/s streams
    /// side by side, PG021 latencies), in microseconds; none for the CPU.
    pub model_us: Option<f64>,
    /// The mask equal to the definition's; for the fabric, after the frame
    /// both devices have done, its background equal to the software's too.
    pub verified: bool,
}

/// One device's next frame, timed on its own and checked.
fn measure(cfg: &Config, p: &Point<Frame>) -> Result<Sample, Error> {
    let mut state = cfg.state.borrow_mut();
    let missing = |reason: &str| Error::Peer {
        peer: "bgsub",
        reason: reason.into(),
    };
    let s = state
        .as_mut()
        .ok_or_else(|| missing("measured before its video was made"))?;
    let fabric = p.series == "fabric";
    let device = usize::from(!fabric);
    let (n, i) = (s.bytes, s.next[device]);
    let frame_of = |v: &[u8]| v.get(i * n..(i + 1) * n).map(<[u8]>::to_vec);
    let (Some(frame), Some(expected)) = (frame_of(&s.video), frame_of(&s.definition)) else {
        return Err(missing("more rounds than frames"));
    };
    let mut mask = vec![0u8; n];
    let meter = Meter::start(None);
    if fabric {
        s.fabric.process(&frame, &mut mask)?;
    } else {
        s.cpu
            .process(&frame, &mut mask)
            .map_err(Error::peer("bgsub"))?;
    }
    let cost = meter.stop();
    s.next[device] += 1;
    let mut verified = mask == expected;
    let (mut stages_us, mut model_us) = ([f64::NAN; 3], None);
    if fabric {
        let t = s.fabric.last_times();
        stages_us = [t.copy_in, t.transfer, t.copy_out].map(|d| d.as_secs_f64() * 1e6);
        // Frame and background stream side by side on two engines.
        model_us = Some(FABRIC.two_way(n, false).as_secs_f64() * 1e6);
    }
    // Once both have done the frame, the backgrounds they carry agree.
    if s.next[0] == s.next[1] {
        verified &= Some(s.fabric.background()) == s.cpu.background();
    }
    Ok(Sample {
        seconds: cost.wall.as_secs_f64(),
        cost,
        stages_us,
        model_us,
        verified,
    })
}

/// A point over the frames.
pub type Row = super::frame::Row<Frame, Sample>;

/// Milliseconds per frame, the median frame.
fn frame_ms(r: &Row) -> f64 {
    r.spread(|s| s.seconds).scaled(1e3).median
}

/// The modelled fabric's microseconds per frame (none for the CPU).
fn model_us(r: &Row) -> Option<f64> {
    r.samples.first().and_then(|s| s.model_us)
}

/// A stage's typical microseconds per frame (none for the CPU).
fn stage_us(r: &Row, k: usize) -> Option<f64> {
    let f = move |s: &Sample| s.stages_us[k];
    r.measured(f).then(|| r.spread(f).median)
}

/// The rows' columns.
fn columns() -> Columns<'static, Row> {
    let iqr = |r: &Row| r.spread(|s| s.seconds).scaled(1e3);
    let tally = |r: &Row| {
        r.samples.iter().fold(Tally::default(), |mut t, s| {
            t.add(s.cost);
            t
        })
    };
    Columns::new()
        .series(
            "device",
            "device",
            "fabric (the coprocessor through DMA) or cpu",
        )
        .shown("frame", |r: &Row| r.point.at.to_string())
        .kept("width", |r: &Row| r.point.at.width)
        .doc("frame width")
        .kept("height", |r: &Row| r.point.at.height)
        .doc("frame height")
        .plain("frames", "frames", |r: &Row| r.rounds())
        .doc("frames processed, one a round")
        .kept("seconds", |r: &Row| {
            r.each(|s| s.seconds).iter().sum::<f64>()
        })
        .doc("all frames")
        .fixed("frames/s", "frames_per_s", 1, |r| 1e3 / frame_ms(r))
        .doc("at the median frame time")
        .fixed("median ms/frame", "frame_ms", 3, frame_ms)
        .doc("the median frame: what the path sustains when the host steals CPU time in bursts")
        .shown("IQR ms", move |r| {
            format!("{:.3}..{:.3}", iqr(r).p25, iqr(r).p75)
        })
        .kept("frame_ms_p25", move |r| iqr(r).p25)
        .doc("first quartile of the frames")
        .kept("frame_ms_p75", move |r| iqr(r).p75)
        .doc("third quartile of the frames")
        .optional("model us", "model_us", 0, model_us)
        .doc("per frame, the modelled fabric (two 100 MB/s streams side by side); null for cpu")
        .optional("overhead us", "overhead_us", 0, |r| {
            model_us(r).map(|m| frame_ms(r) * 1e3 - m)
        })
        .doc("per frame, beyond model_us; null for cpu")
        .shown("= copy in + transfer beyond model + copy out", |r| {
            match (stage_us(r, 0), stage_us(r, 1), stage_us(r, 2)) {
                (Some(i), Some(t), Some(o)) => {
                    format!("{i:.0} + {:.0} + {o:.0}", t - model_us(r).unwrap_or(0.0))
                }
                _ => "-".into(),
            }
        })
        .kept("copy_in_us", |r| stage_us(r, 0))
        .doc("the frame into DMA memory, typical frame; null for cpu")
        .kept("transfer_us", |r| stage_us(r, 1))
        .doc("both engines and the emulated core, typical frame; null for cpu")
        .kept("copy_out_us", |r| stage_us(r, 2))
        .doc("the mask out of DMA memory, typical frame; null for cpu")
        .fixed("CPU us/frame", "cpu_us", 0, move |r| tally(r).cpu_us())
        .doc("mean host CPU per frame (driver or computing thread)")
        .checked(
            "verified",
            "verified",
            "bool: every mask equal to the pixel-by-pixel definition",
            |s| s.verified,
        )
}

/// What was measured.
fn heading(cfg: &Config) -> String {
    on_board(
        format!(
            "{} frames of {}x{}, coprocessor on two DMA engines at 100 MHz x 1 B \
             (the fabric's bound: {:.1} frames/s) vs the software implementation",
            cfg.frames,
            cfg.width,
            cfg.height,
            bound(cfg)
        ),
        cfg.memory,
    )
}

/// Frames per second the modelled fabric allows.
fn bound(cfg: &Config) -> f64 {
    100e6 / (cfg.width * cfg.height) as f64
}

/// Frames per second on the coprocessor against the fabric's bound (frame
/// and background side by side, one engine each) and against software;
/// every row's masks verified.
fn findings(cfg: &Config, rows: &[Row]) -> Findings {
    let bound = bound(cfg);
    let get = |d: &str| rows.iter().find(|r| r.point.series == d);
    let fabric = get("fabric").map(|f| {
        let fps = 1e3 / frame_ms(f);
        format!(
            "the coprocessor processes {fps:.1} frames/s of {}x{} ({:.1} % of the {bound:.1} \
             frames/s the modelled fabric allows)",
            cfg.width,
            cfg.height,
            100.0 * fps / bound
        )
    });
    let cpu = get("cpu").map(|c| format!("software on this CPU {:.1} frames/s", 1e3 / frame_ms(c)));
    let targets = rows.iter().map(|r| {
        Target::new(
            format!(
                "{} masks equal to the pixel-by-pixel definition",
                r.point.series
            ),
            format!("{} frames checked", r.rounds()),
            r.every(|s| s.verified),
        )
    });
    // Two rows (fabric, CPU): the table says it; a plot would not.
    Findings {
        clauses: [fabric, cpu].into_iter().flatten().collect(),
        targets: targets.collect(),
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_verifies_every_frame_and_is_consistent() {
        let t0 = std::time::Instant::now();
        let mut cfg = Config::at(&Setup::TINY);
        let progress = &mut |_: &str| {};
        // Measured before its video was made: an error, not a panic.
        let fabric = Point {
            series: "fabric",
            at: Frame {
                width: 40,
                height: 30,
            },
        };
        assert!(measure(&cfg, &fabric).is_err());
        prepare(&mut cfg, progress).unwrap();
        let rows = EXPERIMENT.rows(&cfg, progress).unwrap();
        let elapsed = t0.elapsed().as_secs_f64();
        assert_eq!(rows.len(), 2);
        let rep = EXPERIMENT.report(&cfg, &rows);
        for (r, j) in rows.iter().zip(rep.json["rows"].as_array().unwrap()) {
            assert_eq!(j["verified"], true, "{j}");
            assert_eq!(j["frames"], 6, "{j}");
            // The frames took no longer than the test's own clock saw, and the
            // median frame no longer than all of them.
            let seconds = j["seconds"].as_f64().unwrap();
            assert!(seconds <= elapsed, "{j}");
            assert!(j["frame_ms"].as_f64().unwrap() * 1e-3 <= seconds, "{j}");
            assert!(
                j["frame_ms_p25"].as_f64() <= j["frame_ms_p75"].as_f64(),
                "{j}"
            );
            assert!(j["cpu_us"].as_f64().unwrap() > 0.0, "{j}");
            assert_eq!(r.rounds(), 6);
        }
        let (f, c) = (&rep.json["rows"][0], &rep.json["rows"][1]);
        assert_eq!(
            (&f["device"], &c["device"]),
            (&"fabric".into(), &"cpu".into())
        );
        assert!(f["model_us"].is_number() && c["model_us"].is_null());
        // The fabric cannot beat its clock: two 1200-byte streams side by side at
        // 100 MB/s take 12 us a frame.
        assert!(
            f["frame_ms"].as_f64().unwrap() >= 1200.0 / 100e6 * 1e3,
            "{f}"
        );
        // The stages are parts of the frame: the transfer at least the model.
        let stage = |k: &str| f[k].as_f64().unwrap();
        assert!(
            stage("copy_in_us") >= 0.0 && stage("copy_out_us") >= 0.0,
            "{f}"
        );
        assert!(stage("transfer_us") >= stage("model_us"), "{f}");
        assert!(c["copy_in_us"].is_null() && c["transfer_us"].is_null());
        assert_eq!(rep.targets.len(), 2);
        assert!(rep.targets.iter().all(|t| t.met), "{:?}", rep.targets);
        // Every frame was used: one round more has no frame to measure.
        assert!(measure(&cfg, &fabric).is_err());
        // A frame of the wrong size is refused.
        let p = Params::new(8, 8, 25, true).unwrap();
        let mut hw = BgSubCoprocessor::new(p, Clock::Unlimited, Completion::Poll).unwrap();
        assert!(hw.process(&[0u8; 63], &mut [0u8; 64]).is_err());
        hw.process(&[5u8; 64], &mut [1u8; 64]).unwrap();
    }
}
