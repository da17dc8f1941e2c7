//! `dmaflow bench cnn`: paper 002's Table I. A five-layer int16 CNN (the
//! RoShamBo network's layer sizes, [`dmaflow::dsp::conv::roshambo`]) run layer
//! by layer on a convolution coprocessor in the fabric ([`ConvCore`]): each
//! layer's parameters and input maps go out in one transfer and its output
//! maps come back (single buffer, `Unique`), in each completion mode, every
//! frame's output checked against the software reference.

use std::ops::Range;
use std::time::{Duration, Instant};

use dmaflow::dma::{Completion, Timing};
use dmaflow::dsp::conv::{Layer, from_bytes, input_frame, roshambo};
use dmaflow::platform::MemoryModel;
use dmaflow::sim::conv::{NULLHOP_MACS_PER_CYCLE, NULLHOP_MHZ};
use dmaflow::sim::{Clock, ConvCore};

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::dma::{proxy, rig};
use super::error::Error;
use super::frame::Plot;
use super::harness::{OnBoard, OnGpu, Progress, Setup, Spec, median, on_board};
use super::meter::{Cost, Meter, Tally};
use super::plot::XAxis;
use super::report::{Report, sentence};
use super::spread::{Spread, in_turns};

/// What the experiment's GPU form reports without a GPU.
pub const NO_GPU: &str = "no CUDA device: skipped";

/// The fabric clock: the Zynq HP port (150 MHz x 8 B).
pub const FABRIC: Clock = dmaflow::sim::Profile::ZYNQ7000.port;

/// `dmaflow bench cnn`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "cnn",
    on_gpu: Some(OnGpu::Itself),
    board: OnBoard::EmulatorOnly(
        "it drives the convolution coprocessor, which the loopback design lacks",
    ),
    question: "A five-layer int16 CNN run layer by layer on a convolution coprocessor (paper \
               002).",
    keys: "completion (poll|yield|irq|proxy), layer (1..5), tx_bytes,\n\
          rx_bytes, tx_us_per_byte, rx_us_per_byte (medians over frames),\n\
          frame_ms (median frame), frame_ms_spread, verified (bool),\n\
          layer_us (median layer transfer), layer_us_spread, model_us (link and NullHop-modelled compute),\n\
          overhead_us, emulator_compute_us (of the overhead: this host\n\
          computing slower than the modelled core), software_us, cpu_us",
    conditions: Conditions {
        timed: "each layer's transfers and each frame from the first send to the last \
                answer",
        against: "the completion modes, and the modelled link",
        model: "model_us: the link and the core's compute, modelled as NullHop's 128 MACs \
                per cycle at an assumed 100 MHz; TX us/byte restates 1 / the link rate",
        paper: USER_X86,
    },
    ..Spec::new(Config::at, run, report)
};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Frames per completion mode.
    pub frames: usize,
    /// Rounds the frames are split into: in each, every mode runs its share
    /// of them in turn, the order reversed every other round.
    pub rounds: usize,
    /// Use only the first this many layers (5 = the whole network).
    pub layers: usize,
    /// The board's memory (a non-coherent one runs with explicit maintenance).
    pub memory: MemoryModel,
    /// `None`: the coprocessor in the emulated fabric; `Some(n)`: CUDA device n,
    /// whose kernel computes each layer where its packet lies in device memory.
    pub device: Option<usize>,
}

impl Config {
    /// The size `setup` asks for, on its board: the full run, or the quick
    /// or tiny one made from it.
    pub fn at(setup: &Setup) -> Self {
        let (frames, rounds, layers) = setup.tier.pick((30, 5, 5), (6, 2, 5), (2, 2, 2));
        Config {
            frames,
            rounds,
            layers,
            memory: setup.memory,
            device: setup.gpu.map(|g| g.0),
        }
    }
}

/// One layer under one completion mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The coprocessor: `fabric`, or `cuda:N NAME`.
    pub device: String,
    /// `poll`, `yield`, `irq` or `proxy`.
    pub completion: &'static str,
    /// Layer number, from 1.
    pub layer: usize,
    /// Bytes sent (header, parameters, input maps).
    pub tx_bytes: usize,
    /// Bytes received (output maps).
    pub rx_bytes: usize,
    /// TX time (programming to MM2S completion) per byte, median of frames.
    pub tx_us_per_byte: f64,
    /// RX time (MM2S to S2MM completion, compute included) per byte, median.
    pub rx_us_per_byte: f64,
    /// Every frame's output equal to the software reference.
    pub verified: bool,
    /// The layer's wall times over the frames, in microseconds.
    pub layer_spread: Spread,
    /// Whole frames' times (all layers, packing included), in milliseconds.
    pub frame_spread: Spread,
    /// What the modelled device needs for the layer (MM2S start-up, packet
    /// in, NullHop's compute, maps out, S2MM latency), in microseconds;
    /// `None` on a GPU (real hardware).
    pub model_us: Option<f64>,
    /// How much longer this host computed the layer than the modelled core,
    /// in microseconds (median of frames); `None` on a GPU.
    pub emulator_us: Option<f64>,
    /// Mean driver-side host CPU per layer transfer, in microseconds.
    pub cpu_us: f64,
}

