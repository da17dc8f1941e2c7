//! An accelerator as a node of a process network. Its input and output queues
//! live in DMA memory ([`crate::graph::Graph::connect_in`]); the node hands
//! windows of the input queue to MM2S as scatter-gather descriptors that point
//! straight into the queue (two when a window passes the end of the queue's
//! memory: the device does not see the mirror), gives S2MM descriptors that
//! point into reserved slots of the output queue, and commits what S2MM reports
//! as received. No byte of the stream passes through the CPU.
//!
//! Windows follow the firing-threshold rule of the queues: each window is
//! `window` items, the next starts `hop` items later, so with `window > hop`
//! the overlap is sent again by the device, never copied. Several windows are
//! in flight so the link does not idle between them (the windows posted in one
//! pass go to the engine with one doorbell per channel); where completions sleep,
//! S2MM's interrupts are coalesced ([`s2mm_coalescing`]) and the node hands
//! every completion it finds over at once (one release of input and one
//! commit of answers per batch). At the end of the stream a last, shorter
//! window carries what is left (if at least `min_window` items).
//!
//! The core may end an answer early (TLAST before the `out_max` items reserved
//! for it): the node commits what arrived. The next answer then begins in the
//! next S2MM descriptor, leaving a gap in the queue; the node closes it by
//! moving that answer down (the only copy it ever makes, counted in
//! [`StageStats::bytes_copied`]).
//!
//! Errors and timeouts stop the node with the engine halted, and so the graph.
//! If the engine cannot be halted, the memory it was given (the queues' ranges
//! and the descriptor rings) is never returned to the pool or unmapped.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! use dmaflow::accel::fir::load_taps;
//! use dmaflow::accel::stage::{self, StageConfig, StageStats};
//! use dmaflow::dma::Completion;
//! use dmaflow::graph::Graph;
//! use dmaflow::mem::CachePolicy;
//! use dmaflow::rig::Rig;
//! use dmaflow::sim::{Clock, FirCore};
//!
//! // An emulated board: the FIR coprocessor behind a scatter-gather AXI DMA engine,
//! // its taps loaded over the core's own register window.
//! let mut rig = Rig::new(16 << 20, Clock::Unlimited, true, CachePolicy::Coherent,
//!                        Box::new(FirCore::new()))?;
//! load_taps(&rig.control()?, &[0.25; 4])?;
//! let memory = rig.engines[0].pool().queue_memory()?;
//!
//! let mut g = Graph::new();
//! // Both queues in DMA memory: the engine reads and writes their slots in place.
//! let (mut src, fir_in) =
//!     g.connect_in::<f32>(("source", "out"), ("fir", "in"), 1 << 16, memory.clone())?;
//! let (fir_out, mut sink) =
//!     g.connect_in::<f32>(("fir", "out"), ("sink", "in"), 1 << 16, memory)?;
//! g.node("source", move || {
//!     src.write(&[0.0; 3])?; // the filter's zero state: taps - 1 samples
//!     src.write(&vec![1.0; 100_000])?;
//!     Ok(())
//! })?;
//! // Windows of 4096 + 3 samples every 4096: the overlap is sent again, never copied.
//! let cfg = StageConfig { window: 4096 + 3, hop: 4096, out_max: 4096, min_window: 4,
//!                         depth: 4, completion: Completion::Poll };
//! let stats = Arc::new(Mutex::new(StageStats::default()));
//! stage::add_node(&mut g, "fir", rig.engines.remove(0), cfg, fir_in, fir_out, stats.clone())?;
//! g.node("sink", move || {
//!     let mut n = 0;
//!     loop {
//!         let s = sink.peek(1)?;
//!         if s.is_empty() { break; }
//!         n += s.len();
//!         let k = s.len();
//!         sink.consume(k)?;
//!     }
//!     assert_eq!(n, 100_000);
//!     Ok(())
//! })?;
//! g.run()?;
//! assert_eq!(stats.lock().unwrap().bytes_copied, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;

