//! `dmaflow bench net`: a dmaflow ZeroMQ edge between two processes against
//! the binding's own ceiling and against GNU Radio's gr-zeromq, each point
//! saying what its ends do (`does`, in the report and the JSON).
//!
//! For each size, the same bytes of `u32` counters cross loopback TCP once
//! per point per round, every checksum verified: dmaflow's ends
//! (`dmaflow_net`'s sink and source, the receiver in a child process
//! `dmaflow net-peer`), bare PUSH/PULL of the same libzmq (the ceiling),
//! dmaflow batching whole items into messages (up to the sink's default, or
//! capped at the mean size GNU Radio's `push_sink` sent in this run at this
//! item size), GNU Radio's lean ends and the two crossed edges; what each
//! point's ends do is [`Way::does`].
//!
//! The frame runs the rounds (every point once a round, the order reversed
//! every other round) and keeps each round's sample. Time is the receiver's,
//! from its first data to its last; CPU is the receiving process's. Every
//! point's sending end runs on the first core and its receiving end on the
//! second, and dmaflow's sender, like the raw loop, builds one message and
//! waits for its peer before it goes on, so that no point starts its timed
//! span with a backlog the others lack.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use dmaflow::graph::Graph;
use serde_json::Value;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Point, Row};
use super::harness::{Setup, Tier, bytes_label};
use super::peers::{Peer, ScratchDir, gnuradio_here, series, tmpfs};
use super::report::Target;
use super::spread::{Ratio, Spread};

/// `dmaflow bench net`.
pub static EXPERIMENT: Bench<Config, usize, Sample> = Bench {
    name: "net",
    question: "A dmaflow ZeroMQ edge between two processes against bare PUSH/PULL.",
    conditions: Conditions {
        timed: "the receiver from its first data to its last (GNU Radio's receiver: its \
                sink's count looked at every 0.5 ms); CPU the receiving process's; every \
                point's sender on one core, its receiver on the other",
        against: "bare PUSH/PULL of the same libzmq (the ceiling), and GNU Radio's \
                  push_sink -> pull_source, lean (what each point does is in its row), at \
                  GNU Radio's own message size, with both crossed edges",
        model: "none",
        paper: "gr-zeromq over loopback TCP on one two-core machine, every process sharing \
                the two cores",
    },
    emulator_only: "it measures network edges on this machine, not a DMA device",
    heading,
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// The experiment's size.
#[derive(Debug, Clone)]
pub struct Config {
    /// Message sizes in bytes (multiples of 4: the items are `u32`).
    pub sizes: Vec<usize>,
    /// Bytes per measurement: 100 000 messages, within these bounds.
    pub bytes: (usize, usize),
    /// Rounds per point.
    pub rounds: usize,
    /// Run dmaflow's and the raw receiver on a thread of this process
    /// instead of a child process (tests, where the binary is not
    /// `dmaflow`); GNU Radio's ends are processes of their own either way.
    pub in_process: bool,
    /// What the points share over the run, made when first needed.
    shared: Arc<Mutex<Shared>>,
}

/// What the points share over a run: GNU Radio's counters file and the
/// directory its receiver writes in, and per item size GNU Radio's mean
/// message size (measured once, before that size's first point).
#[derive(Default)]
struct Shared {
    dir: Option<ScratchDir>,
    data: Option<PathBuf>,
    caps: Vec<(usize, usize)>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("data", &self.data)
            .field("caps", &self.caps)
            .finish()
    }
}

impl Config {
    /// Bytes per measurement with messages of `size` bytes.
    pub fn bytes_for(&self, size: usize) -> usize {
        (size.saturating_mul(100_000)).clamp(self.bytes.0, self.bytes.1) / size.max(4) * size.max(4)
    }

    /// The size `setup` asks for.
    pub fn at(setup: &Setup) -> Self {
        let (sizes, bytes, rounds) = match setup.tier {
            Tier::Full => (
                vec![64, 1 << 10, 16 << 10, 64 << 10, 1 << 20],
                (16 << 20, 256 << 20),
                5,
            ),
            Tier::Quick => (vec![64, 64 << 10, 1 << 20], (4 << 20, 32 << 20), 3),
            Tier::Tiny => (vec![64, 4096], (1 << 20, 1 << 20), 2),
        };
        Config {
            sizes,
            bytes,
            rounds,
            in_process: false,
            shared: Arc::default(),
        }
    }

    /// GNU Radio's mean message size at item size `size` (`BATCHED_BYTES`
    /// without GNU Radio) and its files (the counters, the directory its
    /// receiver writes in), made or measured at the first call for a size.
    fn prepared(&self, size: usize) -> Result<(usize, Option<(PathBuf, PathBuf)>), Error> {
        if !gnuradio() {
            return Ok((BATCHED_BYTES, None));
        }
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.dir.is_none() {
            // One file of the largest measurement's counters: GNU Radio's
            // sender reads as much of it as a measurement sends.
            let dir = ScratchDir::under(&tmpfs(), "dmaflow-net")?;
            let most = self.sizes.iter().map(|&s| self.bytes_for(s)).max();
            shared.data = Some(counters(dir.path(), most.unwrap_or(0))?);
            shared.dir = Some(dir);
        }
        let files = shared
            .data
            .clone()
            .zip(shared.dir.as_ref().map(|d| d.path().to_path_buf()));
        if let Some(&(_, cap)) = shared.caps.iter().find(|(s, _)| *s == size) {
            return Ok((cap, files));
        }
        // GNU Radio's message size at this item size (dmaflow's receiver
        // counts the messages) caps dmaflow's.
        let f = files.as_ref().map(|(d, o)| (d.as_path(), o.as_path()));
        let got = measure_way(self, Way::GnuradioToDmaflow, size, size, f)?;
        let cap = (self.bytes_for(size) / got.messages.max(1) as usize).max(size);
        shared.caps.push((size, cap));
        Ok((cap, files))
    }
}

/// GNU Radio's ends, run by Debian's Python where GNU Radio is installed.
const GNURADIO_SCRIPT: &str = include_str!("../../peers/gnuradio_zmq_bench.py");