/// What the frames of one completion mode gave on one device.
struct Measured {
    device: String,
    completion: Completion,
    /// Per layer, per frame: TX us per byte, RX us per byte, wall us,
    /// emulator compute overrun us.
    per_layer: Vec<[Vec<f64>; 4]>,
    /// Per layer: the driver-side CPU of its transfers.
    cost: Vec<Tally>,
    /// Per frame: milliseconds.
    frame_ms: Vec<f64>,
    /// Every output equal to the reference.
    verified: bool,
}

/// Each of `modes` measured by `measure` in turns, `cfg.rounds` rounds, each
/// round a share of the frames (`measure` is given what the mode measured so
/// far, their range and the round); what each mode measured, on `device`.
fn in_rounds(
    cfg: &Config,
    modes: &[Completion],
    device: &str,
    mut measure: impl FnMut(&mut Measured, Range<usize>, usize) -> Result<(), Error>,
) -> Result<Vec<Measured>, Error> {
    let layers = cfg.layers.clamp(1, 5);
    let mut measured: Vec<Measured> = modes
        .iter()
        .map(|&completion| Measured {
            device: device.to_string(),
            completion,
            per_layer: vec![Default::default(); layers],
            cost: vec![Tally::default(); layers],
            frame_ms: Vec::new(),
            verified: true,
        })
        .collect();
    let rounds = cfg.rounds.clamp(1, cfg.frames.max(1));
    in_turns(modes.len(), rounds, |k, round| {
        let share = round * cfg.frames / rounds..(round + 1) * cfg.frames / rounds;
        measure(&mut measured[k], share, round)?;
        Ok::<f64, Error>(0.0)
    })?;
    Ok(measured)
}

/// Runs the frames `which` through the network with `send` (one layer packet
/// to its answer, timing and cost) into `m`, checked against `reference`.
fn frames(
    m: &mut Measured,
    net: &[Layer],
    which: Range<usize>,
    reference: &[Vec<i16>],
    overrun: impl Fn() -> Duration,
    mut send: impl FnMut(Vec<u8>, usize) -> Result<(Vec<u8>, Timing, Cost), Error>,
) -> Result<(), Error> {
    for f in which {
        let t0 = Instant::now();
        let (mut maps, mut h, mut w) = (input_frame(f as u64), 64, 64);
        for (l, layer) in net.iter().enumerate() {
            let packet = layer.encode(&maps, h, w);
            let shape = layer.shape(h, w);
            let (tx, rx) = (packet.len(), shape.out_bytes());
            let before = overrun();
            let (answer, t, c) = send(packet, rx)?;
            let sample = [
                t.tx.as_secs_f64() * 1e6 / tx as f64,
                t.rx.as_secs_f64() * 1e6 / rx as f64,
                c.wall.as_secs_f64() * 1e6,
                overrun().saturating_sub(before).as_secs_f64() * 1e6,
            ];
            for (v, x) in m.per_layer[l].iter_mut().zip(sample) {
                v.push(x);
            }
            m.cost[l].add(c);
            maps = from_bytes(&answer);
            (h, w) = shape.out_dims();
        }
        m.frame_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        m.verified &= maps == reference[f];
    }
    Ok(())
}

