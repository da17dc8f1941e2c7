//! `dmaflow bgsub`'s file tool: a file of 8-bit frames in, a file of masks out,
//! on the emulated coprocessor (a process network whose middle node is the
//! coprocessor, frames and masks in queues in its DMA memory) or in software
//! (identical bytes), the output appearing only on success.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dmaflow::accel::bgsub;
use dmaflow::accel::stage::StageStats;
use dmaflow::dma::Completion;
use dmaflow::dsp::bgsub::{BackgroundSubtractor, Params};
use dmaflow::graph::Graph;
use dmaflow::mem::CachePolicy;
use dmaflow::rig::Rig;
use dmaflow::sim::{BgSubCore, Clock};

use super::{FileError, InEnd, OutEnd, Sink, Source, Unit, create_output, io, open_input};

/// Where `dmaflow bgsub` runs the algorithm.
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

/// A background subtractor on the CPU or a GPU, frame by frame.
enum Subtractor {
    Cpu(BackgroundSubtractor),
    Gpu(dmaflow::gpu::kernels::Bgsub),
}

impl Subtractor {
    fn new(params: Params, device: Device) -> Result<Subtractor, FileError> {
        Ok(match device {
            Device::Cuda(n) => {
                let gpu = dmaflow::gpu::Gpu::open(n)?;
                let k = Arc::new(dmaflow::gpu::Kernels::load(&gpu)?);
                Subtractor::Gpu(dmaflow::gpu::kernels::Bgsub::new(k, params)?)
            }
            _ => Subtractor::Cpu(BackgroundSubtractor::new(params)),
        })
    }

    fn process(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), FileError> {
        match self {
            Subtractor::Cpu(s) => s.process(frame, mask)?,
            Subtractor::Gpu(s) => s.process(frame, mask)?,
        }
        Ok(())
    }
}

/// What `bgsub_file` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// Frames turned into masks.
    pub frames: usize,
    /// On the coprocessor: what the CPU copied on the way.
    pub copies: Option<super::Copies>,
}

/// What an input of `params`' frames holds.
fn frames_of(params: &Params) -> Unit {
    Unit::Frames {
        width: params.width,
        height: params.height,
    }
}

/// Reads raw 8-bit frames from `input`, writes one mask per frame to `output`
/// (through a temporary file renamed at the end, so a failure leaves no partial
/// output).
pub fn bgsub_file(
    params: Params,
    input: &Path,
    output: &Path,
    device: Device,
) -> Result<Done, FileError> {
    let n = params.frame_bytes();
    let of = frames_of(&params);
    let mut src = open_input(input, of)?;
    if device == Device::Sim {
        return bgsub_stream(
            params,
            Source::File(input.to_path_buf()),
            Sink::File(output.to_path_buf()),
            device,
        );
    }
    let (partial, mut file) = create_output(output)?;
    let mut frames = Vec::new();
    src.read_to_end(&mut frames).map_err(io(input))?;
    if !of.whole(frames.len() as u64) {
        return Err(FileError::BadLength {
            path: input.to_path_buf(),
            len: frames.len() as u64,
            of,
        });
    }
    let mut masks = vec![0u8; frames.len()];
    let mut sub = Subtractor::new(params, device)?;
    for (f, m) in frames.chunks(n).zip(masks.chunks_mut(n)) {
        sub.process(f, m)?;
    }
    file.write_all(&masks)
        .and_then(|()| file.sync_all())
        .map_err(io(partial.path()))?;
    partial.finish().map_err(io(output))?;
    Ok(Done {
        frames: frames.len() / n,
        copies: None,
    })
}

/// Frames from `source` to masks at `sink` as one process network: source ->
/// the coprocessor node (frames and masks in queues in its DMA memory, read
/// and written there by the file ends) or the software as a node -> sink.
/// Either end is a file or a network edge; a file output is renamed into
/// place only on success, and a file that ends inside a frame is named.
pub fn bgsub_stream(
    params: Params,
    source: Source,
    sink: Sink,
    device: Device,
) -> Result<Done, FileError> {
    let n = params.frame_bytes();
    let chunk = n * (64usize << 10).div_ceil(n);
    let cap = 2 * chunk;
    let mut g = Graph::new();
    let stats = Arc::new(Mutex::new(StageStats::default()));
    // Frames the software node turned into masks.
    let frames = Arc::new(AtomicU64::new(0));
    let counted = frames.clone();
    let (s_out, k_in, rig) = match device {
        Device::Sim => {
            let mut r = Rig::new(
                (4 * cap + 2 * n + (4 << 20)).next_power_of_two(),
                Clock::Unlimited,
                true,
                CachePolicy::Coherent,
                Box::new(BgSubCore::new(params)),
            )?;
            let memory = r.engines[0]
                .pool()
                .queue_memory()
                .map_err(dmaflow::rig::Error::from)?;
            let (s_out, b_in) =
                g.connect_in::<u8>(("source", "out"), ("bgsub", "in"), cap, memory.clone())?;
            let (b_out, k_in) =
                g.connect_in::<u8>(("bgsub", "out"), ("sink", "in"), cap, memory)?;
            let e1 = r.engines.remove(1);
            let e0 = r.engines.remove(0);
            let cfg = bgsub::Config {
                params,
                completion: Completion::Poll,
            };
            bgsub::add_node(&mut g, "bgsub", [e0, e1], cfg, b_in, b_out, stats.clone())?;
            (s_out, k_in, Some(r))
        }
        Device::Cpu | Device::Cuda(_) => {
            let (s_out, mut b_in) =
                g.connect_with_capacity::<u8>(("source", "out"), ("bgsub", "in"), cap)?;
            let (mut b_out, k_in) =
                g.connect_with_capacity::<u8>(("bgsub", "out"), ("sink", "in"), cap)?;
            // Opened here, so that a missing device is this call's error.
            let mut sub = Subtractor::new(params, device)?;
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
                    sub.process(&f[..n], &mut mask)?;
                    b_in.consume(n)?;
                    b_out.write(&mask)?;
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            })?;
            (s_out, k_in, None)
        }
    };
    let input = InEnd::add(&mut g, source, s_out, (chunk, 0, frames_of(&params)))?;
    let output = OutEnd::add(&mut g, sink, k_in)?;
    let result = g.run();
    drop(rig);
    input.check()?;
    result?;
    output.finish()?;
    let s = *stats.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(match device {
        Device::Sim => Done {
            frames: s.bytes_out as usize / n,
            copies: Some(super::Copies {
                copied: s.bytes_copied,
                delivered: s.bytes_out,
            }),
        },
        Device::Cpu | Device::Cuda(_) => Done {
            frames: frames.load(Ordering::Relaxed) as usize,
            copies: None,
        },
    })
}