/// The longest a measurement's peer process may take.
const PEER_LIMIT: Duration = Duration::from_secs(120);

/// The longest GNU Radio's receiver may take (256 MiB at 50 MB/s is 5 s, its
/// start about 1 s): past it the round counts as a stall of GNU Radio's
/// receiver, reported in its row, and the run goes on.
const GR_RX_LIMIT: Duration = Duration::from_secs(30);

/// The `peer` of the error a stalled GNU Radio receiver gives.
const STALLED: &str = "stalled GNU Radio receiver";

/// A way through the network: a point's series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// dmaflow's ends, one message per `size` bytes.
    Dmaflow,
    /// dmaflow's ends, the receiver copying into a queue a node reads.
    Queued,
    /// Bare PUSH/PULL loops, one message per `size` bytes.
    Raw,
    /// dmaflow's ends, `size`-byte items batched up to 256 KiB a message.
    Batched,
    /// dmaflow's ends, `size`-byte items batched up to GNU Radio's mean
    /// message size.
    Capped,
    /// GNU Radio's lean ends.
    Gnuradio,
    /// dmaflow's capped sender into GNU Radio's receiver.
    DmaflowToGnuradio,
    /// GNU Radio's sender into dmaflow's receiver.
    GnuradioToDmaflow,
}

impl Way {
    /// Its name in tables and JSON, and what its ends do in their own words
    /// (sender | receiver).
    fn texts(self) -> (&'static str, &'static str) {
        match self {
            Way::Dmaflow => (
                "dmaflow",
                "dmaflow: a generator node writes u32 counters into a queue; the dmaflow_net sink \
                 sends one message per size bytes from the queue's slots (no copy; the slots \
                 held until ZeroMQ lets go; a message under 512 B is copied, the sink's default \
                 Edge::COPY_BELOW) | the dmaflow_net source (another process) runs the \
                 checksum on each message where it landed (add_source_with: no queue, no copy)",
            ),
            Way::Queued => (
                "dmaflow-queue",
                "the same sender as dmaflow | the dmaflow_net source (another process) copies \
                 each message into a queue; a node sums every u32 (checksum verified)",
            ),
            Way::Raw => (
                "raw",
                "bare libzmq PUSH/PULL: a loop writes u32 counters into each message and sends \
                 it | a loop (another process) receives each message and sums every u32 \
                 (checksum verified)",
            ),
            Way::Batched => (
                "dmaflow-batched",
                "dmaflow, size-byte items, every whole item readable in one message up to 256 KiB \
                 (the sink's default) | the same receiver as dmaflow",
            ),
            Way::Capped => (
                "dmaflow-capped",
                "dmaflow, size-byte items, messages capped at the mean size GNU Radio's push_sink \
                 sent at this item size in this run (message_bytes) | the same receiver as \
                 dmaflow",
            ),
            Way::Gnuradio => (
                "gnuradio",
                "GNU Radio 3.10, lean: file_source (the same u32 counters from a tmpfs file, \
                 read() into its buffer) -> push_sink | pull_source (another process) -> \
                 file_sink into tmpfs (every byte written once), compared byte for byte after \
                 the timed span; blocks' poll timeout 1 ms (gr-zeromq's default 100 ms stalled \
                 GNU Radio into GNU Radio by about one timeout in some runs); its time polled \
                 every 0.5 ms",
            ),
            Way::DmaflowToGnuradio => (
                "dmaflow->gnuradio",
                "dmaflow's capped sender (a generator node, the dmaflow_net sink sending from \
                 the queue's slots) -> GNU Radio's receiver (pull_source -> file_sink, compared byte \
                 for byte)",
            ),
            Way::GnuradioToDmaflow => (
                "gnuradio->dmaflow",
                "GNU Radio's sender (file_source -> push_sink) -> dmaflow's receiver (the \
                 dmaflow_net source summing every u32 where each message landed, checksum \
                 verified; it counts the messages: GNU Radio's message size)",
            ),
        }
    }

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        self.texts().0
    }

    /// What its ends do, in their own words.
    pub fn does(self) -> &'static str {
        self.texts().1
    }

    /// Whether a GNU Radio end takes part.
    fn gnuradio(self) -> bool {
        matches!(
            self,
            Way::Gnuradio | Way::DmaflowToGnuradio | Way::GnuradioToDmaflow
        )
    }
}

/// The ways through the network measured: dmaflow, raw and batched always;
/// with GNU Radio installed, GNU Radio's, the crossed edges and dmaflow
/// capped at GNU Radio's message size.
fn ways() -> Vec<Way> {
    let mut p = vec![Way::Dmaflow, Way::Queued, Way::Raw, Way::Batched];
    if gnuradio() {
        p.extend([
            Way::Capped,
            Way::Gnuradio,
            Way::DmaflowToGnuradio,
            Way::GnuradioToDmaflow,
        ]);
    }
    p
}

/// Whether GNU Radio with gr-zeromq is installed, looked at once (each look
/// starts a Python).
fn gnuradio() -> bool {
    static HERE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HERE.get_or_init(gnuradio_here)
}

/// Every way, whether measured here or not.
const ALL_WAYS: [Way; 8] = [
    Way::Dmaflow,
    Way::Queued,
    Way::Raw,
    Way::Batched,
    Way::Capped,
    Way::Gnuradio,
    Way::DmaflowToGnuradio,
    Way::GnuradioToDmaflow,
];

/// The way a point's series names.
fn way_of(series: &str) -> Option<Way> {
    ALL_WAYS.into_iter().find(|w| w.name() == series)
}

/// Every way at every size.
fn points(cfg: &Config) -> Vec<Point<usize>> {
    let mut v = Vec::new();
    for &at in &cfg.sizes {
        for w in ways() {
            v.push(Point {
                series: w.name(),
                at,
            });
        }
    }
    v
}

