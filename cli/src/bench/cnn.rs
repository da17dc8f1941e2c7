//! `dmaflow bench cnn`: paper 002's Table I. A five-layer int16 CNN (the
//! RoShamBo network's layer sizes, [`dmaflow::dsp::conv::roshambo`]) run layer
//! by layer on a convolution coprocessor in the fabric ([`ConvCore`]): each
//! layer's parameters and input maps go out in one transfer and its output
//! maps come back (single buffer, `Unique`), in each completion mode, every
//! frame's output checked against the software reference.

use std::cell::RefCell;
use std::fmt::{self, Display};
use std::ops::Range;
use std::time::{Duration, Instant};

use dmaflow::dma::{Completion, Timing};
use dmaflow::dsp::conv::{Layer, from_bytes, input_frame, roshambo};
use dmaflow::gpu::{Gpu, GpuEngine, HostBuf, HostKind, Kernels};
use dmaflow::platform::MemoryModel;
use dmaflow::platform::cpu::process_cpu_time;
use dmaflow::sim::conv::{NULLHOP_MACS_PER_CYCLE, NULLHOP_MHZ};
use dmaflow::sim::{Clock, ConvCore};

use super::columns::Columns;
use super::conditions::{Conditions, USER_X86};
use super::dma::{proxy, rig};
use super::error::Error;
use super::frame::{Bench, Findings, POOLED, Plot, Point, Row};
use super::harness::{OnGpu, Setup, on_board};
use super::meter::{Cost, Meter};
use super::plot::XAxis;

/// What the experiment's GPU form reports without a GPU.
pub const NO_GPU: &str = "no CUDA device: skipped";

/// The fabric clock: the Zynq HP port (150 MHz x 8 B).
pub const FABRIC: Clock = dmaflow::sim::Profile::ZYNQ7000.port;

/// The completion modes a GPU is waited on with (a GPU's driver is its own:
/// no proxy).
const GPU_MODES: [Completion; 3] = [Completion::Poll, Completion::Yield, Completion::Irq];

/// `dmaflow bench cnn`.
pub static EXPERIMENT: Bench<Config, LayerAt, Sample> = Bench {
    name: "cnn",
    on_gpu: Some(OnGpu::Itself),
    emulator_only: "it drives the convolution coprocessor, which the loopback design lacks",
    question: "A five-layer int16 CNN run layer by layer on a convolution coprocessor (paper \
               002).",
    conditions: Conditions {
        timed: "each layer's transfers and each frame from the first send to the last \
                answer",
        against: "the completion modes, and the modelled link",
        model: "model_us: the link and the core's compute, modelled as NullHop's 128 MACs \
                per cycle at an assumed 100 MHz; TX us/byte restates 1 / the link rate",
        paper: USER_X86,
    },
    prepare,
    in_round: Some(measure),
    parts: Some(layers),
    beside: "skipped (why nothing was measured: --device cuda without a GPU)",
    plots: &[PLOT],
    tables: Some(tables),
    heading,
    figures: POOLED,
    findings,
    ..Bench::new(Config::at, rounds, points, one_alone, columns)
};

/// What to measure.
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
    /// The network, its reference outputs and the device, made before the
    /// first round.
    net: Option<Net>,
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
            net: None,
        }
    }
}

/// The network as a run measures it.
struct Net {
    /// The layers.
    layers: Vec<Layer>,
    /// Every frame's output from the software reference.
    reference: Vec<Vec<i16>>,
    /// Each layer's point: its bytes each way and modelled time.
    at: Vec<LayerAt>,
    /// The largest packet or answer, bytes.
    largest: usize,
    /// The CUDA device, where one is asked for and present; kept from round
    /// to round.
    gpu: Option<RefCell<OnCuda>>,
}

/// A CUDA device with its engine and pinned buffers.
struct OnCuda {
    /// `cuda:N NAME`.
    name: String,
    engine: GpuEngine,
    tx: HostBuf,
    rx: HostBuf,
    /// Kept open while the engine and buffers live (dropped after them).
    _gpu: Gpu,
}