/// Runs the network for every completion mode.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let net: Vec<Layer> = roshambo(2017)
        .into_iter()
        .take(cfg.layers.clamp(1, 5))
        .collect();
    progress("cnn software reference");
    let reference: Vec<Vec<i16>> = (0..cfg.frames)
        .map(|f| {
            let (mut maps, mut h, mut w) = (input_frame(f as u64), 64, 64);
            for l in &net {
                (maps, h, w) = l.forward(&maps, h, w);
            }
            maps
        })
        .collect();
    // Layer shapes: bytes each way (a packet ends with its input maps).
    let mut shapes = Vec::new();
    let (mut h, mut w) = (64, 64);
    for l in &net {
        shapes.push(l.shape(h, w));
        (h, w) = shapes[shapes.len() - 1].out_dims();
    }
    let sizes: Vec<(usize, usize)> = shapes
        .iter()
        .map(|s| (s.packet_parts()[2].end, s.out_bytes()))
        .collect();
    let largest = sizes.iter().map(|&(t, r)| t.max(r)).max().unwrap_or(0);
    if let Some(n) = cfg.device {
        let measured = on_gpu(cfg, n, &net, &reference, largest, &mut *progress)?;
        return Ok(rows_of(measured, &sizes, |_| None));
    }
    let measured = in_rounds(cfg, &Completion::ALL, "fabric", |m, frames_now, round| {
        let c = m.completion;
        progress(&format!("cnn {} round {}", c.name(), round + 1));
        let core = Box::new(ConvCore::nullhop());
        let (mut rig, _placed) = rig(8 * largest, FABRIC, cfg.memory, core)?;
        let proxy = match c {
            Completion::Proxy => Some(proxy(vec![rig.engines.remove(0)])?),
            _ => None,
        };
        let mut out = vec![0u8; largest];
        let overrun = || rig.fabric.compute_overrun();
        // The proxy driver's transfer, or the engine's on this thread.
        frames(m, &net, frames_now, &reference, overrun, |packet, rx| {
            let meter = Meter::start(proxy.as_ref());
            let n = match &proxy {
                Some(p) => {
                    let got = p.transfer(packet, rx)?;
                    let cost = meter.stop();
                    return Ok((got, p.last_timing(), cost));
                }
                None => rig.engines[0].write_read(&packet, &mut out[..rx], c)?,
            };
            let cost = meter.stop();
            Ok((out[..n].to_vec(), rig.engines[0].last_timing(), cost))
        })
    })?;
    Ok(rows_of(measured, &sizes, |l| {
        Some(
            (FABRIC.mm2s_start(false)
                + FABRIC.duration(sizes[l].0)
                + ConvCore::compute_time(&shapes[l], NULLHOP_MACS_PER_CYCLE, NULLHOP_MHZ)
                + FABRIC.duration(sizes[l].1)
                + FABRIC.cycles(dmaflow::sim::S2MM_WRITE_CYCLES))
            .as_secs_f64()
                * 1e6,
        )
    }))
}

/// The network on CUDA device `n`, every mode but the proxy (a GPU's driver is
/// its own): each layer's packet copied into pinned memory (standard I/O, as
/// `write_read` copies into a DMA buffer), sent, computed where it lies, and the
/// output maps copied back out. Nothing where there is no device.
fn on_gpu(
    cfg: &Config,
    n: usize,
    net: &[Layer],
    reference: &[Vec<i16>],
    largest: usize,
    progress: Progress,
) -> Result<Vec<Measured>, Error> {
    use dmaflow::gpu::{Gpu, GpuEngine, HostBuf, HostKind, Kernels};
    use dmaflow::platform::cpu::process_cpu_time;
    if dmaflow::gpu::driver::count() == 0 {
        return Ok(Vec::new());
    }
    let gpu = Gpu::open(n)?;
    let device = format!("cuda:{n} {}", gpu.info()?.name);
    let kernels = std::sync::Arc::new(Kernels::load(&gpu)?);
    let mut engine = GpuEngine::new(&gpu, largest, Some(kernels), Duration::from_secs(10))?;
    let mut tx = HostBuf::new(&gpu, HostKind::Pinned, largest)?;
    let mut rx = HostBuf::new(&gpu, HostKind::Pinned, largest)?;
    let modes = [Completion::Poll, Completion::Yield, Completion::Irq];
    in_rounds(cfg, &modes, &device, |m, frames_now, round| {
        let c = m.completion;
        progress(&format!("cnn {device} {} round {}", c.name(), round + 1));
        frames(
            m,
            net,
            frames_now,
            reference,
            || Duration::ZERO,
            |packet, _| {
                let (w0, c0) = (Instant::now(), process_cpu_time());
                tx.as_mut_slice()[..packet.len()].copy_from_slice(&packet);
                let got = engine.layer(&mut tx, packet.len(), &mut rx, c)?;
                let out = rx.as_slice()[..got].to_vec();
                let cost = Cost {
                    wall: w0.elapsed(),
                    cpu: process_cpu_time().saturating_sub(c0),
                    delivery: Duration::ZERO,
                };
                Ok((out, engine.last_timing(), cost))
            },
        )
    })
}

