//! `dmaflow bench bgsub`: paper 000's application. Approximate-median background
//! subtraction as a coprocessor in the fabric ([`BgSubCore`]), fed through two
//! AXI DMA engines (frame and background in, new background and mask out, the
//! paper's two channels) at 100 MHz x 1 B, against the software implementation
//! ([`dmaflow::dsp::bgsub`]) on the CPU; every mask is checked frame by frame.
//! The two take turns frame by frame, each frame timed on its own; the
//! fabric's frames are split into copy in, transfer and copy out.

use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params, synthetic_frames};
use dmaflow::platform::MemoryModel;
use dmaflow::rig::BgSubCoprocessor;
use dmaflow::sim::Clock;

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::error::Error;
use super::harness::{OnBoard, OnGpu, Progress, Setup, Spec, Tables, median, on_board};
use super::meter::{Meter, Tally};
use super::report::{Report, Target, sentence};
use super::spread::Spread;

/// The paper's fabric clock: 100 MHz x 1 B.
pub const FABRIC: Clock = dmaflow::sim::BGSUB_FABRIC;

/// `dmaflow bench bgsub`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "bgsub",
    on_gpu: Some(OnGpu::Gpu(Tables::KERNELS)),
    board: OnBoard::EmulatorOnly(
        "it drives the background-subtraction coprocessor, which the loopback design lacks",
    ),
    question: "Background subtraction on a coprocessor behind two DMA engines vs the CPU (paper \
               000).",
    keys: "device (fabric|cpu), width, height, frames, seconds (all frames),\n\
          frame_ms (median), frames_per_s (at the median frame time),\n\
          verified (bool: every mask equal to the pixel-by-pixel\n\
          definition), cpu_us (per frame), model_us and overhead_us (per\n\
          frame; null for cpu)",
    conditions: Conditions {
        timed: "each frame from the call to the mask in the caller's buffer, software and \
                fabric in turns frame by frame",
        against: "the software implementation on this CPU and the modelled fabric's bound",
        model: "model_us (two 100 MB/s streams side by side); the emulated core computes on \
                this host",
        paper: USER_X86,
    },
    ..Spec::new(Config::at, run, report)
};

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
    /// Milliseconds per frame over the frames (the figure is the median:
    /// what the path sustains when the host steals CPU time in bursts).
    pub frame_ms: Spread,
    /// Every mask equal to `dmaflow::dsp::bgsub::definition` (no shared code).
    pub verified: bool,
    /// Mean host CPU per frame, in microseconds (driver or computing thread).
    pub cpu_us: f64,
    /// What the modelled fabric needs per frame (two 100 MB/s streams side by
    /// side, PG021 latencies), in microseconds; none for the CPU.
    pub model_us: Option<f64>,
    /// For the fabric: median microseconds per frame of copy in, transfer
    /// (streams, emulated core and driver) and copy out.
    pub stages_us: Option<(f64, f64, f64)>,
}

/// Runs both devices on the same synthetic video.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let p = Params::new(cfg.width, cfg.height, 25, true).map_err(Error::peer("bgsub"))?;
    let n = p.frame_bytes();
    let video = synthetic_frames(&p, cfg.frames, 7);
    progress("bgsub definition (pixel by pixel)");
    let definition = dmaflow::dsp::bgsub::definition(&p, &video);
    let row = |device, times: &[f64], verified, cost: &Tally, model_us| Row {
        stages_us: None,
        device,
        width: cfg.width,
        height: cfg.height,
        frames: cfg.frames,
        seconds: times.iter().sum(),
        frame_ms: Spread::of(times).scaled(1e3),
        verified,
        cpu_us: cost.cpu_us(),
        model_us,
    };
    // Both devices frame by frame, taking turns (the order swapped every
    // frame), each frame timed on its own: the frames are the repeats.
    progress("bgsub fabric and cpu, frame by frame");
    let mut sw = BackgroundSubtractor::new(p);
    let mut hw = BgSubCoprocessor::on(p, FABRIC, Completion::Poll, cfg.memory)?;
    let _placed = hw.rig().dedicate_core()?;
    let mut expected = vec![0u8; video.len()];
    let mut masks = vec![0u8; video.len()];
    // Per device (the fabric first, then the CPU): each frame's time, costs.
    let mut times: [Vec<f64>; 2] = Default::default();
    let mut costs = [Tally::default(); 2];
    let mut stages: [Vec<f64>; 3] = Default::default();
    let frames = video
        .chunks(n)
        .zip(expected.chunks_mut(n).zip(masks.chunks_mut(n)));
    for (i, (f, (e, m))) in frames.enumerate() {
        for fabric in [i % 2 == 0, i % 2 == 1] {
            let meter = Meter::start(None);
            if fabric {
                hw.process(f, m)?;
            } else {
                sw.process(f, e).map_err(Error::peer("bgsub"))?;
            }
            let c = meter.stop();
            times[usize::from(!fabric)].push(c.wall.as_secs_f64());
            costs[usize::from(!fabric)].add(c);
            if fabric {
                let t = hw.last_times();
                for (v, d) in stages.iter_mut().zip([t.copy_in, t.transfer, t.copy_out]) {
                    v.push(d.as_secs_f64() * 1e6);
                }
            }
        }
    }
    let cpu = row("cpu", &times[1], expected == definition, &costs[1], None);
    let verified = masks == definition && Some(hw.background()) == sw.background();
    // Frame and background stream side by side on two engines.
    let model = FABRIC.two_way(n, false).as_secs_f64() * 1e6;
    let mut fabric = row("fabric", &times[0], verified, &costs[0], Some(model));
    fabric.stages_us = Some((median(&stages[0]), median(&stages[1]), median(&stages[2])));
    Ok(vec![fabric, cpu])
}