/// A layer of the network: the parameter of a row. Layer 0 stands for the
/// whole network (a frame through every layer), before it is split into
/// its layers' rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerAt {
    /// Layer number, from 1 (0: every layer).
    pub layer: usize,
    /// Bytes sent (header, parameters, input maps).
    pub tx_bytes: usize,
    /// Bytes received (output maps).
    pub rx_bytes: usize,
    /// What the modelled device needs for the layer (MM2S start-up, packet
    /// in, NullHop's compute, maps out, S2MM latency), in microseconds;
    /// `None` on a GPU (real hardware).
    pub model_us: Option<f64>,
}

impl Display for LayerAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.layer {
            0 => write!(f, "every layer"),
            n => write!(f, "layer {n}"),
        }
    }
}

/// One round of one completion mode: its share of the frames.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// The coprocessor: `fabric`, or `cuda:N NAME`.
    pub device: String,
    /// Per layer, per frame (one layer once the sample is split).
    pub layers: Vec<Times>,
    /// Per frame: whole frames' times (all layers, packing included), ms.
    pub frame_ms: Vec<f64>,
    /// Every frame's output equal to the software reference.
    pub verified: bool,
}

/// One layer's figures, one per frame.
#[derive(Debug, Clone, Default)]
pub struct Times {
    /// TX time (programming to MM2S completion) per byte, us.
    pub tx: Vec<f64>,
    /// RX time (MM2S to S2MM completion, compute included) per byte, us.
    pub rx: Vec<f64>,
    /// The layer's wall time, us.
    pub wall: Vec<f64>,
    /// How much longer this host computed the layer than the modelled
    /// core, us.
    pub emulator: Vec<f64>,
    /// Driver-side host CPU of the layer's transfer, us.
    pub cpu: Vec<f64>,
}

/// A split sample's one layer (none before it is split).
const NO_LAYER: &Times = &Times {
    tx: Vec::new(),
    rx: Vec::new(),
    wall: Vec::new(),
    emulator: Vec::new(),
    cpu: Vec::new(),
};

impl Sample {
    /// The layer of a sample split into its layers.
    fn layer(&self) -> &Times {
        self.layers.first().unwrap_or(NO_LAYER)
    }
}

fn tx(s: &Sample) -> &[f64] {
    &s.layer().tx
}

fn rx(s: &Sample) -> &[f64] {
    &s.layer().rx
}

fn wall(s: &Sample) -> &[f64] {
    &s.layer().wall
}

fn emulator(s: &Sample) -> &[f64] {
    &s.layer().emulator
}

fn cpu(s: &Sample) -> &[f64] {
    &s.layer().cpu
}

fn frame_ms(s: &Sample) -> &[f64] {
    &s.frame_ms
}

/// A layer's row under one completion mode.
type LayerRow = Row<LayerAt, Sample>;

/// The rounds: at most one a frame.
fn rounds(cfg: &Config) -> usize {
    cfg.rounds.clamp(1, cfg.frames.max(1))
}

/// The network, its reference outputs, and the device it runs on.
fn prepare(cfg: &mut Config, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
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
    let (mut at, mut h, mut w) = (Vec::new(), 64, 64);
    for (l, layer) in net.iter().enumerate() {
        let shape = layer.shape(h, w);
        let (tx, rx) = (shape.packet_parts()[2].end, shape.out_bytes());
        let model_us = cfg.device.is_none().then(|| {
            (FABRIC.mm2s_start(false)
                + FABRIC.duration(tx)
                + ConvCore::compute_time(&shape, NULLHOP_MACS_PER_CYCLE, NULLHOP_MHZ)
                + FABRIC.duration(rx)
                + FABRIC.cycles(dmaflow::sim::S2MM_WRITE_CYCLES))
            .as_secs_f64()
                * 1e6
        });
        at.push(LayerAt {
            layer: l + 1,
            tx_bytes: tx,
            rx_bytes: rx,
            model_us,
        });
        (h, w) = shape.out_dims();
    }
    let largest = at.iter().map(|a| a.tx_bytes.max(a.rx_bytes)).max();
    let largest = largest.unwrap_or(0);
    let gpu = match cfg.device {
        Some(n) if dmaflow::gpu::driver::count() > 0 => Some(RefCell::new(cuda(n, largest)?)),
        _ => None,
    };
    cfg.net = Some(Net {
        layers: net,
        reference,
        at,
        largest,
        gpu,
    });
    Ok(())
}