use crate::axi::{self, Channel, Coalescing, DESC_WORDS, DescRing, Wait, regs::DESC_LENGTH_MASK};
use crate::dma::{self, Completion, Engine};
use crate::graph::{self, Input, Output};
use crate::platform::{IrqLine, RegisterSpace};
use crate::ring::{MemoryHold, Pod};

/// How an accelerator node cuts its input and sizes its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageConfig {
    /// Input items per window (one MM2S packet).
    pub window: usize,
    /// Items the next window starts after this one (at most `window`).
    pub hop: usize,
    /// The most output items the core answers one window with (the S2MM space
    /// reserved per window).
    pub out_max: usize,
    /// The shortest last window worth sending at the end of the stream (fewer
    /// items left are dropped); at least 1.
    pub min_window: usize,
    /// Windows in flight at once (at least 1). Enough to cover what the
    /// node's thread may be kept from running: where it shares a core with
    /// the source and the sink, hundreds of microseconds of the link (`bench
    /// pipeline` keeps 512 KiB in flight, 128 windows of 4 KiB).
    pub depth: usize,
    /// How completions are waited for (`Poll`, `Yield` or `Irq`). With many
    /// windows in flight, `Irq` leaves the core to the other nodes until one
    /// completes.
    pub completion: Completion,
}

/// Why an accelerator node stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work.
    #[error("accelerator node: {0}")]
    Config(String),
    /// A window or an answer longer than the engine's length register allows.
    #[error("a {bytes}-byte {what} does not fit the engine's {max}-byte length register")]
    TooLong {
        /// `window` or `answer`.
        what: &'static str,
        /// Bytes asked for.
        bytes: usize,
        /// The engine's limit.
        max: usize,
    },
    /// An answer that is not a whole number of output items.
    #[error("the core answered with {bytes} bytes, not a whole number of {item}-byte items")]
    PartialItem {
        /// Bytes received.
        bytes: usize,
        /// Bytes per output item.
        item: usize,
    },
    /// An answer longer than the space reserved for it (the core produced more
    /// than `out_max` items).
    #[error("the core answered with more than the {out_max} items reserved per window")]
    AnswerTooLong {
        /// Items reserved per window.
        out_max: usize,
    },
    /// An answer shorter than expected (TLAST early).
    #[error("the core answered with {got} bytes where {expected} were expected")]
    ShortAnswer {
        /// Bytes received.
        got: usize,
        /// Bytes expected.
        expected: usize,
    },
    /// A queue in the DMA memory of another board (or pool) than the
    /// engine's: its bus addresses mean other memory to this engine.
    #[error(
        "the {port} queue is in DMA memory of pool {queue_pool}, not the engine's (pool {engine_pool})"
    )]
    ForeignQueue {
        /// `input` or `output`.
        port: &'static str,
        /// The queue's memory.
        queue_pool: u64,
        /// The engine's.
        engine_pool: u64,
    },
    /// A queue in ordinary memory: the engine cannot reach it.
    #[error("the {port} queue is in ordinary memory, not the engine's DMA memory")]
    NotEngineMemory {
        /// `input` or `output`.
        port: &'static str,
    },
    /// A queue operation failed (a queue not in DMA memory, or in another
    /// board's, included).
    #[error(transparent)]
    Graph(#[from] graph::Error),
    /// The engine failed or timed out (it was halted before this returned).
    #[error(transparent)]
    Dma(#[from] dma::Error),
}

impl From<axi::Error> for Error {
    fn from(e: axi::Error) -> Self {
        Error::Dma(e.into())
    }
}

/// What a node did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageStats {
    /// Windows sent.
    pub windows: u64,
    /// Input bytes the device read (overlaps counted each time).
    pub bytes_in: u64,
    /// Output bytes committed.
    pub bytes_out: u64,
    /// Bytes the CPU moved (closing gaps after early answers).
    pub bytes_copied: u64,
}

