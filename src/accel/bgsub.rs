//! The background-subtraction coprocessor (paper 000) as a node of a process
//! network: frames in, masks out, the background model kept in DMA memory
//! between frames.
//!
//! The core has two stream pairs, one AXI DMA engine each: engine 0 carries the
//! frame in and the new background out, engine 1 the background in and the
//! mask out. The node hands each frame to engine 0's MM2S where it lies in the
//! input queue (two descriptors when it passes the end of the queue's memory:
//! the device does not see the mirror) and points engine 1's S2MM at reserved
//! slots of the output queue, so frames and masks never pass through the CPU.
//! The background goes back and forth between two DMA buffers of the node's
//! own (the first frame's background is the frame itself, read again from the
//! input queue): it never passes through the CPU either.
//!
//! Each frame's background is the previous frame's answer, so frames go one at
//! a time. Errors and timeouts halt both engines before the node returns; if
//! one cannot be halted, the memory it was given (descriptor rings, the
//! background buffers, the queues' ranges) is never returned or unmapped.

use std::time::Instant;

use crate::axi::{self, Channel, DESC_WORDS, DescRing, Wait, regs::DESC_LENGTH_MASK};
use crate::dma::{self, Completion, Engine};
use crate::dsp::bgsub::Params;
use crate::graph::{self, Input, Output};
use crate::mem::DmaBuf;
use crate::platform::{IrqLine, RegisterSpace};
use crate::ring::{DmaSpan, MemoryHold};

use super::stage::{Error, StageStats};

/// One engine's two descriptor rings.
struct Rings {
    mm2s: DescRing,
    s2mm: DescRing,
}

/// The node's state between frames.
struct Node<'e, R: RegisterSpace, I: IrqLine> {
    engines: [&'e Engine<R, I>; 2],
    completion: Completion,
    rings: [Rings; 2],
    /// Background in (`background[0]`) and out, swapped after each frame.
    background: [DmaBuf<u8>; 2],
    /// Whether a background is in `background[0]` (after the first frame).
    started: bool,
    /// The queues' memory while a frame is with the engines.
    holds: Vec<MemoryHold>,
    failed: bool,
    /// The run ended with both engines halted.
    finished: bool,
}

impl<R: RegisterSpace, I: IrqLine> Drop for Node<'_, R, I> {
    /// A node left by a panic or an early return: the engines are halted
    /// before the rings, the backgrounds and the queues' memory can go back.
    fn drop(&mut self) {
        if !self.finished {
            self.fail();
        }
    }
}