/// CUDA device `n` with the kernels, an engine and pinned buffers for
/// packets of up to `largest` bytes.
fn cuda(n: usize, largest: usize) -> Result<OnCuda, Error> {
    let gpu = Gpu::open(n)?;
    let name = format!("cuda:{n} {}", gpu.info()?.name);
    let kernels = std::sync::Arc::new(Kernels::load(&gpu)?);
    Ok(OnCuda {
        name,
        engine: GpuEngine::new(&gpu, largest, Some(kernels), Duration::from_secs(10))?,
        tx: HostBuf::new(&gpu, HostKind::Pinned, largest)?,
        rx: HostBuf::new(&gpu, HostKind::Pinned, largest)?,
        _gpu: gpu,
    })
}

/// Every completion mode on the device asked for: those of the fabric's
/// engine, or a GPU's; none where a GPU is asked for and none is present.
fn points(cfg: &Config) -> Vec<Point<LayerAt>> {
    let modes: &[Completion] = match cfg.net.as_ref().map(|n| n.gpu.is_some()) {
        None => &[],
        Some(true) => &GPU_MODES,
        Some(false) if cfg.device.is_some() => &[],
        Some(false) => &Completion::ALL,
    };
    (modes.iter())
        .map(|c| Point {
            series: c.name(),
            at: LayerAt::default(),
        })
        .collect()
}

/// A round is always given: the frames are shared out by round.
fn one_alone(_: &Config, p: &Point<LayerAt>) -> Result<Sample, Error> {
    Err(Error::peer("cnn")(format!(
        "{}: measured with its round's share of the frames",
        p.series
    )))
}

/// One completion mode's share of the frames in `round`.
fn measure(cfg: &Config, p: &Point<LayerAt>, round: usize) -> Result<Sample, Error> {
    let (Some(net), Some(&c)) = (
        cfg.net.as_ref(),
        Completion::ALL.iter().find(|c| c.name() == p.series),
    ) else {
        return Err(Error::peer("cnn")(format!(
            "{}: no network built or no such completion mode",
            p.series
        )));
    };
    let n = rounds(cfg);
    let share = round * cfg.frames / n..(round + 1) * cfg.frames / n;
    let mut s = Sample {
        layers: vec![Times::default(); net.layers.len()],
        verified: true,
        ..Sample::default()
    };
    if let Some(gpu) = &net.gpu {
        let gpu = &mut *gpu.borrow_mut();
        s.device = gpu.name.clone();
        let none = || Duration::ZERO;
        frames(&mut s, net, share, none, |packet, _| {
            let (w0, c0) = (Instant::now(), process_cpu_time());
            gpu.tx.as_mut_slice()[..packet.len()].copy_from_slice(&packet);
            let got = gpu
                .engine
                .layer(&mut gpu.tx, packet.len(), &mut gpu.rx, c)?;
            let out = gpu.rx.as_slice()[..got].to_vec();
            let cost = Cost {
                wall: w0.elapsed(),
                cpu: process_cpu_time().saturating_sub(c0),
                delivery: Duration::ZERO,
            };
            Ok((out, gpu.engine.last_timing(), cost))
        })?;
        return Ok(s);
    }
    s.device = "fabric".into();
    let core = Box::new(ConvCore::nullhop());
    let (mut rig, _placed) = rig(8 * net.largest, FABRIC, cfg.memory, core)?;
    let proxy = match c {
        Completion::Proxy => Some(proxy(vec![rig.engines.remove(0)])?),
        _ => None,
    };
    let mut out = vec![0u8; net.largest];
    let overrun = || rig.fabric.compute_overrun();
    // The proxy driver's transfer, or the engine's on this thread.
    frames(&mut s, net, share, overrun, |packet, rx| {
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
    })?;
    Ok(s)
}