/// The rows' columns.
fn columns<'a>() -> Columns<'a, Row> {
    Columns::new()
        .plain("device", "device", |r: &Row| r.device)
        .shown("frame", |r| format!("{}x{}", r.width, r.height))
        .kept("width", |r| r.width)
        .kept("height", |r| r.height)
        .plain("frames", "frames", |r| r.frames)
        .kept("seconds", |r| r.seconds)
        .fixed("frames/s", "frames_per_s", 1, |r| 1e3 / r.frame_ms.median)
        .fixed("median ms/frame", "frame_ms", 3, |r| r.frame_ms.median)
        .shown("IQR ms", |r| {
            format!("{:.3}..{:.3}", r.frame_ms.p25, r.frame_ms.p75)
        })
        .kept("frame_ms_p25", |r| r.frame_ms.p25)
        .kept("frame_ms_p75", |r| r.frame_ms.p75)
        .optional("model us", "model_us", 0, |r| r.model_us)
        .optional("overhead us", "overhead_us", 0, |r| {
            r.model_us.map(|m| r.frame_ms.median * 1e3 - m)
        })
        .shown("= copy in + transfer beyond model + copy out", |r| {
            r.stages_us.map_or("-".into(), |(i, t, o)| {
                format!("{i:.0} + {:.0} + {o:.0}", t - r.model_us.unwrap_or(0.0))
            })
        })
        .kept("copy_in_us", |r| r.stages_us.map(|s| s.0))
        .kept("transfer_us", |r| r.stages_us.map(|s| s.1))
        .kept("copy_out_us", |r| r.stages_us.map(|s| s.2))
        .fixed("CPU us/frame", "cpu_us", 0, |r| r.cpu_us)
        .col(
            "verified",
            "verified",
            |r| if r.verified { "yes" } else { "NO" }.into(),
            |r| r.verified,
        )
}

/// The run as a report: frames per second on the coprocessor against the
/// fabric's bound (frame and background side by side, one engine each) and
/// against software; every row's masks verified.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let bound = 100e6 / (cfg.width * cfg.height) as f64;
    let get = |d: &str| rows.iter().find(|r| r.device == d);
    let fabric = get("fabric").map(|f| {
        format!(
            "the coprocessor processes {:.1} frames/s of {}x{} ({:.1} % of the {bound:.1} frames/s \
             the modelled fabric allows)",
            1e3 / f.frame_ms.median,
            cfg.width,
            cfg.height,
            100.0 * (1e3 / f.frame_ms.median) / bound
        )
    });
    let cpu = get("cpu").map(|c| {
        format!(
            "software on this CPU {:.1} frames/s",
            1e3 / c.frame_ms.median
        )
    });
    let targets = rows.iter().map(|r| {
        Target::new(
            format!("{} masks equal to the pixel-by-pixel definition", r.device),
            format!("{} frames checked", r.frames),
            r.verified,
        )
    });
    let heading = on_board(
        format!(
            "bgsub: {} frames of {}x{}, coprocessor on two DMA engines at 100 MHz x 1 B \
             (the fabric's bound: {bound:.1} frames/s) vs the software implementation",
            cfg.frames, cfg.width, cfg.height
        ),
        cfg.memory,
    );
    // Two rows (fabric, CPU): the table says it; a plot would not.
    Report::of("bgsub", heading, &columns(), rows)
        .answer(sentence(
            &[fabric, cpu].into_iter().flatten().collect::<Vec<_>>(),
        ))
        .targets(targets.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_verifies_every_frame_and_is_consistent() {
        let t0 = std::time::Instant::now();
        let rows = run(&Config::at(&Setup::TINY), &mut |_| {}).unwrap();
        let elapsed = t0.elapsed().as_secs_f64();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert!(r.verified, "{r:?}");
            // The frames took no longer than the test's own clock saw, and the
            // median frame no longer than all of them.
            assert!(r.seconds <= elapsed, "{r:?}");
            assert!(r.frame_ms.median * 1e-3 <= r.seconds, "{r:?}");
            assert!(r.cpu_us > 0.0, "{r:?}");
        }
        assert!(rows[0].model_us.is_some() && rows[1].model_us.is_none());
        // The fabric cannot beat its clock: two 1200-byte streams side by side at
        // 100 MB/s take 12 us a frame.
        let fabric = &rows[0];
        assert!(fabric.frame_ms.median >= 1200.0 / 100e6 * 1e3, "{fabric:?}");
        assert_eq!(
            report(&Config::at(&Setup::TINY), &rows).json["rows"][0]["device"],
            "fabric"
        );
        // The stages are parts of the frame: the transfer at least the model.
        let (i, t, o) = fabric.stages_us.unwrap();
        assert!(
            i >= 0.0 && o >= 0.0 && t >= fabric.model_us.unwrap(),
            "{fabric:?}"
        );
        assert!(rows[1].stages_us.is_none());
        // A frame of the wrong size is refused.
        let p = Params::new(8, 8, 25, true).unwrap();
        let mut hw = BgSubCoprocessor::new(p, Clock::Unlimited, Completion::Poll).unwrap();
        assert!(hw.process(&[0u8; 63], &mut [0u8; 64]).is_err());
        hw.process(&[5u8; 64], &mut [1u8; 64]).unwrap();
    }
}