/// One window in flight.
struct Flight {
    /// MM2S descriptors of the window.
    mm2s: usize,
    /// Input items released when its MM2S completes.
    release: usize,
    /// The input queue's memory while the device reads it.
    _input: Option<MemoryHold>,
}

/// One S2MM descriptor in flight: where its bytes start (absolute byte
/// position in the output stream) and what it holds.
struct Landing {
    at: u64,
    bytes: usize,
    /// The output queue's memory while the device writes it.
    _hold: Option<MemoryHold>,
}

/// The node's state between calls.
struct Node<'e, 'p, T: Pod, U: Pod, R: RegisterSpace, I: IrqLine> {
    engine: &'e Engine<R, I>,
    cfg: StageConfig,
    input: &'p mut Input<T>,
    output: &'p mut Output<U>,
    tx: DescRing,
    rx: DescRing,
    flights: VecDeque<Flight>,
    landings: VecDeque<Landing>,
    /// Input items past the read position covered by windows in flight.
    sent: usize,
    /// Byte position (absolute, in the output stream) up to which S2MM
    /// descriptors are posted.
    posted_end: u64,
    /// Byte position up to which answers lie contiguous (committed or not).
    filled: u64,
    /// Bytes of the answer being received so far.
    answer: u64,
    /// Windows sent whose answers have not all landed yet.
    outstanding: usize,
    /// Input items whose windows' MM2S completed, not yet released to the
    /// queue ([`Node::publish`] releases them in one call).
    released: usize,
    /// Byte position (absolute, in the output stream) up to which whole
    /// answers have landed; committed by [`Node::publish`] in one call.
    complete: u64,
    stats: StageStats,
    failed: bool,
    /// The run ended with the engine halted and nothing in flight.
    finished: bool,
    /// Where an S2MM landing may start while others are in flight: a cache
    /// line (and a whole item) on a non-coherent board, so that the CPU's gap
    /// closing never dirties a line the device is writing; an item otherwise.
    landing_align: u64,
    /// The output queue's memory needs no cache maintenance (a coherent
    /// board): its spans are not looked up to be synced.
    out_coherent: bool,
}

impl<T: Pod, U: Pod, R: RegisterSpace, I: IrqLine> Drop for Node<'_, '_, T, U, R, I> {
    /// A node left by a panic or an early return: the engine is halted before
    /// its rings and the queues' memory can go back, or all of it is given up
    /// to the device for good.
    fn drop(&mut self) {
        if !self.finished {
            self.fail();
        }
    }
}