/// One measurement of one point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Bytes delivered.
    pub bytes: usize,
    /// The receiver's seconds (`NaN` where GNU Radio's receiver stalled:
    /// the round is left out of the figures and ratios).
    pub seconds: f64,
    /// The receiving process's CPU seconds over the same span (`NaN` for a
    /// stall).
    pub cpu: f64,
    /// Mean message bytes where known (the messages dmaflow's receiver
    /// counted, or the cap dmaflow's sender used).
    pub message_bytes: Option<f64>,
    /// Payload bytes copied (by both ends) per byte delivered, where both
    /// ends are dmaflow's or the raw loops.
    pub copies: Option<f64>,
    /// Whether GNU Radio's receiver stalled.
    pub stalled: bool,
}

impl Sample {
    /// Megabytes per second (`NaN` for a stall).
    fn mbps(&self) -> f64 {
        self.bytes as f64 / self.seconds / 1e6
    }
}

/// A point's row.
type NetRow = Row<usize, Sample>;

/// The way of a row.
fn way(r: &NetRow) -> Way {
    way_of(r.point.series).unwrap_or(Way::Raw)
}
/// What a receiver found.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Received {
    /// Items received.
    pub items: u64,
    /// Wrapping sum of the items.
    pub checksum: u32,
    /// From the first data to the last.
    pub seconds: f64,
    /// The receiving process's CPU time meanwhile.
    pub cpu: f64,
    /// Messages received (0 where not counted).
    pub messages: u64,
    /// Payload bytes the receiving end copied (its edge's count; 0 for the
    /// raw loop, which reads each message in place).
    pub copied: u64,
}

/// A receiver's count: the items, their wrapping sum and the messages, and
/// the span from the first arrival (data or the end of the stream) to the
/// last data marked, or else to the end, on the wall clock and the process's
/// CPU clock.
#[derive(Default)]
struct Tally {
    got: Received,
    first: Option<(Instant, f64)>,
    last: Option<(Instant, f64)>,
}

impl Tally {
    /// Now on both clocks.
    fn now() -> (Instant, f64) {
        let cpu = dmaflow::platform::cpu::process_cpu_time;
        (Instant::now(), cpu().as_secs_f64())
    }

    /// Something arrived: the span starts, if it has not.
    fn arrived(&mut self) {
        self.first.get_or_insert_with(Self::now);
    }

    /// One more message of `n` items summing to `sum`.
    fn add(&mut self, n: usize, sum: u32) {
        self.got.items += n as u64;
        self.got.checksum = self.got.checksum.wrapping_add(sum);
        self.got.messages += 1;
    }

    /// What was received.
    fn received(self) -> Received {
        let (end, cpu1) = self.last.unwrap_or_else(Self::now);
        let (start, cpu0) = self.first.unwrap_or((end, cpu1));
        let (seconds, cpu) = ((end - start).as_secs_f64(), cpu1 - cpu0);
        Received {
            seconds,
            cpu,
            ..self.got
        }
    }
}