/// The rows of each device's and mode's frames; `model_us` gives a layer's
/// modelled time where there is a model.
fn rows_of(
    measured: Vec<Measured>,
    sizes: &[(usize, usize)],
    model_us: impl Fn(usize) -> Option<f64>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for m in measured {
        let frame_spread = Spread::of(&m.frame_ms);
        for (l, [tx, rx, wall, emulator]) in m.per_layer.iter().enumerate() {
            let model = model_us(l);
            rows.push(Row {
                device: m.device.clone(),
                completion: m.completion.name(),
                layer: l + 1,
                tx_bytes: sizes[l].0,
                rx_bytes: sizes[l].1,
                tx_us_per_byte: median(tx),
                rx_us_per_byte: median(rx),
                verified: m.verified,
                layer_spread: Spread::of(wall),
                frame_spread,
                model_us: model,
                emulator_us: model.map(|_| median(emulator)),
                cpu_us: m.cost[l].cpu_us(),
            });
        }
    }
    rows
}

/// Table I per completion mode (per-byte costs averaged over the layers,
/// weighted by bytes; `modes` holds each mode's layers), then every layer.
fn render(rows: &[Row], modes: &[Vec<&Row>]) -> String {
    let Some(first) = rows.first() else {
        return format!("{NO_GPU}\n");
    };
    let per_byte = |rs: &Vec<&Row>, get: fn(&Row) -> (f64, usize)| {
        let (us, bytes) = rs
            .iter()
            .map(|&r| get(r))
            .fold((0.0, 0), |(us, b), (x, n)| (us + x * n as f64, b + n));
        format!("{:.5}", us / bytes as f64)
    };
    let table_one = Columns::new()
        .shown("completion", |rs: &Vec<&Row>| rs[0].completion.to_string())
        .shown("TX us/byte", move |rs| {
            per_byte(rs, |r| (r.tx_us_per_byte, r.tx_bytes))
        })
        .shown("RX us/byte", move |rs| {
            per_byte(rs, |r| (r.rx_us_per_byte, r.rx_bytes))
        })
        .shown("frame ms", |rs| format!("{:.2}", rs[0].frame_spread.median))
        .shown("IQR", |rs| {
            let s = rs[0].frame_spread;
            format!("{:.2}..{:.2}", s.p25, s.p75)
        })
        .shown("verified", |rs| {
            if rs.iter().all(|r| r.verified) {
                "yes"
            } else {
                "NO"
            }
            .to_string()
        });
    let device = match first.device.as_str() {
        "fabric" => String::new(),
        d => format!("device: {d} (TX: H2D; RX: the layer's kernel and D2H)\n"),
    };
    format!(
        "{device}Table I: one frame, TX and RX time per byte (single buffer, unique)\n{}\n\
         per layer\n{}",
        table_one.table(modes),
        columns().table(rows)
    )
}

/// TX time per byte against the bytes a layer sends, a line per mode.
const PLOT: Plot = Plot {
    title: "CNN layers: TX time per byte (paper 002, Table I)",
    x: "tx_bytes",
    y: "tx_us_per_byte",
    interval: None,
    y_scale: 1.0,
    lines: &["completion"],
    axis: XAxis::Bytes,
    log_y: true,
};

/// The layers' columns.
fn columns<'a>() -> Columns<'a, Row> {
    let overhead_us = |r: &Row| r.model_us.map(|m| r.layer_spread.median - m);
    Columns::new()
        .kept("device", |r: &Row| r.device.clone())
        .plain("completion", "completion", |r| r.completion)
        .plain("layer", "layer", |r| r.layer)
        .plain("TX bytes", "tx_bytes", |r| r.tx_bytes)
        .plain("RX bytes", "rx_bytes", |r| r.rx_bytes)
        .fixed("TX us/byte", "tx_us_per_byte", 5, |r| r.tx_us_per_byte)
        .fixed("RX us/byte", "rx_us_per_byte", 5, |r| r.rx_us_per_byte)
        .kept("frame_ms", |r| r.frame_spread.median)
        .kept("frame_ms_spread", |r| r.frame_spread.json())
        .kept("verified", |r| r.verified)
        .fixed("layer us", "layer_us", 1, |r| r.layer_spread.median)
        .col(
            "IQR",
            "layer_us_spread",
            |r| format!("{:.1}..{:.1}", r.layer_spread.p25, r.layer_spread.p75),
            |r| r.layer_spread.json(),
        )
        .optional("model us", "model_us", 1, |r| r.model_us)
        // Measured minus modelled, of it the emulator's compute overrun, and
        // what is left: the software's part (driver, copies, waking).
        .optional("overhead us", "overhead_us", 1, overhead_us)
        .optional("of it emulator compute", "emulator_compute_us", 1, |r| {
            r.emulator_us
        })
        .optional("software us", "software_us", 1, move |r| {
            Some(overhead_us(r)? - r.emulator_us?)
        })
        .fixed("CPU us", "cpu_us", 1, |r| r.cpu_us)
}