impl<T: Pod, U: Pod, R: RegisterSpace, I: IrqLine> Node<'_, '_, T, U, R, I> {
    fn wait_how(&self, ch: Channel) -> Wait<'_> {
        match self.cfg.completion {
            Completion::Irq => Wait::Irq(self.engine.irq(ch)),
            Completion::Adaptive => Wait::Adaptive {
                line: self.engine.irq(ch),
                spin_until: std::time::Instant::now() + self.engine.link().spin(0),
            },
            Completion::Yield => Wait::Yield,
            _ => Wait::Poll,
        }
    }

    /// Passes an engine result on; on an error makes sure the engine is halted
    /// (or, if it cannot be, that nothing it was given is ever reused).
    fn guard<V>(&mut self, r: Result<V, axi::Error>) -> Result<V, Error> {
        r.map_err(|e| {
            self.fail();
            e.into()
        })
    }

    /// Stops the engine after an error; if it cannot be halted, the descriptor
    /// rings and the queues' memory stay the device's for good: the queues'
    /// CPU views are replaced and both queues refuse further use
    /// ([`crate::ring::Error::LostToDevice`]), so nothing the program can
    /// reach is written by the device.
    fn fail(&mut self) {
        if self.failed {
            return;
        }
        self.failed = true;
        if self.engine.dma().recover() {
            self.tx.engine_halted();
            self.rx.engine_halted();
            self.flights.clear();
            self.landings.clear();
            return;
        }
        self.tx.surrender();
        self.rx.surrender();
        let holds = self.flights.drain(..).filter_map(|f| f._input);
        let holds = holds.chain(self.landings.drain(..).filter_map(|l| l._hold));
        let holds: Vec<MemoryHold> = holds
            .chain(self.output.hold())
            .chain(self.input.hold())
            .collect();
        for h in holds {
            h.surrender();
        }
    }

    /// After the last answer: halts the engine, so that it is not left running
    /// with CURDESC in descriptor memory that goes back to the pool.
    fn finish(&mut self) -> Result<(), Error> {
        if !self.engine.dma().recover() {
            self.fail();
            return Err(Error::Config(
                "the engine could not be halted at the end of the stream".into(),
            ));
        }
        self.tx.engine_halted();
        self.rx.engine_halted();
        self.finished = true;
        Ok(())
    }

    /// With nothing in flight but S2MM descriptors left over (an early answer
    /// leaves the rest of its window's descriptors to the next answer; the last
    /// one leaves them unused), halts the engine so that no descriptor points
    /// into the output queue any more, and starts fresh rings.
    fn drain_leftovers(&mut self) -> Result<(), Error> {
        if self.landings.is_empty() || !self.flights.is_empty() || self.outstanding > 0 {
            return Ok(());
        }
        if !self.engine.dma().recover() {
            self.fail();
            return Err(Error::Config(
                "the engine could not be halted to withdraw unused S2MM descriptors".into(),
            ));
        }
        self.tx.engine_halted();
        self.rx.engine_halted();
        self.landings.clear();
        self.posted_end = self.filled;
        let irq = self.cfg.completion.sleeps();
        let slots = self.tx.slots();
        let descs = || self.engine.pool().alloc::<u32>(slots * DESC_WORDS);
        let tx = descs().map_err(dma::Error::from)?;
        let rx = descs().map_err(dma::Error::from)?;
        let tx = self.engine.dma().ring_start(Channel::Mm2s, tx, irq);
        self.tx = self.guard(tx)?;
        let rx = self.engine.dma().ring_start_coalesced(
            Channel::S2mm,
            rx,
            irq,
            s2mm_coalescing(&self.cfg),
        );
        self.rx = self.guard(rx)?;
        Ok(())
    }

    fn item_in(&self) -> usize {
        std::mem::size_of::<T>()
    }

    fn item_out(&self) -> usize {
        std::mem::size_of::<U>()
    }

    /// Puts the next window on the rings if input and output space allow
    /// ([`Node::flush`] hands it to the engine); `block` waits for them (only
    /// when nothing is in flight, so that queue growth never moves memory the
    /// device uses). Returns whether a window was posted, and whether the
    /// input has ended.
    fn post(&mut self, block: bool) -> Result<(bool, bool), Error> {
        if self.landings.is_empty() {
            // Nothing is being written: the next answer goes right after the
            // last (a gap left by an early answer is not carried on).
            self.posted_end = self.filled;
        }
        let base = self.output.position() * self.item_out() as u64;
        // While other landings are in flight, this one starts on its own
        // cache line (non-coherent board): the gap closing after an early
        // answer writes up to where the next landing starts, never into a
        // line the device may already have written.
        // (Stream positions map to the queue's memory modulo its size, a whole
        // number of pages: a position on a line boundary is one in memory.)
        let posted_end = if self.landings.is_empty() {
            self.posted_end
        } else {
            self.posted_end.next_multiple_of(self.landing_align)
        };
        let need = self.sent + self.cfg.window;
        let available = if block {
            Some(self.input.peek(need)?.len())
        } else {
            self.input.try_peek(need)?.map(<[T]>::len)
        };
        let Some(available) = available else {
            return Ok((false, false));
        };
        let (len, release, last) = if available >= need {
            (self.cfg.window, self.cfg.hop, false)
        } else {
            // The stream has ended: what is left, if it is worth a window.
            let left = available.saturating_sub(self.sent);
            if left < self.cfg.min_window.max(1) {
                return Ok((false, true));
            }
            (left, left, true)
        };
        // Output space: every descriptor posted so far, and this window's
        // (gaps after early answers still hold space until they go). No slice
        // is formed over it: the device writes some of it.
        let out_bytes = self.cfg.out_max * self.item_out();
        let reserve_items = ((posted_end - base) as usize + out_bytes) / self.item_out();
        if !self.output.reserve_for_device(reserve_items, block)? {
            return Ok((false, false));
        }
        let max = self.engine.dma().max_len();
        // S2MM first: the answer's slots, cleaned and invalidated.
        let from = ((posted_end - base) as usize) / self.item_out();
        let spans = self.output.dma_spans(from, self.cfg.out_max)?;
        if spans.len() > self.rx.slots() - 1 - self.rx.in_flight() {
            return Ok((false, false));
        }
        let inputs = self.input.dma_spans(self.sent, len)?;
        if inputs.len() > self.tx.slots() - 1 - self.tx.in_flight() {
            return Ok((false, false));
        }
        self.posted_end = posted_end;
        for s in &spans {
            if !self.out_coherent {
                self.output.sync_for_cpu(*s)?;
            }
            // SAFETY: the slots are reserved in the output queue and no CPU
            // code writes them until their S2MM descriptor completes (the node
            // commits them only then); the hold keeps the memory mapped and
            // reserved if the queue grows meanwhile; on a failure the engine is
            // halted or the memory given up for good (`fail`).
            let pushed = unsafe { self.rx.push_part(s.bus, s.bytes, max, true, true) };
            self.guard(pushed)?;
            self.landings.push_back(Landing {
                at: self.posted_end,
                bytes: s.bytes,
                _hold: self.output.hold(),
            });
            self.posted_end += s.bytes as u64;
        }
        // Then MM2S: the window where it lies in the input queue.
        for (i, s) in inputs.iter().enumerate() {
            self.input.sync_for_device(*s)?;
            // SAFETY: the items are published and not consumed until this
            // window's MM2S completes (the node releases them only then), so the
            // writer does not reuse the slots; the hold keeps the memory mapped
            // and reserved if the queue grows; on a failure the engine is halted
            // or the memory given up for good.
            let pushed = unsafe {
                self.tx
                    .push_part(s.bus, s.bytes, max, i == 0, i + 1 == inputs.len())
            };
            self.guard(pushed)?;
        }
        self.flights.push_back(Flight {
            mm2s: inputs.len(),
            release,
            _input: self.input.hold(),
        });
        self.sent += release;
        self.outstanding += 1;
        self.stats.windows += 1;
        self.stats.bytes_in += (len * self.item_in()) as u64;
        Ok((true, last))
    }

    /// Hands every window posted since the last flush to the engine: S2MM's
    /// descriptors first (the answers' slots), then MM2S's, one TAILDESC
    /// write on each channel for the whole batch (a doorbell per batch, as
    /// DPDK's burst sends ring it, not one per window).
    fn flush(&mut self) -> Result<(), Error> {
        let flushed = self.engine.dma().ring_flush(&mut self.rx);
        self.guard(flushed)?;
        let flushed = self.engine.dma().ring_flush(&mut self.tx);
        self.guard(flushed)?;
        Ok(())
    }

    /// Handles the oldest MM2S completion if there is one (waiting for it if
    /// `wait`): its window's input is released.
    fn reap_mm2s(&mut self, wait: bool) -> Result<bool, Error> {
        let Some(f) = self.flights.front() else {
            return Ok(false);
        };
        let parts = f.mm2s;
        for k in 0..parts {
            if !wait && k == 0 && self.tx.completed().is_none() {
                return Ok(false);
            }
            let how = self.wait_how(Channel::Mm2s);
            let waited = self.engine.dma().ring_wait(&self.tx, &how);
            self.guard(waited)?;
            self.tx.reclaim();
        }
        let Some(f) = self.flights.pop_front() else {
            return Ok(false);
        };
        self.released += f.release;
        Ok(true)
    }

    /// Handles the oldest S2MM completion if there is one (waiting for it if
    /// `wait`): the bytes are moved down over a gap if there is one, and a
    /// finished answer is committed.
    fn reap_s2mm(&mut self, wait: bool) -> Result<bool, Error> {
        if self.landings.is_empty() {
            return Ok(false);
        }
        let status = if wait {
            let how = self.wait_how(Channel::S2mm);
            let waited = self.engine.dma().ring_wait(&self.rx, &how);
            self.guard(waited)?
        } else {
            match self.rx.completed() {
                Some(s) => s,
                None => return Ok(false),
            }
        };
        self.rx.reclaim();
        let Some(l) = self.landings.pop_front() else {
            return Ok(false);
        };
        let n = (status & DESC_LENGTH_MASK) as usize;
        let size = self.item_out() as u64;
        let base = self.output.position() * size;
        self.answer += n as u64;
        if self.answer > (self.cfg.out_max as u64) * size {
            self.fail();
            return Err(Error::AnswerTooLong {
                out_max: self.cfg.out_max,
            });
        }
        // What the device wrote, for the CPU (nothing to do on a coherent
        // board).
        if !self.out_coherent {
            let first = ((l.at - base) / size) as usize;
            for s in self
                .output
                .dma_spans(first, (l.bytes as u64).div_ceil(size) as usize)?
            {
                self.output.sync_for_cpu(s)?;
            }
        }
        if l.at != self.filled && n > 0 {
            // A gap after an early answer: move these bytes down to close it.
            let from = (l.at - base) as usize;
            let to = (self.filled - base) as usize;
            let items = ((l.at + n as u64 - base) as usize).div_ceil(size as usize);
            let slots = self
                .output
                .try_reserve(items)?
                .ok_or_else(|| Error::Config("reserved output slots vanished".into()))?;
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(slots);
            bytes.copy_within(from..from + n, to);
            crate::copies::count(n);
            self.stats.bytes_copied += n as u64;
        }
        self.filled += n as u64;
        if status & axi::regs::DESC_STS_RXEOF != 0 {
            self.answer = 0;
            let done = self.filled - base;
            if !done.is_multiple_of(size) {
                self.fail();
                return Err(Error::PartialItem {
                    bytes: done as usize,
                    item: size as usize,
                });
            }
            // Committed with the others that landed in the same pass.
            self.complete = self.filled;
            self.outstanding = self.outstanding.saturating_sub(1);
        }
        Ok(true)
    }

    /// Hands over what the completions taken since the last call finished:
    /// the input of every window the device has read is released, and every
    /// whole answer landed is committed, one call on each queue for all of
    /// them (so a batch of completions wakes the source and the sink once).
    fn publish(&mut self) -> Result<(), Error> {
        if self.released > 0 {
            self.input.consume(self.released)?;
            self.sent -= self.released;
            self.released = 0;
        }
        let size = self.item_out() as u64;
        let base = self.output.position() * size;
        if self.complete > base {
            // The reservation covers every posted descriptor (no slice over
            // it: the device still writes the later ones).
            let reserved = ((self.posted_end - base) / size) as usize;
            if !self.output.reserve_for_device(reserved, false)? {
                return Err(Error::Config("reserved output slots vanished".into()));
            }
            let done = self.complete - base;
            self.output.commit((done / size) as usize)?;
            self.stats.bytes_out += done;
        }
        Ok(())
    }
}

