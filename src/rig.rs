//! Emulated boards ready to use: a [`SimBoard`] with its fabric running around a
//! stream processor and a driver ([`Engine`]) for each of its AXI DMA engines,
//! all on one pool of DMA memory; and the coprocessor set-ups built on them (the
//! background-subtraction core behind two engines). What `dmaflow bench` and
//! `dmaflow bgsub --device sim` use, and what a program can use to try dmaflow
//! without a board.

use std::sync::Arc;

use crate::axi::{AxiDma, Config as AxiConfig};
use crate::designs;
use crate::dma::{Completion, Engine, Lane, Link, two_way_together};
use crate::dsp::bgsub::Params;
use crate::mem::{CachePolicy, DmaBuf, DmaPool};
use crate::platform::MemoryModel;
use crate::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq, SimRegisters};
use crate::sim::{BgSubCore, Clock, Fabric, StreamProcessor, irq_line};

/// What went wrong setting up or driving an emulated board.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The emulated board could not be set up.
    #[error("emulated board: {0}")]
    Platform(#[from] crate::platform::Error),
    /// DMA memory ran out or failed.
    #[error(transparent)]
    Mem(#[from] crate::mem::Error),
    /// The DMA engine failed.
    #[error(transparent)]
    Axi(#[from] crate::axi::Error),
    /// A transfer failed.
    #[error(transparent)]
    Dma(#[from] crate::dma::Error),
    /// A design of the emulated board that cannot be had.
    #[error(transparent)]
    Design(#[from] crate::designs::Error),
    /// A frame or mask of the wrong length.
    #[error("a {len}-byte frame or mask for a coprocessor of {frame}-byte frames")]
    FrameLength {
        /// Bytes given.
        len: usize,
        /// Bytes per frame.
        frame: usize,
    },
    /// The coprocessor answered with fewer bytes than a frame.
    #[error("the coprocessor answered {got} bytes for a {frame}-byte frame")]
    ShortAnswer {
        /// Bytes received (the shortest lane).
        got: usize,
        /// Bytes per frame.
        frame: usize,
    },
}

/// An engine on the emulated fabric, as a program on a board sees it.
pub type SimEngine = Engine<SimRegisters, SimIrq>;

/// The cache policy a board's memory needs: none on a coherent board, explicit
/// maintenance on a non-coherent one (without it the CPU reads stale data).
pub fn policy_for(model: MemoryModel) -> CachePolicy {
    match model {
        MemoryModel::Coherent => CachePolicy::Coherent,
        MemoryModel::NonCoherent => CachePolicy::Explicit,
    }
}

/// An emulated board with its fabric running and a driver for each of its AXI DMA
/// engines, all sharing one pool of DMA memory.
pub struct Rig {
    /// Drivers, engine i at register window i.
    pub engines: Vec<SimEngine>,
    /// The fabric (kept running while the rig lives).
    pub fabric: Fabric,
    /// The board.
    pub board: SimBoard,
}

impl Rig {
    /// A coherent board with `ddr_bytes` of DMA memory under `policy`, a fabric
    /// clocked at `clock` (scatter-gather if `sg`) around `processor`.
    pub fn new(
        ddr_bytes: usize,
        clock: Clock,
        sg: bool,
        policy: CachePolicy,
        processor: Box<dyn StreamProcessor>,
    ) -> Result<Self, Error> {
        Self::with_model(
            ddr_bytes,
            clock,
            sg,
            policy,
            MemoryModel::Coherent,
            processor,
        )
    }

    /// Like [`new`](Self::new), on a board whose CPU caches relate to its DMA
    /// memory as `model` says.
    pub fn with_model(
        ddr_bytes: usize,
        clock: Clock,
        sg: bool,
        policy: CachePolicy,
        model: MemoryModel,
        processor: Box<dyn StreamProcessor>,
    ) -> Result<Self, Error> {
        Self::configured(
            ddr_bytes,
            clock,
            sg,
            policy,
            model,
            processor,
            AxiConfig::default(),
        )
    }

    /// Like [`with_model`](Self::with_model), with the engines' length
    /// register as wide and their driver as patient as `cfg` says.
    pub fn configured(
        ddr_bytes: usize,
        clock: Clock,
        sg: bool,
        policy: CachePolicy,
        model: MemoryModel,
        processor: Box<dyn StreamProcessor>,
        cfg: AxiConfig,
    ) -> Result<Self, Error> {
        let n = processor.streams().max(1);
        // A core with registers of its own gets the window after the engines'.
        let windows = n + usize::from(processor.control_bytes() > 0);
        let board = SimBoard::with_model(windows, ddr_bytes, DEFAULT_DDR_BASE, 2 * n, model)?;
        let fabric = Fabric::with_processor(&board, clock, sg, processor)?;
        // The design's length register is as wide as the driver expects.
        fabric.set_length_width(cfg.length_width)?;
        let pool = DmaPool::new(Arc::new(board.memory()?), policy)?;
        // Adaptive completion spins for what the modelled device needs, plus
        // the default margin for the emulator's own thread.
        let link = Link {
            bytes_per_s: clock.bytes_per_s(),
            latency: clock.two_way(0, sg) + Link::default().latency,
            ..Link::default()
        };
        let engines = (0..n)
            .map(|i| {
                let dma = AxiDma::new(board.registers(i)?, cfg)?;
                let engine = Engine::new(
                    dma,
                    board.irq(irq_line(i, 0))?,
                    board.irq(irq_line(i, 1))?,
                    pool.clone(),
                );
                engine.set_link(link);
                Ok(engine)
            })
            .collect::<Result<_, Error>>()?;
        Ok(Rig {
            engines,
            fabric,
            board,
        })
    }
}

impl Rig {
    /// The emulated board running `design` (one of [`designs::DESIGNS`]) as
    /// the designs' table describes it: [`designs::MEMORY_BYTES`] of DMA
    /// memory, memory `model` (and the cache policy it needs), the fabric
    /// unclocked, the engines' length register and driver as `cfg` says; a
    /// background-subtraction core built for `frames`.
    pub fn emulate(
        design: &designs::Design,
        frames: Option<Params>,
        model: MemoryModel,
        cfg: AxiConfig,
    ) -> Result<Self, Error> {
        Self::configured(
            designs::MEMORY_BYTES,
            Clock::Unlimited,
            design.sg,
            policy_for(model),
            model,
            design.processor(frames)?,
            cfg,
        )
    }

    /// The register window of the core's own (AXI-Lite) registers, after the
    /// engines' windows (index `engines.len()`); an error when the core has
    /// none.
    pub fn control(&self) -> Result<SimRegisters, Error> {
        Ok(self.board.registers(self.engines.len())?)
    }
}

/// Where a rig's threads run after [`Rig::dedicate_core`]: the device thread on
/// a core of its own, the calling thread (and the threads it starts, such as a
/// [`crate::dma::Proxy`]) on the others. Dropping it gives the calling thread its
/// cores back.
#[derive(Debug)]
pub struct Placement {
    /// The device thread's core, or `None` when the machine has one core (the
    /// device then takes turns with the driver, as it must).
    pub device_core: Option<usize>,
    /// The cores left to the driver and the application.
    pub host_cores: Vec<usize>,
    restore: Vec<usize>,
}

impl Placement {
    /// Every core the caller could use before the placement (device's included).
    pub fn all_cores(&self) -> &[usize] {
        &self.restore
    }

    /// Says where the threads ran, for a report's header.
    pub fn describe(&self) -> String {
        let list = |c: &[usize]| c.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        match self.device_core {
            Some(d) => format!(
                "emulated device thread pinned to core {d}, driver and application threads on \
                 core(s) {}",
                list(&self.host_cores)
            ),
            None => format!(
                "one core ({}): the emulated device thread shares it with the driver",
                list(&self.host_cores)
            ),
        }
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        // Best effort: the cores were the caller's a moment ago.
        let _ = crate::platform::cpu::pin(None, &self.restore);
    }
}

impl Rig {
    /// Gives the fabric's device thread the last core the calling thread may
    /// use, and keeps the calling thread (and threads it starts from now on) on
    /// the others, so the emulated device runs beside the driver as a separate
    /// chip would. On a single core nothing is pinned and the placement says so.
    pub fn dedicate_core(&self) -> Result<Placement, Error> {
        let cores = crate::platform::cpu::allowed_cores(None)?;
        match cores.split_last() {
            Some((&device, host)) if !host.is_empty() => {
                self.fabric.pin_device(&[device])?;
                crate::platform::cpu::pin(None, host)?;
                Ok(Placement {
                    device_core: Some(device),
                    host_cores: host.to_vec(),
                    restore: cores,
                })
            }
            _ => Ok(Placement {
                device_core: None,
                host_cores: cores.clone(),
                restore: cores,
            }),
        }
    }
}

/// The background-subtraction coprocessor (paper 000) on its emulated board,
/// driven zero-copy through two engines: frames go into DMA buffers, and the new
/// background it returns is the next frame's background input (two buffers,
/// swapped), so the background never passes through the CPU.
pub struct BgSubCoprocessor {
    params: Params,
    rig: Rig,
    frame: DmaBuf<u8>,
    mask: DmaBuf<u8>,
    /// Background in, background out (swapped after each frame).
    background: [DmaBuf<u8>; 2],
    started: bool,
    completion: Completion,
    last: FrameTimes,
}

/// Where the last frame's time went on the host's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameTimes {
    /// Copying the frame (and, for the first, the initial background) into
    /// DMA memory.
    pub copy_in: std::time::Duration,
    /// Programming both engines and waiting for both answers: the modelled
    /// streams, the emulated core, and the driver.
    pub transfer: std::time::Duration,
    /// Copying the mask out of DMA memory.
    pub copy_out: std::time::Duration,
}

impl BgSubCoprocessor {
    /// The emulated board the coprocessor runs on.
    pub fn rig(&self) -> &Rig {
        &self.rig
    }

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
            policy_for(model),
            model,
            Box::new(BgSubCore::new(params)),
        )?;
        let pool = rig.engines[0].pool().clone();
        Ok(BgSubCoprocessor {
            params,
            frame: pool.alloc(n)?,
            mask: pool.alloc(n)?,
            background: [pool.alloc(n)?, pool.alloc(n)?],
            rig,
            started: false,
            completion,
            last: FrameTimes::default(),
        })
    }

    /// Processes the next frame into `mask` (the first frame is also the initial
    /// background).
    pub fn process(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), Error> {
        let n = self.params.frame_bytes();
        for len in [frame.len(), mask.len()] {
            if len != n {
                return Err(Error::FrameLength { len, frame: n });
            }
        }
        let t0 = std::time::Instant::now();
        crate::copies::copy(self.frame.as_mut_slice(), frame);
        if !self.started {
            crate::copies::copy(self.background[0].as_mut_slice(), frame);
            self.started = true;
        }
        let t1 = std::time::Instant::now();
        let [bg_in, bg_out] = &mut self.background;
        let (e0, e1) = (&self.rig.engines[0], &self.rig.engines[1]);
        let got = two_way_together(
            &mut [
                Lane {
                    engine: e0,
                    tx: &self.frame,
                    tx_len: n,
                    rx: bg_out,
                    rx_len: n,
                },
                Lane {
                    engine: e1,
                    tx: bg_in,
                    tx_len: n,
                    rx: &mut self.mask,
                    rx_len: n,
                },
            ],
            self.completion,
        )?;
        if got != [n, n] {
            return Err(Error::ShortAnswer {
                got: got.iter().min().copied().unwrap_or(0),
                frame: n,
            });
        }
        let t2 = std::time::Instant::now();
        crate::copies::copy(mask, self.mask.as_slice());
        self.background.swap(0, 1);
        self.last = FrameTimes {
            copy_in: t1 - t0,
            transfer: t2 - t1,
            copy_out: t2.elapsed(),
        };
        Ok(())
    }

    /// Where the last frame's time went.
    pub fn last_times(&self) -> FrameTimes {
        self.last
    }

    /// The background model the coprocessor holds now.
    pub fn background(&self) -> &[u8] {
        self.background[0].as_slice()
    }
}