/// The receiving end, as `dmaflow net-peer` runs it: `point` is `dmaflow`
/// (a graph: network source -> checksum node), `from-gnuradio` (the same,
/// its stream ending 1 s after the last message, as GNU Radio sends no end
/// of stream) or `raw` (a PULL socket).
pub fn receive(point: &str, endpoint: &str) -> Result<Received, String> {
    let at = dmaflow_net::Endpoint::parse(endpoint).map_err(|e| e.to_string())?;
    if point == "raw" {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::PULL).map_err(|e| e.to_string())?;
        s.set_rcvhwm(16).map_err(|e| e.to_string())?;
        s.connect(at.as_str()).map_err(|e| e.to_string())?;
        let mut tally = Tally::default();
        loop {
            let m = s.recv_msg(0).map_err(|e| e.to_string())?;
            tally.arrived();
            if m.is_empty() {
                break;
            }
            let sum = m.chunks_exact(4).fold(0u32, |a, c| {
                a.wrapping_add(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            });
            tally.add(m.len() / 4, sum);
        }
        return Ok(tally.received());
    }
    let from_gnuradio = point == "from-gnuradio";
    if !from_gnuradio && point != "dmaflow" && point != "dmaflow-queue" {
        return Err(format!(
            "{point:?} is not a receiver: dmaflow, dmaflow-queue, from-gnuradio or raw"
        ));
    }
    if point != "dmaflow-queue" {
        return receive_in_place(at, from_gnuradio);
    }
    let mut g = Graph::new();
    let (out, mut inp) = g
        .connect_with_capacity::<u32>(("net", "out"), ("sum", "in"), 1 << 20)
        .map_err(|e| e.to_string())?;
    let mut edge = dmaflow_net::Edge::source(at);
    if from_gnuradio {
        edge.idle_timeout = Some(Duration::from_secs(1));
    }
    let stats = dmaflow_net::add_source(&mut g, "net", edge, out).map_err(|e| e.to_string())?;
    let (put, result) = std::sync::mpsc::channel();
    g.node("sum", move || {
        let mut tally = Tally::default();
        loop {
            let s = inp.peek(1)?;
            tally.arrived();
            if s.is_empty() {
                break;
            }
            let n = s.len();
            tally.add(n, s.iter().fold(0u32, |a, &x| a.wrapping_add(x)));
            inp.consume(n)?;
            if from_gnuradio {
                // The stream ends a second after this: the last data's
                // instant is the end of the timed span.
                tally.last = Some(Tally::now());
            }
        }
        let _ = put.send(tally.received());
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())?;
    let r = result.try_recv();
    let mut r = r.map_err(|_| "the receiver found nothing".to_string())?;
    r.messages = stats.snapshot().0;
    r.copied = stats.copied.load(std::sync::atomic::Ordering::Relaxed);
    Ok(r)
}

/// dmaflow's receiver whose checksum runs on each message where it landed
/// (`dmaflow_net::add_source_with`): no queue, no copy.
fn receive_in_place(at: dmaflow_net::Endpoint, from_gnuradio: bool) -> Result<Received, String> {
    let mut g = Graph::new();
    let mut edge = dmaflow_net::Edge::source(at);
    if from_gnuradio {
        edge.idle_timeout = Some(Duration::from_secs(1));
    }
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally::default()));
    let keep = tally.clone();
    let stats = dmaflow_net::add_source_with::<u32, _>(&mut g, "net", edge, move |s| {
        if s.is_empty() {
            return Ok(());
        }
        let mut t = keep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.arrived();
        t.add(s.len(), s.iter().fold(0u32, |a, &x| a.wrapping_add(x)));
        if from_gnuradio {
            // The stream ends a second after this: the last data's
            // instant is the end of the timed span.
            t.last = Some(Tally::now());
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())?;
    let t = std::mem::take(
        &mut *tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut r = t.received();
    r.messages = stats.snapshot().0;
    r.copied = stats.copied.load(std::sync::atomic::Ordering::Relaxed);
    Ok(r)
}

/// Sends `bytes` as `u32` counters at `endpoint` (bound), then the end of
/// stream: by bare loops in messages of `size` bytes, or by dmaflow's sink
/// with at most `max_items` `u32` items a message. Returns the payload
/// bytes the sending end copied (the raw loop writes its counters straight
/// into each message: none).
fn send(
    max_items: Option<usize>,
    endpoint: &str,
    size: usize,
    bytes: usize,
) -> Result<u64, String> {
    let at = dmaflow_net::Endpoint::parse(endpoint).map_err(|e| e.to_string())?;
    let items = bytes / 4;
    let Some(max_items) = max_items else {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::PUSH).map_err(|e| e.to_string())?;
        s.set_sndhwm(16).map_err(|e| e.to_string())?;
        s.set_linger(5000).map_err(|e| e.to_string())?;
        s.bind(at.as_str()).map_err(|e| e.to_string())?;
        let per = size / 4;
        let mut next = 0u32;
        let mut sent = 0;
        while sent < items {
            let n = per.min(items - sent);
            let mut m = zmq::Message::with_size(n * 4);
            for c in m.chunks_exact_mut(4) {
                c.copy_from_slice(&next.to_le_bytes());
                next = next.wrapping_add(1);
            }
            s.send(m, 0).map_err(|e| e.to_string())?;
            sent += n;
        }
        s.send(Vec::<u8>::new(), 0).map_err(|e| e.to_string())?;
        return Ok(0);
    };
    let mut g = Graph::new();
    // Room for eight whole messages: the sink sends from the queue's slots
    // and gets them back only once ZeroMQ has let go of each message, so
    // the queue bounds what is in flight (raw ZeroMQ has its high-water
    // mark's worth, 16 messages, queued); and a sink whose message is
    // larger than its queue waits for ever (see BENCHMARKS.md, "Net").
    let capacity = (1usize << 18).max(8 * max_items).next_power_of_two();
    let (mut out, inp) = g
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), capacity)
        .map_err(|e| e.to_string())?;
    let mut edge = dmaflow_net::Edge::sink(at);
    edge.max_items = max_items.max(1);
    let stats = dmaflow_net::add_sink(&mut g, "net", edge, inp).map_err(|e| e.to_string())?;
    // The producer writes in its own batches of whole `size`-byte items;
    // the edge cuts them into messages of what is readable, up to
    // `max_items` (whole items too). A batch that ended mid-item would let a
    // message end mid-item, which GNU Radio's receiver (an item of `size`
    // bytes) refuses: its pull_source throws and takes no more.
    let item = (size / 4).max(1);
    let per = (1usize << 14).div_ceil(item) * item;
    let first = (max_items.max(1)).min(items);
    let sink = stats.clone();
    g.node("count", move || {
        let mut next = 0u32;
        let mut sent = 0;
        while sent < items {
            if sent >= first {
                // One message ahead of the peer, as the raw loop is (its
                // first send waits for the peer with that message built):
                // the queue is not filled before the receiver is there, so
                // no backlog reaches it in one burst at the start of its
                // timed span.
                wait_for_first_message(&sink);
            }
            let s = out.reserve(per.min(items - sent))?;
            for x in s.iter_mut() {
                *x = next;
                next = next.wrapping_add(1);
            }
            let n = s.len();
            out.commit(n)?;
            sent += n;
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())?;
    Ok(stats.copied.load(std::sync::atomic::Ordering::Relaxed))
}

/// Waits (at most [`PEER_LIMIT`]) until `stats`' sink has sent a message:
/// a peer is connected.
fn wait_for_first_message(stats: &dmaflow_net::Stats) {
    let deadline = Instant::now() + PEER_LIMIT;
    while stats.messages.load(std::sync::atomic::Ordering::Relaxed) == 0
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Runs `f` on the calling thread restricted to the `i`-th core this process
/// may use (modulo their number), then gives the thread its cores back; the
/// threads and processes started meanwhile keep that core. Every point's
/// sending end runs on core 0 and its receiving end on core 1, so that no
/// point's ends share a core more or less often than another's.
fn on_core<T>(i: usize, f: impl FnOnce() -> T) -> T {
    use dmaflow::platform::cpu::{allowed_cores, pin};
    let before = allowed_cores(None).unwrap_or_default();
    if let Some(&c) = before.get(i % before.len().max(1)) {
        let _ = pin(None, &[c]);
    }
    let out = f();
    if !before.is_empty() {
        let _ = pin(None, &before);
    }
    out
}

/// The core of a point's sending end (see [`on_core`]).
const SENDER_CORE: usize = 0;

/// The core of a point's receiving end.
const RECEIVER_CORE: usize = 1;

/// The largest message of the batched point: the network sink's default
/// (`Edge::max_items` of `u32`s), or one item where an item is larger.
const BATCHED_BYTES: usize = 1 << 18;

/// `u32` items a message of whole `size`-byte items up to `cap` bytes holds
/// (at least one item).
fn items_for(size: usize, cap: usize) -> usize {
    let per_item = (size / 4).max(1);
    (cap / 4 / per_item).max(1) * per_item
}

/// Writes a file of `bytes` bytes of `u32` counters (0, 1, 2, ...) in `dir`,
/// what GNU Radio's sender sends and its receiver's output is compared with.
fn counters(dir: &Path, bytes: usize) -> Result<PathBuf, Error> {
    let path = dir.join(format!("counters-{bytes}.u32"));
    let data: Vec<u8> = (0..(bytes / 4) as u32).flat_map(u32::to_le_bytes).collect();
    std::fs::write(&path, data).map_err(Error::io(path.display()))?;
    Ok(path)
}

/// Waits for GNU Radio's receiver and reads its line.
fn gnuradio_received(rx: Peer, bytes: usize, size: usize) -> Result<Received, Error> {
    let out = rx.wait_within(GR_RX_LIMIT).map_err(|e| match e {
        Error::Peer { reason, .. } => Error::Peer {
            peer: STALLED,
            reason,
        },
        other => other,
    })?;
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let f: Vec<f64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let fail = |why: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        Error::peer("gnuradio")(format!(
            "receiver {why} ({}): said {line:?}; {stderr}",
            out.status
        ))
    };
    if !out.status.success() || f.len() != 4 {
        return Err(fail("failed"));
    }
    if f[3] != 1.0 || f[2] as usize != bytes / size {
        return Err(fail("received other data than was sent"));
    }
    Ok(Received {
        items: (bytes / 4) as u64,
        checksum: series(0, (bytes / 4) as u64),
        seconds: f[0],
        cpu: f[1],
        messages: 0,
        copied: 0,
    })
}

/// Closes GNU Radio's sender's standard input and waits for it.
fn gnuradio_done(mut tx: Peer) -> Result<(), Error> {
    drop(tx.stdin());
    let out = tx.wait_within(PEER_LIMIT)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = format!("sender failed ({}): {}", out.status, stderr.trim());
        return Err(Error::peer("gnuradio")(why));
    }
    Ok(())
}