/// Runs an accelerator node on `engine` (scatter-gather) until its input ends
/// and every answer is committed; returns what it did. The queues must be in
/// the DMA memory of the engine's board.
pub fn run<T, U, R, I>(
    engine: &Engine<R, I>,
    cfg: &StageConfig,
    input: &mut Input<T>,
    output: &mut Output<U>,
) -> Result<StageStats, Error>
where
    T: Pod,
    U: Pod,
    R: RegisterSpace,
    I: IrqLine,
{
    check(engine, cfg, input, output)?;
    let out_coherent = output.dma_coherent().unwrap_or(true);
    let irq = cfg.completion.sleeps();
    let slots = 2 * cfg.depth + 1;
    let descs = || engine.pool().alloc::<u32>(slots * DESC_WORDS);
    let tx = engine
        .dma()
        .ring_start(Channel::Mm2s, descs().map_err(dma::Error::from)?, irq)?;
    let rx = engine.dma().ring_start_coalesced(
        Channel::S2mm,
        descs().map_err(dma::Error::from)?,
        irq,
        s2mm_coalescing(cfg),
    )?;
    let start = output.position() * std::mem::size_of::<U>() as u64;
    let mut node = Node {
        engine,
        cfg: *cfg,
        input,
        output,
        tx,
        rx,
        flights: VecDeque::new(),
        landings: VecDeque::new(),
        sent: 0,
        posted_end: start,
        filled: start,
        answer: 0,
        outstanding: 0,
        released: 0,
        complete: start,
        stats: StageStats::default(),
        failed: false,
        finished: false,
        landing_align: landing_align::<U>(out_coherent),
        out_coherent,
    };
    let result = drive(&mut node).and_then(|()| node.finish());
    if result.is_err() {
        node.fail();
    }
    result.map(|()| node.stats)
}