/// One sentence: a whole frame's time in each completion mode.
fn answer(cfg: &Config, rows: &[Row], modes: &[Vec<&Row>]) -> String {
    let on = match rows.first() {
        None => return NO_GPU.to_string(),
        Some(r) if r.device != "fabric" => format!("{}'s kernel", r.device),
        Some(_) => "the coprocessor".to_string(),
    };
    let each = |say: fn(&[&Row]) -> String| modes.iter().map(|rs| say(rs)).collect::<Vec<_>>();
    sentence(&[format!(
        "one frame through {} convolution layers on {on} takes {} per mode, \
         costing the host {} of driver CPU; outputs {}equal to the software reference",
        cfg.layers,
        each(|rs| format!("{} {:.2} ms", rs[0].completion, rs[0].frame_spread.median)).join(", "),
        each(|rs| {
            let cpu: f64 = rs.iter().map(|x| x.cpu_us).sum();
            format!("{} {cpu:.0} us", rs[0].completion)
        })
        .join(", "),
        if rows.iter().all(|r| r.verified) {
            ""
        } else {
            "NOT "
        }
    )])
}

/// The run as a report.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let heading = on_board(
        format!(
            "cnn: {} frames per completion mode through {} int16 convolution layers on {}, \
             layer by layer, in {} rounds (the modes in turns, order reversed every other \
             round); medians over the frames with their interquartile range",
            cfg.frames,
            cfg.layers,
            match cfg.device {
                None => "a coprocessor in the fabric (HP port clock)".to_string(),
                Some(n) => format!("CUDA device {n} (a kernel per layer, pinned memory)"),
            },
            cfg.rounds
        ),
        cfg.memory,
    );
    // Each mode's layers (a mode's first layer stands for it).
    let modes: Vec<Vec<&Row>> = (rows.iter().filter(|m| m.layer == 1))
        .map(|m| {
            rows.iter()
                .filter(|r| r.completion == m.completion)
                .collect()
        })
        .collect();
    let report = Report::of("cnn", heading, &columns(), rows)
        .text(render(rows, &modes))
        .answer(answer(cfg, rows, &modes))
        .drawn(&columns(), &[PLOT]);
    if rows.is_empty() {
        report.kept("skipped", NO_GPU)
    } else {
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_matches_the_reference_in_every_mode() {
        let rows = run(&Config::at(&Setup::TINY), &mut |_| {}).unwrap();
        // Five completion modes (poll, yield, irq, adaptive, proxy), two rows each.
        assert_eq!(rows.len(), 5 * 2);
        for r in &rows {
            assert!(r.verified, "{r:?}");
            assert!(r.tx_us_per_byte > 0.0 && r.rx_us_per_byte > 0.0, "{r:?}");
            // TX cannot beat the HP port: 1200 MB/s is 0.00083 us per byte.
            assert!(r.tx_us_per_byte >= 1.0 / 1200.0, "{r:?}");
        }
        // Layer 1 of the RoShamBo sizes: header, 16x5x5 weights, 16 biases, 64x64 input.
        assert_eq!(rows[0].tx_bytes, 2 * (8 + 400 + 16 + 4096));
        assert_eq!(rows[0].rx_bytes, 2 * 16 * 32 * 32);
        let text = report(&Config::at(&Setup::TINY), &rows).text;
        assert!(text.contains("Table I") && text.contains("proxy"));
        // The core refuses a malformed layer, and computes a well-formed one.
        use dmaflow::sim::StreamProcessor;
        let mut core = ConvCore::new();
        let mut out = vec![Vec::new()];
        core.process(&[&[1, 0, 2]], &mut out);
        assert!(out[0].is_empty());
        let net = roshambo(1);
        let input = input_frame(0);
        let p = net[0].encode(&input, 64, 64);
        core.process(&[&p], &mut out);
        let (expect, _, _) = net[0].forward(&input, 64, 64);
        assert_eq!(from_bytes(&out[0]), expect);
    }
}