/// A receiver at work: dmaflow's or the raw one ([`receive`]'s `point`) in
/// a child process (`dmaflow net-peer`) or on a thread of this one, or GNU
/// Radio's.
enum Receiver {
    Thread(std::thread::JoinHandle<Result<Received, String>>),
    Child(Peer),
    Gnuradio(Peer),
}

impl Receiver {
    /// Starts the receiver `point` at `endpoint`.
    fn start(cfg: &Config, point: &str, endpoint: &str) -> Result<Receiver, Error> {
        on_core(RECEIVER_CORE, || Self::start_here(cfg, point, endpoint))
    }

    /// [`Receiver::start`] on the calling thread's cores.
    fn start_here(cfg: &Config, point: &str, endpoint: &str) -> Result<Receiver, Error> {
        if cfg.in_process {
            let (point, at) = (point.to_string(), endpoint.to_string());
            let thread = std::thread::spawn(move || receive(&point, &at));
            return Ok(Receiver::Thread(thread));
        }
        let exe = std::env::current_exe().map_err(Error::io("the dmaflow binary"))?;
        let mut cmd = Command::new(exe);
        cmd.args(["net-peer", "--point", point, "--endpoint", endpoint]);
        let peer = Peer::spawn(&mut cmd, Stdio::null(), "dmaflow net-peer")?;
        Ok(Receiver::Child(peer))
    }