/// Where a landing may start while others are in flight: a whole item, and on
/// a non-coherent board a whole cache line too.
fn landing_align<U>(coherent: bool) -> u64 {
    let item = std::mem::size_of::<U>() as u64;
    if coherent {
        return item;
    }
    let line = crate::mem::ALIGN as u64;
    let (mut a, mut b) = (item, line);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    item / a * line
}

/// The node's loop: keep `depth` windows in flight (the windows posted in a
/// pass handed over with one doorbell per channel), take every completion
/// there is before handing them over together, wait only when nothing else
/// can move, and then for the oldest answer (its window's input has been
/// read by then), so that one wake-up takes a window's MM2S and S2MM both.
fn drive<T: Pod, U: Pod, R: RegisterSpace, I: IrqLine>(
    node: &mut Node<'_, '_, T, U, R, I>,
) -> Result<(), Error> {
    let mut ended = false;
    loop {
        node.publish()?;
        while !ended && node.outstanding < node.cfg.depth {
            let idle = node.flights.is_empty() && node.outstanding == 0;
            if idle {
                node.drain_leftovers()?;
            }
            let (sent, last) = node.post(idle)?;
            ended |= last;
            if !sent {
                break;
            }
        }
        // Every window posted in this pass goes to the engine at once,
        // before anything is reaped or waited for.
        node.flush()?;
        if node.flights.is_empty() && node.outstanding == 0 {
            if ended {
                node.drain_leftovers()?;
                return Ok(());
            }
            continue;
        }
        let mut moved = false;
        while node.reap_s2mm(false)? | node.reap_mm2s(false)? {
            moved = true;
        }
        if moved {
            continue;
        }
        // Nothing moved: wait for the oldest answer, or with none posted
        // for the oldest window's MM2S.
        if !node.landings.is_empty() {
            node.reap_s2mm(true)?;
        } else {
            node.reap_mm2s(true)?;
        }
    }
}