/// Runs the frames `which` through the network with `send` (one layer packet
/// to its answer, timing and cost) into `s`, checked against the reference.
fn frames(
    s: &mut Sample,
    net: &Net,
    which: Range<usize>,
    overrun: impl Fn() -> Duration,
    mut send: impl FnMut(Vec<u8>, usize) -> Result<(Vec<u8>, Timing, Cost), Error>,
) -> Result<(), Error> {
    for f in which {
        let t0 = Instant::now();
        let (mut maps, mut h, mut w) = (input_frame(f as u64), 64, 64);
        for (l, layer) in net.layers.iter().enumerate() {
            let packet = layer.encode(&maps, h, w);
            let shape = layer.shape(h, w);
            let (tx, rx) = (packet.len(), shape.out_bytes());
            let before = overrun();
            let (answer, t, c) = send(packet, rx)?;
            let times = &mut s.layers[l];
            times.tx.push(t.tx.as_secs_f64() * 1e6 / tx as f64);
            times.rx.push(t.rx.as_secs_f64() * 1e6 / rx as f64);
            times.wall.push(c.wall.as_secs_f64() * 1e6);
            let over = overrun().saturating_sub(before);
            times.emulator.push(over.as_secs_f64() * 1e6);
            times.cpu.push(c.cpu.as_secs_f64() * 1e6);
            maps = from_bytes(&answer);
            (h, w) = shape.out_dims();
        }
        s.frame_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        s.verified &= net.reference.get(f) == Some(&maps);
    }
    Ok(())
}

/// A mode's sample split into its layers: a row each.
fn layers(cfg: &Config, _: &Point<LayerAt>, s: &Sample) -> Vec<(LayerAt, Sample)> {
    let at = cfg.net.as_ref().map_or(&[][..], |n| &n.at[..]);
    (at.iter().zip(&s.layers))
        .map(|(at, times)| {
            let one = Sample {
                layers: vec![times.clone()],
                ..s.clone()
            };
            (at.clone(), one)
        })
        .collect()
}

/// What was measured, one line.
fn heading(cfg: &Config) -> String {
    on_board(
        format!(
            "{} frames per completion mode through {} int16 convolution layers on {}, \
             layer by layer, each round every mode's share of the frames",
            cfg.frames,
            cfg.layers,
            match cfg.device {
                None => "a coprocessor in the fabric (HP port clock)".to_string(),
                Some(n) => format!("CUDA device {n} (a kernel per layer, pinned memory)"),
            },
        ),
        cfg.memory,
    )
}

/// The rows of each completion mode, in the table's order.
fn modes(rows: &[Row<LayerAt, Sample>]) -> Vec<Vec<&Row<LayerAt, Sample>>> {
    let mut modes: Vec<Vec<&Row<LayerAt, Sample>>> = Vec::new();
    for r in rows {
        match modes
            .iter_mut()
            .find(|m| m[0].point.series == r.point.series)
        {
            Some(m) => m.push(r),
            None => modes.push(vec![r]),
        }
    }
    modes
}