    /// What it received of `bytes` in `size`-byte messages, `point` naming
    /// it in an error.
    fn received(self, point: Way, bytes: usize, size: usize) -> Result<Received, Error> {
        let fail = Error::peer(point.name());
        let out = match self {
            Receiver::Thread(t) => {
                let got = t.join().map_err(|_| Error::Panicked("net receiver"))?;
                return got.map_err(fail);
            }
            Receiver::Child(child) => child.wait_within(PEER_LIMIT)?,
            Receiver::Gnuradio(rx) => return gnuradio_received(rx, bytes, size),
        };
        if !out.status.success() {
            return Err(fail(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        let line = out.stdout.lines().next().and_then(Result::ok);
        let line = line.unwrap_or_default();
        parse_received(&line).ok_or_else(|| fail(format!("net-peer said {line:?}")))
    }
}

/// One measurement of `point` at `size`; `cap` is GNU Radio's mean message
/// size at this item size (bytes), `files` the counters file GNU Radio's
/// ends use and the directory its receiver writes in.
fn measure_way(
    cfg: &Config,
    point: Way,
    size: usize,
    cap: usize,
    files: Option<(&Path, &Path)>,
) -> Result<Received, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(Error::io("a free TCP port"))?
        .port();
    let endpoint = format!("tcp://127.0.0.1:{port}");
    let fail = Error::peer::<String>(point.name());
    let bytes = cfg.bytes_for(size);
    let sender = match point {
        Way::Raw => None,
        Way::Dmaflow | Way::Queued => Some(items_for(size, size)),
        Way::Batched => Some(items_for(size, BATCHED_BYTES)),
        _ => Some(items_for(size, cap)),
    };
    let (data, out) = match (point.gnuradio(), files) {
        (false, _) => (Path::new(""), PathBuf::new()),
        (true, Some((data, dir))) => (data, dir.join("received.bin")),
        (true, None) => return Err(fail("GNU Radio's files are missing".into())),
    };
    // GNU Radio's script: its sender binds and keeps its socket open until
    // its standard input is closed; its receiver connects.
    let gnuradio = |role| {
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", GNURADIO_SCRIPT, role, &size.to_string()]);
        if role == "tx" {
            let cmd = cmd.arg(data).arg(&endpoint).arg(bytes.to_string());
            let spawn = || Peer::spawn(cmd, Stdio::piped(), "GNU Radio's sender");
            return on_core(SENDER_CORE, spawn);
        }
        cmd.arg(bytes.to_string())
            .arg(&endpoint)
            .arg(&out)
            .arg(data);
        let spawn = || Peer::spawn(&mut cmd, Stdio::null(), "GNU Radio's receiver");
        on_core(RECEIVER_CORE, spawn)
    };
    let rx = match point {
        Way::Gnuradio | Way::DmaflowToGnuradio => Receiver::Gnuradio(gnuradio("rx")?),
        Way::Raw => Receiver::start(cfg, "raw", &endpoint)?,
        Way::GnuradioToDmaflow => Receiver::start(cfg, "from-gnuradio", &endpoint)?,
        Way::Queued => Receiver::start(cfg, "dmaflow-queue", &endpoint)?,
        _ => Receiver::start(cfg, "dmaflow", &endpoint)?,
    };
    let got = match point {
        Way::Gnuradio | Way::GnuradioToDmaflow => {
            let tx = gnuradio("tx")?;
            // A failed receiver leaves the sender blocked: it is killed.
            let got = rx.received(point, bytes, size)?;
            gnuradio_done(tx)?;
            got
        }
        Way::DmaflowToGnuradio => {
            // The sender on a thread, so that a stalled receiver is waited
            // for with a limit; once it is killed, dmaflow's sink gives up
            // within its grace (5 s), or is left behind.
            let (done, finished) = std::sync::mpsc::channel();
            let at = endpoint.clone();
            on_core(SENDER_CORE, || {
                std::thread::spawn(move || {
                    let _ = done.send(send(sender, &at, size, bytes));
                })
            });
            let got = rx.received(point, bytes, size);
            let sent = finished
                .recv_timeout(Duration::from_secs(15))
                .unwrap_or_else(|_| Err("dmaflow's sender did not finish".into()));
            let mut got = got?;
            got.copied += sent.map_err(fail)?;
            got
        }
        _ => {
            let copied = on_core(SENDER_CORE, || send(sender, &endpoint, size, bytes));
            let copied = copied.map_err(fail)?;
            let mut got = rx.received(point, bytes, size)?;
            got.copied += copied;
            got
        }
    };
    if point.gnuradio() {
        let _ = std::fs::remove_file(&out);
    }
    let items = (bytes / 4) as u64;
    let expected = series(0, items);
    if got.items != items || got.checksum != expected {
        return Err(Error::Corrupted {
            what: format!(
                "net {} {size} B: {} of {items} items",
                point.name(),
                got.items
            ),
            got: got.checksum,
            expected,
        });
    }
    Ok(got)
}

/// The line `dmaflow net-peer` prints.
pub fn received_line(r: &Received) -> String {
    format!(
        "{} {} {} {} {} {}",
        r.items, r.checksum, r.seconds, r.cpu, r.messages, r.copied
    )
}

fn parse_received(line: &str) -> Option<Received> {
    let f: Vec<&str> = line.split_whitespace().collect();
    Some(Received {
        items: f.first()?.parse().ok()?,
        checksum: f.get(1)?.parse().ok()?,
        seconds: f.get(2)?.parse().ok()?,
        cpu: f.get(3)?.parse().ok()?,
        messages: f.get(4)?.parse().ok()?,
        copied: f.get(5)?.parse().ok()?,
    })
}

/// One measurement of one point: its way at its size.
fn measure(cfg: &Config, p: &Point<usize>) -> Result<Sample, Error> {
    let size = p.at;
    let point = way_of(p.series).ok_or_else(|| {
        Error::peer("net")(format!("{:?} is not a way through the network", p.series))
    })?;
    let bytes = cfg.bytes_for(size);
    let (cap, files) = cfg.prepared(size)?;
    let files = files.as_ref().map(|(d, o)| (d.as_path(), o.as_path()));
    let got = match measure_way(cfg, point, size, cap, files) {
        Err(Error::Peer { peer: STALLED, .. }) => {
            return Ok(Sample {
                bytes,
                seconds: f64::NAN,
                cpu: f64::NAN,
                message_bytes: None,
                copies: None,
                stalled: true,
            });
        }
        other => other?,
    };
    let message_bytes = match point {
        Way::Capped | Way::DmaflowToGnuradio => Some((items_for(size, cap) * 4) as f64),
        Way::Batched => Some((items_for(size, BATCHED_BYTES) * 4).min(bytes) as f64),
        Way::Dmaflow | Way::Queued | Way::Raw => Some(size as f64),
        Way::GnuradioToDmaflow => Some(bytes as f64 / got.messages.max(1) as f64),
        Way::Gnuradio => None,
    };
    Ok(Sample {
        bytes,
        seconds: got.seconds,
        cpu: got.cpu,
        message_bytes,
        copies: (!point.gnuradio()).then(|| got.copied as f64 / bytes as f64),
        stalled: false,
    })
}

/// What was measured (the frame adds the rounds and the method).
fn heading(cfg: &Config) -> String {
    let how = if cfg.in_process {
        " (threads, in process)"
    } else {
        ""
    };
    format!(
        "a dmaflow ZeroMQ edge between two processes{how} over loopback TCP vs bare \
         PUSH/PULL of the same libzmq and GNU Radio's gr-zeromq, 100 000 messages ({}..{} \
         MiB) per measurement, every sender on one core and every receiver on the other",
        cfg.bytes.0 >> 20,
        cfg.bytes.1 >> 20,
    )
}

/// Way `mine`'s throughput over way `other`'s per size, round by round
/// (rounds where either stalled left out).
fn shares(rows: &[NetRow], mine: Way, other: Way) -> Vec<(usize, Ratio)> {
    rows.iter()
        .filter(|d| way(d) == mine)
        .filter_map(|d| {
            let r = rows
                .iter()
                .find(|r| r.point.at == d.point.at && way(r) == other)?;
            Some((d.point.at, d.against(r, Sample::mbps)))
        })
        .collect()
}

/// The typical value of an optional figure over the rounds where it is
/// known, or `None` where it never is.
fn typical(r: &NetRow, figure: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    let known = r.samples.iter().any(|s| figure(s).is_some());
    known.then(|| r.spread(|s| figure(s).unwrap_or(f64::NAN)).median)
}

/// The points' columns.
fn columns() -> Columns<'static, NetRow> {
    let secs = |r: &NetRow| r.spread(|s| s.seconds).median;
    let cpu = |r: &NetRow| r.spread(|s| s.cpu).median;
    let bytes = |r: &NetRow| r.samples.first().map_or(0, |s| s.bytes) as f64;
    Columns::new()
        .shown_as(
            "size",
            "message_bytes",
            |r: &NetRow| r.point.at,
            bytes_label,
        )
        .doc("message or item size")
        .series(
            "point",
            "point",
            "dmaflow|dmaflow-queue|raw|dmaflow-batched|dmaflow-capped|gnuradio|\
             dmaflow->gnuradio|gnuradio->dmaflow",
        )
        .kept("does", |r| way(r).does())
        .doc("what its ends do")
        .fixed("MB/s", "mb_per_s", 0, |r| r.spread(Sample::mbps).median)
        .doc("median over the rounds that did not stall")
        .shown("range", |r| {
            let s = r.spread(Sample::mbps);
            format!("{:.0}..{:.0}", s.min, s.max)
        })
        .kept("mb_per_s_min", |r| r.spread(Sample::mbps).min)
        .doc("the rounds' least MB/s")
        .kept("mb_per_s_max", |r| r.spread(Sample::mbps).max)
        .doc("the rounds' most MB/s")
        .kept("mb_per_s_spread", |r| r.spread(Sample::mbps))
        .doc("the rounds' MB/s summarised")
        .kept("rounds", NetRow::rounds)
        .doc("rounds measured")
        .shown("Mitems/s", move |r| {
            format!("{:.1}", bytes(r) / 4.0 / secs(r) / 1e6)
        })
        .fixed("rx_cpu_share", "rx_cpu_share", 2, move |r| cpu(r) / secs(r))
        .doc("receiving process's CPU over its time")
        .kept("rx_cpu_us_per_mb", move |r| cpu(r) / (bytes(r) / 1e6) * 1e6)
        .doc("receiving process's CPU microseconds per MB")
        .optional("msg_bytes", "sent_message_bytes", 0, |r| {
            typical(r, |s| s.message_bytes)
        })
        .doc("mean message size where known")
        .optional("copies/B", "copied_per_byte", 2, |r| {
            typical(r, |s| s.copies)
        })
        .doc("payload bytes both ends copied per byte delivered; dmaflow and raw points")
        .plain("stalls", "stalled_rounds", |r| {
            r.samples.iter().filter(|s| s.stalled).count()
        })
        .doc("rounds in which GNU Radio's receiver stalled")
}

/// The comparison with GNU Radio's columns, per item size: capped/gnuradio
/// and the other points' ratios over the same size.
fn against_columns(rows: &[NetRow]) -> Columns<'_, (usize, Ratio)> {
    let text = |r: Option<Spread>| r.map_or("-".into(), |r| Ratio(r).text());
    let mut cols = Columns::new()
        .shown_as(
            "items",
            "item_bytes",
            |&(s, _): &(usize, Ratio)| s,
            bytes_label,
        )
        .shown_as(
            "capped/gnuradio",
            "capped_over_gnuradio",
            |(_, r)| Some(r.0),
            text,
        )
        .shown("verdict", |(_, r)| r.verdict().to_string())
        .kept("capped_over_gnuradio_measurable", |(_, r)| r.measurable());
    for (header, key, a, b) in [
        (
            "batched/gnuradio",
            "batched_over_gnuradio",
            Way::Batched,
            Way::Gnuradio,
        ),
        (
            "batched/capped",
            "batched_over_capped",
            Way::Batched,
            Way::Capped,
        ),
        (
            "gr->dmaflow / gnuradio",
            "gnuradio_to_dmaflow_over_gnuradio",
            Way::GnuradioToDmaflow,
            Way::Gnuradio,
        ),
        (
            "dmaflow->gr / gnuradio",
            "dmaflow_to_gnuradio_over_gnuradio",
            Way::DmaflowToGnuradio,
            Way::Gnuradio,
        ),
    ] {
        let v = shares(rows, a, b);
        let at = move |&(s, _): &(usize, Ratio)| v.iter().find(|(z, _)| *z == s).map(|(_, r)| r.0);
        cols = cols.shown_as(header, key, at, text);
    }
    cols
}