/// The S2MM interrupt coalescing of an accelerator node's rings (and of a
/// device-only run measured against it): where completions sleep and
/// `depth` windows are in flight, one interrupt per quarter of them (at most
/// 255, PG021's IRQThreshold), with the delay timer set to 8 ticks (10 us
/// on the emulated board) so that a last partial batch, or a stream that
/// trickles, still wakes the node; polled completions take none.
pub fn s2mm_coalescing(cfg: &StageConfig) -> Coalescing {
    let threshold = (cfg.depth / 4).clamp(1, 255) as u8;
    if !cfg.completion.sleeps() || threshold == 1 {
        return Coalescing::NONE;
    }
    Coalescing {
        threshold,
        delay: 8,
    }
}

/// Everything that can be refused before the engine is touched.
fn check<T: Pod, U: Pod, R: RegisterSpace, I: IrqLine>(
    engine: &Engine<R, I>,
    cfg: &StageConfig,
    input: &Input<T>,
    output: &Output<U>,
) -> Result<(), Error> {
    if cfg.window == 0 || cfg.hop == 0 || cfg.out_max == 0 || cfg.depth == 0 {
        return Err(Error::Config(format!(
            "window {}, hop {}, out_max {} and depth {} must all be at least 1",
            cfg.window, cfg.hop, cfg.out_max, cfg.depth
        )));
    }
    if cfg.hop > cfg.window {
        return Err(Error::Config(format!(
            "hop {} is longer than the window of {}: items would be skipped",
            cfg.hop, cfg.window
        )));
    }
    if cfg.completion == Completion::Proxy {
        return Err(dma::Error::ProxyOnly.into());
    }
    let max = engine.dma().max_len();
    for (what, bytes) in [
        ("window", cfg.window * std::mem::size_of::<T>()),
        ("answer", cfg.out_max * std::mem::size_of::<U>()),
    ] {
        if bytes > max {
            return Err(Error::TooLong { what, bytes, max });
        }
    }
    // The queues must be in DMA memory (asked of the first slot), the
    // engine's own pool's.
    input.dma_spans(0, 1)?;
    output.dma_spans(0, 1)?;
    same_memory(engine, input.dma_memory_id(), output.dma_memory_id())?;
    // Windows in flight must fit the queues.
    let in_need = cfg.window + (cfg.depth - 1) * cfg.hop;
    if in_need > input.capacity() {
        return Err(Error::Config(format!(
            "{} windows of {} items ({in_need} items) do not fit the input queue of {}",
            cfg.depth,
            cfg.window,
            input.capacity()
        )));
    }
    if cfg.depth * cfg.out_max > output.capacity() {
        return Err(Error::Config(format!(
            "{} answers of {} items do not fit the output queue of {}",
            cfg.depth,
            cfg.out_max,
            output.capacity()
        )));
    }
    Ok(())
}