impl<R: RegisterSpace, I: IrqLine> Node<'_, R, I> {
    /// Halts both engines after an error; an engine that cannot be halted keeps
    /// its rings, the background buffers and the queues' memory for good (the
    /// queues' CPU views replaced, the queues refusing further use).
    fn fail(&mut self) {
        if self.failed {
            return;
        }
        self.failed = true;
        let mut lost = false;
        for (e, rings) in self.engines.iter().zip(self.rings.iter_mut()) {
            if e.dma().recover() {
                rings.mm2s.engine_halted();
                rings.s2mm.engine_halted();
            } else {
                rings.mm2s.surrender();
                rings.s2mm.surrender();
                lost = true;
            }
        }
        let holds = std::mem::take(&mut self.holds);
        if lost {
            for b in &mut self.background {
                b.surrender();
            }
            for h in holds {
                h.surrender();
            }
        }
    }

    /// After the last frame: halts both engines, so that neither is left
    /// running with CURDESC in descriptor memory that goes back to the pool.
    fn finish(&mut self) -> Result<(), Error> {
        for (e, rings) in self.engines.iter().zip(self.rings.iter_mut()) {
            if !e.dma().recover() {
                self.fail();
                return Err(Error::Config(
                    "an engine could not be halted at the end of the stream".into(),
                ));
            }
            rings.mm2s.engine_halted();
            rings.s2mm.engine_halted();
        }
        self.finished = true;
        Ok(())
    }

    /// How to wait on `ch` of engine `e` for a frame whose streams started
    /// at `posted`: `Adaptive` naps and spins until the link says the frame's
    /// streams (side by side, one per engine) should be over.
    fn wait_how(&self, e: usize, ch: Channel, posted: Instant, n: usize) -> Wait<'_> {
        match self.completion {
            Completion::Irq => Wait::Irq(self.engines[e].irq(ch)),
            Completion::Adaptive => Wait::Adaptive {
                line: self.engines[e].irq(ch),
                spin_until: self.engines[e].link().spin_until(posted, n),
            },
            Completion::Yield => Wait::Yield,
            _ => Wait::Poll,
        }
    }

    /// Posts one frame of `n` bytes: `frame` and `mask` are its spans in the
    /// queues. The background in is the last frame's answer (the frame itself
    /// for the first); the new one goes to the other buffer.
    fn post(&mut self, frame: &[DmaSpan], mask: &[DmaSpan], n: usize) -> Result<Posted, Error> {
        let spans = |b: &DmaBuf<u8>| {
            [DmaSpan {
                bus: b.bus_addr(),
                offset: 0,
                bytes: n,
            }]
        };
        let background_in = spans(&self.background[0]);
        let bg_in = if self.started {
            &background_in[..]
        } else {
            frame
        };
        let bg_out = spans(&self.background[1]);
        // S2MM first on both engines, then MM2S: the answers have somewhere to
        // go before the core starts.
        let mut posted = [[0usize; 2]; 2];
        for (e, (out, inp)) in [(&bg_out[..], frame), (mask, bg_in)]
            .into_iter()
            .enumerate()
        {
            let max = self.engines[e].dma().max_len();
            let rings = &mut self.rings[e];
            posted[e][1] = push(&mut rings.s2mm, out, max, false)?;
            self.engines[e].dma().ring_flush(&mut rings.s2mm)?;
            posted[e][0] = push(&mut rings.mm2s, inp, max, true)?;
        }
        for (e, rings) in self.rings.iter_mut().enumerate() {
            self.engines[e].dma().ring_flush(&mut rings.mm2s)?;
        }
        Ok(Posted {
            descriptors: posted,
            at: Instant::now(),
        })
    }

    /// Waits for the frame `posted`: both answers must be exactly `n` bytes.
    fn wait(&mut self, posted: &Posted, n: usize) -> Result<(), Error> {
        let started = posted.at;
        // The answers first, the mask last of all: by the time it has landed
        // the other three have completed too, so only one wait sleeps.
        for (e, &[_, s2mm]) in posted.descriptors.iter().enumerate().rev() {
            let mut got = 0usize;
            for k in 0..s2mm {
                let how = self.wait_how(e, Channel::S2mm, started, n);
                let status = self.engines[e].dma().ring_wait(&self.rings[e].s2mm, &how)?;
                self.rings[e].s2mm.reclaim();
                got += (status & DESC_LENGTH_MASK) as usize;
                let eof = status & axi::regs::DESC_STS_RXEOF != 0;
                let last = k + 1 == s2mm;
                if eof && got < n {
                    // Descriptors may be left in the ring: the caller halts the
                    // engine.
                    return Err(Error::ShortAnswer { got, expected: n });
                }
                if last && !eof {
                    return Err(Error::AnswerTooLong { out_max: n });
                }
            }
        }
        for (e, &[mm2s, _]) in posted.descriptors.iter().enumerate() {
            for _ in 0..mm2s {
                let how = self.wait_how(e, Channel::Mm2s, started, n);
                self.engines[e].dma().ring_wait(&self.rings[e].mm2s, &how)?;
                self.rings[e].mm2s.reclaim();
            }
        }
        // The new background is the next frame's.
        self.background.swap(0, 1);
        self.started = true;
        Ok(())
    }
}

/// A frame with the engines: descriptors per engine (`[mm2s, s2mm]`) and
/// when its streams started.
struct Posted {
    descriptors: [[usize; 2]; 2],
    at: Instant,
}