/// One size against the raw ceiling: dmaflow's and dmaflow-queue's
/// throughput over raw's, round by round, and each point's copies.
struct AgainstRaw {
    size: usize,
    /// The target for dmaflow/raw at this size, in percent.
    goal: Option<u32>,
    dmaflow: Option<Ratio>,
    queued: Option<Ratio>,
    /// Typical bytes copied per byte delivered: dmaflow, dmaflow-queue, raw.
    copies: [Option<f64>; 3],
}

/// The target share of raw ZeroMQ at `size`, in percent.
fn raw_goal(size: usize) -> Option<u32> {
    match size {
        s if s >= 1 << 20 => Some(100),
        s if s >= 64 << 10 => Some(95),
        s if s <= 64 => Some(85),
        _ => None,
    }
}

/// Each size's comparison with the raw ceiling.
fn raw_rows(rows: &[NetRow]) -> Vec<AgainstRaw> {
    let dmaflow = shares(rows, Way::Dmaflow, Way::Raw);
    let queued = shares(rows, Way::Queued, Way::Raw);
    let copies = |size, w| {
        let r = rows.iter().find(|r| r.point.at == size && way(r) == w)?;
        typical(r, |s| s.copies)
    };
    dmaflow
        .iter()
        .map(|&(size, r)| AgainstRaw {
            size,
            goal: raw_goal(size),
            dmaflow: Some(r),
            queued: queued.iter().find(|(s, _)| *s == size).map(|&(_, q)| q),
            copies: [
                copies(size, Way::Dmaflow),
                copies(size, Way::Queued),
                copies(size, Way::Raw),
            ],
        })
        .collect()
}

/// `95 % (70..120)`: a ratio in percent with the rounds' range.
fn percent(r: Ratio) -> String {
    let s = r.0.scaled(100.0);
    format!("{:.0} % ({:.0}..{:.0})", s.median, s.min, s.max)
}

/// The comparison with the raw ceiling's columns.
fn raw_columns<'a>() -> Columns<'a, AgainstRaw> {
    let pct = |r: Option<Ratio>| r.map_or("-".into(), percent);
    let spread = |r: Option<Ratio>| r.map(|r| r.0);
    let copies = |c: Option<f64>| c.map_or("-".into(), |c| format!("{c:.2}"));
    Columns::new()
        .shown_as(
            "size",
            "message_bytes",
            |r: &AgainstRaw| r.size,
            bytes_label,
        )
        .shown("dmaflow/raw", move |r| pct(r.dmaflow))
        .kept("dmaflow_over_raw", move |r| spread(r.dmaflow))
        .shown("goal", |r| {
            r.goal.map_or("-".into(), |g| format!(">= {g} %"))
        })
        .kept("goal_pct", |r| r.goal)
        .shown("verdict", |r| {
            r.dmaflow.map_or("-", |d| d.verdict()).to_string()
        })
        .shown("dmaflow copies/B", move |r| copies(r.copies[0]))
        .kept("dmaflow_copied_per_byte", |r| r.copies[0])
        .shown("dmaflow-queue/raw", move |r| pct(r.queued))
        .kept("dmaflow_queue_over_raw", move |r| spread(r.queued))
        .shown("dmaflow-queue copies/B", move |r| copies(r.copies[1]))
        .kept("dmaflow_queue_copied_per_byte", |r| r.copies[1])
        .shown("raw copies/B", move |r| copies(r.copies[2]))
        .kept("raw_copied_per_byte", |r| r.copies[2])
}