/// Accepts queues only in `engine`'s own pool's DMA memory: a queue in
/// another pool's (the same bus address would be other memory to it) or in
/// ordinary memory (`None`: no bus address at all) is refused by name.
pub(crate) fn same_memory<R: RegisterSpace, I: IrqLine>(
    engine: &Engine<R, I>,
    input: Option<u64>,
    output: Option<u64>,
) -> Result<(), Error> {
    let engine_pool = engine.pool().id();
    for (port, id) in [("input", input), ("output", output)] {
        match id {
            Some(q) if q == engine_pool => {}
            Some(queue_pool) => {
                return Err(Error::ForeignQueue {
                    port,
                    queue_pool,
                    engine_pool,
                });
            }
            None => return Err(Error::NotEngineMemory { port }),
        }
    }
    Ok(())
}

/// Adds an accelerator node `name` to `g`: `engine` reads `input` and writes
/// `output` as `cfg` says. The node's statistics go to `stats` when it ends.
pub fn add_node<T, U, R, I>(
    g: &mut graph::Graph,
    name: &str,
    engine: Engine<R, I>,
    cfg: StageConfig,
    mut input: Input<T>,
    mut output: Output<U>,
    stats: std::sync::Arc<std::sync::Mutex<StageStats>>,
) -> Result<(), graph::Error>
where
    T: Pod + Send,
    U: Pod + Send,
    R: RegisterSpace + Send + 'static,
    I: IrqLine + Send + 'static,
{
    g.node(name, move || {
        let s = run(&engine, &cfg, &mut input, &mut output)?;
        *stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = s;
        Ok(())
    })
}