/// Puts `spans` on `ring` as one packet, each span cut to the engine's length
/// register; returns the descriptors used.
fn push(ring: &mut DescRing, spans: &[DmaSpan], max: usize, mm2s: bool) -> Result<usize, Error> {
    let parts: Vec<(u64, usize)> = spans
        .iter()
        .flat_map(|s| {
            (0..s.bytes.div_ceil(max)).map(move |k| {
                let at = k * max;
                (s.bus + at as u64, max.min(s.bytes - at))
            })
        })
        .collect();
    if parts.len() > ring.capacity() - ring.in_flight() {
        return Err(Error::Config(format!(
            "a packet of {} descriptors does not fit a ring of {}",
            parts.len(),
            ring.capacity()
        )));
    }
    for (i, &(bus, bytes)) in parts.iter().enumerate() {
        let (first, last) = (i == 0, i + 1 == parts.len());
        // SAFETY: every span is DMA memory that nothing else uses until the
        // descriptor completes: a published frame not consumed until then, slots
        // reserved in the output queue and committed only then, or one of the
        // node's background buffers; on a failure the engine is halted or the
        // memory given up for good (`Node::fail`).
        unsafe { ring.push_part(bus, bytes, max, first || !mm2s, last || !mm2s) }?;
    }
    Ok(parts.len())
}

/// What the node runs: the core's frame size, threshold and filter, and how
/// completions are waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Frame size, threshold and filter (as the core was built for).
    pub params: Params,
    /// `Poll`, `Yield` or `Irq`.
    pub completion: Completion,
}

/// Runs the background-subtraction coprocessor on `engines` (scatter-gather,
/// the core's two stream pairs) as a node: reads whole frames from `input`,
/// writes one mask per frame to `output`, until the input ends. Both queues
/// must be in the DMA memory of the engines' board.
pub fn run<R, I>(
    engines: [&Engine<R, I>; 2],
    cfg: &Config,
    input: &mut Input<u8>,
    output: &mut Output<u8>,
) -> Result<StageStats, Error>
where
    R: RegisterSpace,
    I: IrqLine,
{
    let completion = cfg.completion;
    let n = cfg.params.frame_bytes();
    if completion == Completion::Proxy {
        return Err(dma::Error::ProxyOnly.into());
    }
    for (what, cap) in [("input", input.capacity()), ("output", output.capacity())] {
        if n > cap {
            return Err(Error::Config(format!(
                "a {n}-byte frame does not fit the {what} queue of {cap} bytes"
            )));
        }
    }
    for e in engines {
        super::stage::same_memory(e, input.dma_memory_id(), output.dma_memory_id())?;
    }
    input.dma_spans(0, 1)?;
    output.dma_spans(0, 1)?;
    let irq = completion.sleeps();
    let pool = engines[0].pool();
    let mut rings = Vec::with_capacity(2);
    for e in engines {
        // A packet is cut at the length register and at the queue's end.
        let slots = n.div_ceil(e.dma().max_len()) + 2;
        let descs = || e.pool().alloc::<u32>(slots * DESC_WORDS);
        let mm2s = descs().map_err(dma::Error::from)?;
        let s2mm = descs().map_err(dma::Error::from)?;
        rings.push(Rings {
            mm2s: e.dma().ring_start(Channel::Mm2s, mm2s, irq)?,
            s2mm: e.dma().ring_start(Channel::S2mm, s2mm, irq)?,
        });
    }
    let (Some(r1), Some(r0)) = (rings.pop(), rings.pop()) else {
        return Err(Error::Config("two engines expected".into()));
    };
    let background = [
        pool.alloc::<u8>(n).map_err(dma::Error::from)?,
        pool.alloc::<u8>(n).map_err(dma::Error::from)?,
    ];
    for b in &background {
        // Whatever the CPU left in the cache over the buffers goes first.
        b.sync_for_device(n).map_err(dma::Error::from)?;
    }
    let mut node = Node {
        engines,
        completion,
        rings: [r0, r1],
        background,
        started: false,
        holds: Vec::new(),
        failed: false,
        finished: false,
    };
    let mut stats = StageStats::default();
    let result = frames(&mut node, n, input, output, &mut stats).and_then(|()| node.finish());
    if result.is_err() {
        node.fail();
    }
    result.map(|()| stats)
}

