//! `dmaflow bgsub`'s file tool: a file of 8-bit frames in, a file of masks out,
//! on the emulated coprocessor (a process network whose middle node is the
//! coprocessor, frames and masks in queues in its DMA memory) or in software
//! (identical bytes), the output appearing only on success.

use std::sync::{Arc, Mutex};

use dmaflow::accel::bgsub;
use dmaflow::accel::stage::StageStats;
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params};
use dmaflow::sim::BgSubCore;

use super::{Done, End, FileError, Unit};

/// Where `dmaflow bgsub` runs the algorithm (without `Cpu`, the DMA device
/// of `dmaflow bench`).
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

impl Device {
    /// `sim`, `cpu` (where `cpu` is allowed), `cuda` (device 0) or `cuda:N`.
    pub fn parse(s: &str, cpu: bool) -> Result<Self, String> {
        match s {
            "sim" => Ok(Device::Sim),
            "cpu" if cpu => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    let cpu = if cpu { "cpu, " } else { "" };
                    format!("{s:?} is not a device: sim, {cpu}cuda or cuda:N")
                }),
        }
    }
}

/// A background subtractor on the CPU or a GPU: a frame to its mask.
type Subtract = Box<dyn FnMut(&[u8], &mut [u8]) -> Result<(), FileError> + Send>;

/// Frames from `source` to masks at `sink` as one process network: source ->
/// the coprocessor node (frames and masks in queues in its DMA memory, read
/// and written there by the file ends) or the software as a node -> sink.
/// Either end is a file or a network edge; a file output is renamed into
/// place only on success, and a file that ends inside a frame is named.
pub fn bgsub(params: Params, ends: (End, End), device: Device) -> Result<Done, FileError> {
    let n = params.frame_bytes();
    let chunk = n * (64usize << 10).div_ceil(n);
    let cap = 2 * chunk;
    let sim = match device {
        Device::Sim => {
            let ddr = (4 * cap + 2 * n + (4 << 20)).next_power_of_two();
            Some(super::board(ddr, Box::new(BgSubCore::new(params)))?)
        }
        Device::Cpu | Device::Cuda(_) => None,
    };
    let memory = sim.as_ref().and_then(|(_, memory)| memory.clone());
    let of = Unit::Frames {
        width: params.width,
        height: params.height,
    };
    let (middle, how) = (("bgsub", (cap, cap), &memory), (chunk, 0, of));
    super::run(ends, middle, how, |g, mut b_in, mut b_out| match sim {
        Some((mut rig, _)) => {
            let engines = [rig.engines.remove(0), rig.engines.remove(0)];
            let cfg = bgsub::Config {
                params,
                completion: Completion::Poll,
            };
            let stats = Arc::new(Mutex::new(StageStats::default()));
            bgsub::add_node(g, "bgsub", engines, cfg, b_in, b_out, stats.clone())?;
            Ok(Some((rig, stats)))
        }
        None => {
            // Opened here, so that a missing device is this call's error.
            let mut sub: Subtract = match device {
                Device::Cuda(n) => {
                    let gpu = dmaflow::gpu::Gpu::open(n)?;
                    let k = Arc::new(dmaflow::gpu::Kernels::load(&gpu)?);
                    let mut s = dmaflow::gpu::kernels::Bgsub::new(k, params)?;
                    Box::new(move |f, m| Ok(s.process(f, m)?))
                }
                _ => {
                    let mut s = BackgroundSubtractor::new(params);
                    Box::new(move |f, m| Ok(s.process(f, m)?))
                }
            };
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
                    sub(&f[..n], &mut mask)?;
                    b_in.consume(n)?;
                    b_out.write(&mask)?;
                }
            })?;
            Ok(None)
        }
    })
}