/// Table I per completion mode (per-byte costs averaged over the layers,
/// weighted by bytes), then every layer.
fn tables(_: &Config, rows: &[Row<LayerAt, Sample>]) -> String {
    let Some(first) = rows.first().and_then(|r| r.samples.first()) else {
        return format!("{NO_GPU}\n");
    };
    type Mode<'r> = Vec<&'r Row<LayerAt, Sample>>;
    let per_byte = |rs: &Mode, values: fn(&Sample) -> &[f64], bytes: fn(&LayerAt) -> usize| {
        let (us, n) = (rs.iter())
            .map(|r| (r.pooled_typical(values), bytes(&r.point.at)))
            .fold((0.0, 0), |(us, b), (x, n)| (us + x * n as f64, b + n));
        format!("{:.5}", us / n as f64)
    };
    let table_one = Columns::new()
        .shown("completion", |rs: &Mode| rs[0].point.series.to_string())
        .shown("TX us/byte", move |rs| per_byte(rs, tx, |a| a.tx_bytes))
        .shown("RX us/byte", move |rs| per_byte(rs, rx, |a| a.rx_bytes))
        .shown("frame ms", |rs| {
            format!("{:.2}", rs[0].pooled_typical(frame_ms))
        })
        .shown("IQR", |rs| {
            let s = rs[0].pooled(frame_ms);
            format!("{:.2}..{:.2}", s.p25, s.p75)
        })
        .shown("verified", |rs| {
            let ok = rs.iter().all(|r| r.every(|s| s.verified));
            if ok { "yes" } else { "NO" }.to_string()
        });
    let device = match first.device.as_str() {
        "fabric" => String::new(),
        d => format!("device: {d} (TX: H2D; RX: the layer's kernel and D2H)\n"),
    };
    format!(
        "{device}Table I: one frame, TX and RX time per byte (single buffer, unique)\n{}\n\
         per layer\n{}",
        table_one.table(&modes(rows)),
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
fn columns() -> Columns<'static, Row<LayerAt, Sample>> {
    type R = Row<LayerAt, Sample>;
    let model_us = |r: &R| r.point.at.model_us;
    let emulator_us = |r: &R| r.point.at.model_us.map(|_| r.pooled_typical(emulator));
    let overhead_us = |r: &R| r.point.at.model_us.map(|m| r.pooled_typical(wall) - m);
    Columns::new()
        .kept("device", |r: &R| {
            r.samples.first().map(|s| s.device.clone())
        })
        .doc("the coprocessor: fabric, or cuda:N NAME")
        .series(
            "completion",
            "completion",
            "poll, yield, irq, adaptive or proxy",
        )
        .plain("layer", "layer", |r| r.point.at.layer)
        .doc("1..5")
        .plain("TX bytes", "tx_bytes", |r| r.point.at.tx_bytes)
        .doc("bytes sent: header, parameters, input maps")
        .plain("RX bytes", "rx_bytes", |r| r.point.at.rx_bytes)
        .doc("bytes received: output maps")
        .pooled(
            "TX us/byte",
            "tx_us_per_byte",
            "programming to MM2S completion per byte, over the frames",
            5,
            tx,
        )
        .pooled(
            "RX us/byte",
            "rx_us_per_byte",
            "MM2S to S2MM completion (compute included) per byte, over the frames",
            5,
            rx,
        )
        .pooled_kept(
            "frame_ms",
            "frame_ms_spread",
            "a whole frame (every layer, packing included), ms",
            frame_ms,
        )
        .kept("verified", |r| r.every(|s| s.verified))
        .doc("every frame's output equal to the software reference")
        .pooled(
            "layer us",
            "layer_us",
            "the layer's transfer, wall",
            1,
            wall,
        )
        .pooled_spread("IQR", "layer_us_spread", "the layer's transfer", 1, wall)
        .optional("model us", "model_us", 1, model_us)
        .doc("the link and NullHop-modelled compute (null on a GPU)")
        // Measured minus modelled, of it the emulator's compute overrun, and
        // what is left: the software's part (driver, copies, waking).
        .optional("overhead us", "overhead_us", 1, overhead_us)
        .doc("layer_us - model_us")
        .optional(
            "of it emulator compute",
            "emulator_compute_us",
            1,
            emulator_us,
        )
        .doc("of the overhead: this host computing slower than the modelled core")
        .optional("software us", "software_us", 1, move |r| {
            Some(overhead_us(r)? - emulator_us(r)?)
        })
        .doc("of the overhead: the driver, copies and waking")
        .fixed("CPU us", "cpu_us", 1, |r| r.pooled_mean(cpu).0)
        .doc("mean driver-side host CPU per layer transfer")
}

/// One sentence: a whole frame's time in each completion mode; without a
/// GPU, that it was skipped.
fn findings(cfg: &Config, rows: &[Row<LayerAt, Sample>]) -> Findings {
    let Some(first) = rows.first().and_then(|r| r.samples.first()) else {
        return Findings {
            clauses: vec![NO_GPU.into()],
            kept: vec![("skipped", NO_GPU.into())],
            ..Findings::default()
        };
    };
    let on = match first.device.as_str() {
        "fabric" => "the coprocessor".to_string(),
        d => format!("{d}'s kernel"),
    };
    let modes = modes(rows);
    let each = |say: &dyn Fn(&[&LayerRow]) -> String| {
        modes
            .iter()
            .map(|rs| say(rs))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let verified = rows.iter().all(|r| r.every(|s| s.verified));
    Findings {
        clauses: vec![format!(
            "one frame through {} convolution layers on {on} takes {} per mode, \
             costing the host {} of driver CPU; outputs {}equal to the software reference",
            cfg.layers,
            each(&|rs| format!(
                "{} {:.2} ms",
                rs[0].point.series,
                rs[0].pooled_typical(frame_ms)
            )),
            each(&|rs| {
                let cpu: f64 = rs.iter().map(|r| r.pooled_mean(cpu).0).sum();
                format!("{} {cpu:.0} us", rs[0].point.series)
            }),
            if verified { "" } else { "NOT " }
        )],
        ..Findings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_matches_the_reference_in_every_mode() {
        let mut cfg = Config::at(&Setup::TINY);
        prepare(&mut cfg, &mut |_| {}).unwrap();
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        // Five completion modes (poll, yield, irq, adaptive, proxy), two rows each.
        assert_eq!(rows.len(), 5 * 2);
        for r in &rows {
            assert!(r.every(|s| s.verified), "{r:?}");
            // Every frame of every round, each round its own share.
            assert_eq!(r.pooled(tx).n, cfg.frames, "{r:?}");
            let (t, x) = (r.pooled_typical(tx), r.pooled_typical(rx));
            assert!(t > 0.0 && x > 0.0, "{r:?}");
            // TX cannot beat the HP port: 1200 MB/s is 0.00083 us per byte.
            assert!(t >= 1.0 / 1200.0, "{r:?}");
        }
        // Layer 1 of the RoShamBo sizes: header, 16x5x5 weights, 16 biases, 64x64 input.
        assert_eq!(rows[0].point.at.tx_bytes, 2 * (8 + 400 + 16 + 4096));
        assert_eq!(rows[0].point.at.rx_bytes, 2 * 16 * 32 * 32);
        assert_eq!((rows[0].point.at.layer, rows[1].point.at.layer), (1, 2));
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert!(rep.text.contains("Table I") && rep.text.contains("proxy"));
        assert_eq!(rep.json["rows"][1]["layer_us_spread"]["n"], cfg.frames);
        assert!(rep.json.get("skipped").is_none());
        // A GPU asked for where there is none: no rows, and the report says so.
        if dmaflow::gpu::driver::count() == 0 {
            let mut cfg = Config::at(&Setup::TINY);
            cfg.device = Some(0);
            prepare(&mut cfg, &mut |_| {}).unwrap();
            let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
            let rep = EXPERIMENT.report(&cfg, &rows);
            assert!(
                rows.is_empty() && rep.text.starts_with(NO_GPU),
                "{}",
                rep.text
            );
            assert_eq!(rep.json["skipped"], NO_GPU);
            assert!(rep.heading.contains("nothing measured"), "{}", rep.heading);
        }
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