/// The node's loop: a frame in, its mask out, until the input ends.
///
/// A frame's background is the last frame's answer, so one frame is with the
/// engines at a time; but the hand-over of a finished frame (committing its
/// mask, releasing its input, which wakes the sink and the source) waits
/// until the next frame is posted when that frame is already in the queue and
/// its mask has room: the hand-over and the threads it wakes then run while
/// the device works, off the frame's critical path. Otherwise (the next frame
/// not there yet, or no room for two masks) the finished frame goes first
/// and the node waits for the next with nothing posted, so that a queue that
/// grows never moves memory the device uses.
fn frames<R: RegisterSpace, I: IrqLine>(
    node: &mut Node<'_, R, I>,
    n: usize,
    input: &mut Input<u8>,
    output: &mut Output<u8>,
    stats: &mut StageStats,
) -> Result<(), Error> {
    // The frame with the engines (at the read and write positions), if any.
    let mut posted: Option<Posted> = None;
    loop {
        let current = match posted.take() {
            Some(p) => p,
            None => {
                let got = input.peek(n)?.len();
                if got == 0 {
                    return Ok(());
                }
                if got < n {
                    return Err(Error::Config(format!(
                        "the stream ended inside a frame: {got} of {n} bytes"
                    )));
                }
                output.reserve_for_device(n, true)?;
                post_at(node, n, 0, input, output)?
            }
        };
        node.wait(&current, n)?;
        node.holds.clear();
        for s in &output.dma_spans(0, n)? {
            output.sync_for_cpu(*s)?;
        }
        // The next frame, if it is there and its mask has room, goes to the
        // engines before this one is handed over.
        let next_ready = input.try_peek(2 * n)?.is_some_and(|s| s.len() >= 2 * n)
            && output.reserve_for_device(2 * n, false)?;
        if next_ready {
            posted = Some(post_at(node, n, n, input, output)?);
        }
        output.commit(n)?;
        input.consume(n)?;
        stats.windows += 1;
        // The device read the frame and a background, and wrote a background
        // and the mask; the mask is delivered.
        stats.bytes_in += 2 * n as u64;
        stats.bytes_out += n as u64;
    }
}

/// Posts the frame `at` bytes past the input's read position, its mask `at`
/// bytes past the output's write position (both reserved or readable), the
/// queues' memory held while the engines have them.
fn post_at<R: RegisterSpace, I: IrqLine>(
    node: &mut Node<'_, R, I>,
    n: usize,
    at: usize,
    input: &mut Input<u8>,
    output: &mut Output<u8>,
) -> Result<Posted, Error> {
    let frame = input.dma_spans(at, n)?;
    let mask = output.dma_spans(at, n)?;
    for s in &frame {
        input.sync_for_device(*s)?;
    }
    for s in &mask {
        output.sync_for_cpu(*s)?;
    }
    node.holds.extend(input.hold());
    node.holds.extend(output.hold());
    node.post(&frame, &mask, n)
}

/// Adds the background-subtraction coprocessor as node `name` of `g` (see
/// [`run`]); its statistics go to `stats` when it ends.
pub fn add_node<R, I>(
    g: &mut graph::Graph,
    name: &str,
    engines: [Engine<R, I>; 2],
    cfg: Config,
    mut input: Input<u8>,
    mut output: Output<u8>,
    stats: std::sync::Arc<std::sync::Mutex<StageStats>>,
) -> Result<(), graph::Error>
where
    R: RegisterSpace + Send + 'static,
    I: IrqLine + Send + 'static,
{
    g.node(name, move || {
        let [e0, e1] = &engines;
        let s = run([e0, e1], &cfg, &mut input, &mut output)?;
        *stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = s;
        Ok(())
    })
}