/// What the rows say: what each point does, the tables against GNU Radio
/// and against the raw ceiling, and the targets.
fn findings(_: &Config, rows: &[NetRow]) -> Findings {
    let mut found = Findings::default();
    let mut text = String::from(
        "stalls: rounds in which GNU Radio's receiver had not taken every item after 30 s \
         (it was stopped; those rounds are left out of the figures and ratios)\n\
         what each point does (sender | receiver):\n",
    );
    let mut seen = Vec::new();
    for w in rows.iter().map(way) {
        if !seen.contains(&w) {
            seen.push(w);
            text += &format!("  {}: {}\n", w.name(), w.does());
        }
    }
    let equal = shares(rows, Way::Capped, Way::Gnuradio);
    if !equal.is_empty() {
        text += "\nagainst GNU Radio (throughput ratios, typical value and min..max of the \
                 rounds; default/default = batched/capped (message size) x capped/gnuradio \
                 (the ends), round by round; the crossed edges put one dmaflow end in place \
                 of GNU Radio's):\n";
        text += &against_columns(rows).table(&equal);
        for (size, r) in &equal {
            let what = "GNU Radio's push_sink -> pull_source at the same message size";
            let what = format!("{} items: dmaflow >= {what}", bytes_label(*size));
            let got = format!("{} ({})", r.text(), r.verdict());
            found
                .targets
                .push(Target::new(what, got, r.0.median >= 1.0));
        }
    }
    let raw = shares(rows, Way::Dmaflow, Way::Raw);
    let against_raw = raw_rows(rows);
    if !against_raw.is_empty() {
        text += "\nagainst the raw ceiling (throughput ratios, typical value and min..max of \
                 the rounds, round by round; copies/B: payload bytes both ends copied per byte \
                 delivered, typical of the rounds; goal: this size's target):\n";
        text += &raw_columns().table(&against_raw);
    }
    for r in &against_raw {
        let (Some(goal), Some(share)) = (r.goal, r.dmaflow) else {
            continue;
        };
        let what = format!(
            "{} messages: dmaflow >= {goal} % of raw ZeroMQ",
            bytes_label(r.size)
        );
        let got = percent(share).replacen(')', " %)", 1);
        let met = share.0.median * 100.0 >= f64::from(goal);
        found.targets.push(Target::new(what, got, met));
    }
    let list = |v: &[(usize, Ratio)], f: &dyn Fn(f64) -> String| {
        v.iter()
            .map(|(s, r)| format!("{} {}", bytes_label(*s), f(r.0.median)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    found.clauses.push(format!(
        "dmaflow's share of the raw ZeroMQ throughput: {}",
        list(&raw, &|m| format!("{:.0} %", m * 100.0))
    ));
    if !equal.is_empty() {
        found.clauses.push(format!(
            "against GNU Radio's lean ends at GNU Radio's own message size: {}",
            list(&equal, &|m| format!("{m:.2}x"))
        ));
    }
    found.notes = text;
    found.kept = vec![
        (
            "against_gnuradio",
            Value::from(against_columns(rows).json(&equal)),
        ),
        ("against_raw", Value::from(raw_columns().json(&against_raw))),
    ];
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way delivers every byte (the checksum is checked inside) and
    /// the report names each size's share.
    #[test]
    fn both_points_deliver_every_item() {
        let cfg = Config {
            in_process: true,
            ..Config::at(&Setup::TINY)
        };
        let rows = EXPERIMENT.rows(&cfg, &mut |m| eprintln!("{m}")).unwrap();
        let gr = gnuradio();
        assert_eq!(rows.len(), if gr { 16 } else { 8 });
        assert!(
            rows.iter()
                .all(|r| r.rounds() == 2 && r.every(|s| s.stalled || s.seconds > 0.0))
        );
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert!(rep.text.contains("against the raw ceiling"), "{}", rep.text);
        assert!(rep.text.contains("dmaflow copies/B"), "{}", rep.text);
        assert!(rep.json["against_raw"].is_array(), "{}", rep.json);
        assert!(rep.json["rows"][0]["mb_per_s"].is_number(), "{}", rep.json);
        // Batched, 64-byte items go many to a message.
        assert!(rep.text.contains("dmaflow-batched"), "{}", rep.text);
        assert_eq!(
            parse_received(&received_line(&Received {
                items: 3,
                checksum: 7,
                seconds: 0.5,
                cpu: 0.25,
                messages: 2,
                copied: 5,
            }))
            .unwrap()
            .checksum,
            7
        );
    }

    /// A stalled round is left out of a row's figures and of the ratios.
    #[test]
    fn a_stalled_round_is_left_out() {
        let s = |seconds: f64| Sample {
            bytes: 1_000_000,
            seconds,
            cpu: 0.1,
            message_bytes: None,
            copies: None,
            stalled: seconds.is_nan(),
        };
        let row = |series, v: Vec<Sample>| Row {
            point: Point { series, at: 64 },
            samples: v,
            baseline: None,
            others: Vec::new(),
        };
        let rows = vec![
            row("dmaflow", vec![s(0.5), s(0.25)]),
            row("raw", vec![s(f64::NAN), s(0.5)]),
        ];
        let r = shares(&rows, Way::Dmaflow, Way::Raw);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].1.0.n, r[0].1.0.median), (1, 2.0));
        assert_eq!(rows[1].spread(Sample::mbps).n, 1);
    }
}
