//! `dmaflow bench ring`: single-producer, single-consumer throughput of the
//! mirrored queue against other Rust queues, and of a sliding-window reader
//! with and without the overlap copy.
//!
//! Items are `f32`, each written in place with its sequence number as its
//! bits; the consumer folds every item into a wrapping sum of the bits (it
//! vectorises: the queue, not the per-item work, is measured), verified.
//! Every queue runs on the same terms: the same batches, the consumer taking
//! whatever is readable as soon as anything is, both sides waiting on one
//! schedule (dmaflow's `Wait::Yield`: spin as long as a `sched_yield` costs on
//! this machine, [`dmaflow::ring::Calibration`], then yield; the peers through
//! [`dmaflow::ring::Backoff`], the same code), no allocation per batch
//! (crossbeam's batches are buffers passed back and forth), the threads pinned
//! as [`queues::together`] pins them, implementations taking turns with the
//! order reversed every other round. Apart from those rows, so that the table
//! says what the queue costs and what the wait costs: dmaflow under each wait
//! it offers (`dmaflow-spin`, `dmaflow-block`: its default), and each peer
//! as a user gets it out of the box (`-own`: see [`queues::Waits::Own`]).
//! The `bound` row does the same work with no queue (each thread on a private
//! buffer of the queue's size): a row faster than it by more than the
//! run-to-run spread is flagged as implausible.

use dmaflow::ring::{Builder, Reader, Wait};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::harness::{OnBoard, Progress, Setup, Spec, Tier, bytes_label};
use super::peers::{Peer, checksum, fill, series};
use super::plot::{LinePlot, XAxis};
use super::queues::{self, Shape, first, pin_to, two_threads};
use super::report::{Report, Target, sentence, series_by, within};

/// `dmaflow bench ring`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "ring",
    // The queue's experiment: the peer table with its cross-process rows,
    // then the readers' table in GNU Radio 4's shape.
    then: Some("readers"),
    board: OnBoard::EmulatorOnly("it measures queues on this machine, not a DMA device"),
    question: "Mirrored queue vs other queues, the sliding-window reader and the queue shared \
               between processes; then `readers`.",
    keys: "impl (dmaflow|dmaflow-spin|dmaflow-block|dmaflow-shm|\n\
          dmaflow-process|rtrb|ringbuf|vmcircbuffer|crossbeam, each\n\
          peer again as <peer>-own|bound),\n\
          case (stream|window|window-copy), batch_bytes,\n\
          gbytes_per_s (10^9 B/s, median), gbytes_per_s_min,\n\
          gbytes_per_s_max, runs, implausible (bool: above the\n\
          no-queue bound)",
    conditions: Conditions {
        timed: "from the first worker thread's start to the last one's end, each \
                instant read on its own thread",
        against: "rtrb, ringbuf, vmcircbuffer (lock-free) and crossbeam-channel on equal \
                  terms (one wait schedule for every queue: dmaflow's Wait::Yield, spin as \
                  long as a sched_yield costs here, then yield), again each with its own \
                  default wait (-own rows; dmaflow's is Wait::Block), and a no-queue bound \
                  (the same work, no hand-over)",
        model: "none: every figure is the queues' own",
        paper: "paper 001 measured its queue inside an FFT filter, not alone; threads are \
                pinned to this VM's two cores",
    },
    ..Spec::new(Config::at, run, report)
};

/// Size of one item in bytes.
const ITEM: usize = std::mem::size_of::<f32>();

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes streamed per measurement.
    pub total_bytes: usize,
    /// Rounds per row; the median is reported.
    pub rounds: usize,
    /// Producer batch sizes in bytes (each a multiple of 4 and a divisor of
    /// `total_bytes` and `queue_bytes`).
    pub batches: Vec<usize>,
    /// Capacity of every queue under test, in bytes.
    pub queue_bytes: usize,
    /// The `dmaflow` program to run as the reading process of the
    /// cross-process row (`dmaflow shm-reader`); `None` leaves the row out.
    pub reader: Option<std::path::PathBuf>,
}

impl Config {
    /// The size `setup` asks for: the full run, or the quick or tiny one
    /// made from it.
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            total_bytes: 512 << 20,
            rounds: 11,
            batches: vec![64, 4 << 10, 64 << 10],
            queue_bytes: 256 << 10,
            reader: std::env::current_exe().ok(),
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                total_bytes: 128 << 20,
                rounds: 7,
                ..full
            },
            Tier::Tiny => Config {
                total_bytes: 1 << 20,
                rounds: 1,
                batches: vec![64, 4 << 10],
                queue_bytes: 64 << 10,
                // A test binary is not `dmaflow`: the cross-process row needs
                // the program's path (the CLI's tests give it).
                reader: None,
            },
        }
    }
}

/// One row of the result: the median of `runs` measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `dmaflow`, `rtrb`, `ringbuf`, `vmcircbuffer`, `crossbeam` or `bound`.
    pub implementation: &'static str,
    /// `stream`, `window` or `window-copy`.
    pub case: &'static str,
    /// Producer batch (and, for the window cases, hop) in bytes.
    pub batch_bytes: usize,
    /// Median throughput in 10^9 bytes per second of stream.
    pub gbytes_per_s: f64,
    /// The lowest and highest of the runs.
    pub range: (f64, f64),
    /// Rounds measured (the JSON key `runs`).
    pub rounds: usize,
}

/// How far above the no-queue bound (as a share of it) a median may lie
/// before it is flagged: the rounds' spread on this kind of machine.
const IMPLAUSIBLE: f64 = 1.25;

impl Row {
    /// Whether the row beats the no-queue bound of its batch by more than
    /// the spread allows: a measurement error, not a queue.
    pub fn implausible(&self, rows: &[Row]) -> bool {
        self.implementation != "bound"
            && gbytes(rows, "bound", "stream", self.batch_bytes)
                .is_some_and(|b| self.gbytes_per_s > IMPLAUSIBLE * b)
    }
}

/// The producer of every dmaflow case: takes dmaflow's writer `w` (in this
/// process or shared between processes: the same calls) and writes the
/// batches of [`Shape`] `sh` into it, each filled in place; the writer is
/// dropped (the end of the stream) when it is done.
macro_rules! batches_into {
    ($w:ident, $sh:ident) => {{
        let (nb, bi) = ($sh.batches, $sh.batch);
        move || -> Result<(), Error> {
            let mut w = $w;
            for b in 0..nb {
                fill(w.reserve(bi)?, (b * bi) as u32);
                w.commit(bi)?;
            }
            Ok(())
        }
    }};
}

/// The checksum of everything dmaflow's reader `r` reads until the end of
/// the stream, whatever is readable as soon as anything is (as every peer
/// takes it).
macro_rules! sum_readable {
    ($r:expr) => {{
        let mut sum = 0u32;
        loop {
            let s = $r.peek(1)?;
            if s.is_empty() {
                break sum;
            }
            sum = sum.wrapping_add(checksum(s));
            let n = s.len();
            $r.consume(n)?;
        }
    }};
}

/// dmaflow's queue with the writer every dmaflow case shares (batches of
/// `sh.batch` items, filled in place), and `read` on the reader's side; both
/// sides wait as `wait` says.
fn dmaflow_case<C>(sh: &Shape, wait: Wait, read: C) -> Result<(f64, u32), Error>
where
    C: FnOnce(Reader<f32>) -> Result<u32, Error> + Send,
{
    let (w, r) = Builder::<f32>::new(sh.queue).wait(wait).build()?;
    two_threads("dmaflow", batches_into!(w, sh), move || read(r))
}

/// The stream on the wait schedule every queue shares (`Wait::Yield`).
fn dmaflow_stream(sh: &Shape) -> Result<(f64, u32), Error> {
    dmaflow_case(sh, Wait::Yield, move |mut r| Ok(sum_readable!(r)))
}

/// The stream with both sides spinning.
fn dmaflow_spin(sh: &Shape) -> Result<(f64, u32), Error> {
    dmaflow_case(sh, Wait::Spin, move |mut r| Ok(sum_readable!(r)))
}

/// The stream with both sides sleeping when they must wait (the default).
fn dmaflow_block(sh: &Shape) -> Result<(f64, u32), Error> {
    dmaflow_case(sh, Wait::Block, move |mut r| Ok(sum_readable!(r)))
}

/// Sliding windows of `2 * hop` items, `hop` apart, read in place.
fn dmaflow_window(sh: &Shape) -> Result<(f64, u32), Error> {
    let hop = sh.batch;
    dmaflow_case(sh, Wait::Yield, move |mut r| {
        let mut sum = 0u32;
        loop {
            let s = r.peek(2 * hop)?;
            if s.len() < 2 * hop {
                return Ok(sum);
            }
            sum = sum.wrapping_add(checksum(&s[..2 * hop]));
            r.consume(hop)?;
        }
    })
}

/// The same windows, built by a reader that copies the overlap to the front of a
/// private buffer and the new hop after it (paper 001, §II).
fn copying_window(sh: &Shape) -> Result<(f64, u32), Error> {
    let hop = sh.batch;
    dmaflow_case(sh, Wait::Yield, move |mut r| {
        let mut buf = vec![0f32; 2 * hop];
        let mut sum = 0u32;
        let mut primed = false;
        loop {
            let s = r.peek(hop)?;
            if s.len() < hop {
                return Ok(sum);
            }
            buf.copy_within(hop.., 0);
            buf[hop..].copy_from_slice(&s[..hop]);
            r.consume(hop)?;
            if primed {
                sum = sum.wrapping_add(checksum(&buf));
            }
            primed = true;
        }
    })
}

/// Expected checksum of the window cases: every window `[k hop, k hop + 2 hop)`.
fn window_series(items: usize, hop: usize) -> u32 {
    let windows = (items / hop).saturating_sub(1);
    (0..windows).fold(0u32, |a, k| {
        a.wrapping_add(series((k * hop) as u64, (2 * hop) as u64))
    })
}

/// vmcircbuffer's queue, its reader taking whatever is readable, its sides
/// waiting as `waits` says.
#[cfg(feature = "peers")]
fn vmcircbuffer_stream(sh: &Shape, waits: queues::Waits) -> Result<(f64, u32), Error> {
    let stream = (sh.batches, sh.batch);
    first(queues::vmcircbuffer(waits, sh.queue, 1, stream, None))
}

/// The same work with no queue: the producer fills and the consumer sums
/// batches of their own private buffer of the queue's size, on two threads
/// started together. What a queue adds (hand-over, shared cache lines, the
/// consumer reading what the producer wrote) only slows this down.
fn bound_stream(sh: &Shape) -> Result<(f64, u32), Error> {
    let (nb, bi, q) = (sh.batches, sh.batch, sh.queue);
    let mut src = vec![0f32; q];
    let mut dst = vec![0f32; q];
    // The consumer's buffer holds the stream's items where the queue would:
    // its sums are those of the stream, one queue-full at a time.
    two_threads(
        "bound",
        move || {
            for b in 0..nb {
                let off = (b * bi) % q;
                fill(&mut src[off..off + bi], (b * bi) as u32);
                std::hint::black_box(&mut src);
            }
            Ok(())
        },
        move || {
            fill(&mut dst, 0);
            let mut sum = 0u32;
            for b in 0..nb {
                let off = (b * bi) % q;
                sum = sum.wrapping_add(checksum(std::hint::black_box(&dst[off..off + bi])));
            }
            Ok(sum)
        },
    )
}

/// Now on the system-wide monotonic clock, in nanoseconds: comparable
/// between processes.
fn monotonic_ns() -> u64 {
    dmaflow::platform::cpu::monotonic().as_nanos() as u64
}

/// The queue shared between processes ([`dmaflow::ring::shm`]), both ends in
/// this process on two threads: the same protocol as between processes.
fn shm_threads(sh: &Shape) -> Result<(f64, u32), Error> {
    use dmaflow::ring::shm::{ShmConfig, ShmReader, ShmWriter};
    let w = ShmWriter::<f32>::create(sh.queue, &ShmConfig::default())?;
    let fd = w.fd().try_clone_to_owned();
    let fd = fd.map_err(Error::io("shared queue descriptor"))?;
    // SAFETY: only `w` writes the object.
    let mut r = unsafe { ShmReader::<f32>::from_fd(fd)? };
    two_threads("dmaflow-shm", batches_into!(w, sh), move || {
        Ok(sum_readable!(r))
    })
}

/// The reading end of the cross-process row, in a child process: attaches to
/// the queue at `path` on the second core, sums the stream and answers
/// `sum SUM end NS` (the instant of its last item on the monotonic clock).
pub fn shm_reader(path: &std::path::Path) -> Result<String, Error> {
    // The wait costs measured before the pinning and the attach, as the
    // parent measures its own (`run`): on an unpinned thread, outside the
    // timed span.
    let _ = dmaflow::ring::Calibration::get();
    pin_to(1);
    // SAFETY: only the parent's writer writes the object.
    let mut r = unsafe { dmaflow::ring::shm::ShmReader::<f32>::open(path)? };
    let sum = sum_readable!(r);
    Ok(format!("sum {sum} end {}", monotonic_ns()))
}

/// The same queue with its reader in another process (this program run as
/// `dmaflow shm-reader`): time from the writer's start to the child's last
/// item, both on the monotonic clock.
fn shm_process(sh: &Shape) -> Result<(f64, u32), Error> {
    use dmaflow::ring::shm::{ShmConfig, ShmWriter};
    let path = super::peers::tmpfs().join(format!("dmaflow-bench-ring-{}", std::process::id()));
    let cfg = ShmConfig {
        path: Some(path.clone()),
        ..ShmConfig::default()
    };
    let w = ShmWriter::<f32>::create(sh.queue, &cfg)?;
    let fail = Error::peer::<String>("dmaflow shm-reader");
    let exe = sh
        .reader
        .as_ref()
        .ok_or_else(|| fail("no program to run as the reading process".into()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("shm-reader").arg("--path").arg(&path);
    let child = Peer::spawn(&mut cmd, std::process::Stdio::null(), "dmaflow shm-reader")?;
    let attached = w.wait_for_readers(1, std::time::Duration::from_secs(20));
    let start = std::thread::scope(|s| {
        s.spawn(|| {
            pin_to(0);
            attached?;
            let t0 = monotonic_ns();
            batches_into!(w, sh)()?;
            Ok::<u64, Error>(t0)
        })
        .join()
        .map_err(|_| Error::Panicked("dmaflow-process"))?
    });
    let out = child.wait_within(std::time::Duration::from_secs(120))?;
    let _ = std::fs::remove_file(&path);
    let t0 = start?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.split_whitespace()
            .skip_while(|w| *w != key)
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (out.status.success(), field("sum"), field("end")) {
        (true, Some(sum), Some(end)) => Ok((end.saturating_sub(t0) as f64 / 1e9, sum as u32)),
        _ => Err(fail(format!("answered {:?} ({})", text.trim(), out.status))),
    }
}

type Measure = fn(&Shape) -> Result<(f64, u32), Error>;

/// The implementations measured for one case, with the checksum each must give.
fn contenders(case: &str, process: bool) -> Vec<(&'static str, Measure)> {
    let mut v: Vec<(&'static str, Measure)> = match case {
        "window" => return vec![("dmaflow", dmaflow_window)],
        "window-copy" => return vec![("dmaflow", copying_window)],
        _ => vec![
            ("dmaflow", dmaflow_stream),
            ("dmaflow-spin", dmaflow_spin),
            ("dmaflow-block", dmaflow_block),
            ("dmaflow-shm", shm_threads),
        ],
    };
    if process {
        v.push(("dmaflow-process", shm_process));
    }
    #[cfg(feature = "peers")]
    {
        use queues::Waits::{Own, Shared};
        v.extend([
            ("rtrb", (|sh| queues::rtrb(sh, Shared)) as Measure),
            ("ringbuf", |sh| queues::ringbuf(sh, Shared)),
            ("vmcircbuffer", |sh| vmcircbuffer_stream(sh, Shared)),
            ("crossbeam", |sh| queues::crossbeam(sh, Shared)),
            ("rtrb-own", |sh| queues::rtrb(sh, Own)),
            ("ringbuf-own", |sh| queues::ringbuf(sh, Own)),
            ("vmcircbuffer-own", |sh| vmcircbuffer_stream(sh, Own)),
            ("crossbeam-own", |sh| queues::crossbeam(sh, Own)),
        ]);
    }
    v.push(("bound", bound_stream));
    v
}

/// Runs the experiment. `progress` hears about each measurement before it starts.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    // The wait costs measured here, on this unpinned thread, as the reading
    // process measures its own: not in a pinned thread's first wait, timed.
    let _ = dmaflow::ring::Calibration::get();
    let mut rows = Vec::new();
    for &batch_bytes in &cfg.batches {
        let batch = batch_bytes / ITEM;
        let batches = cfg.total_bytes / ITEM / batch;
        let shape = Shape {
            items: batches * batch,
            batches,
            batch,
            queue: cfg.queue_bytes / ITEM,
            reader: cfg.reader.clone(),
        };
        for case in ["stream", "window", "window-copy"] {
            let impls = contenders(case, cfg.reader.is_some());
            let samples = super::spread::in_turns(impls.len(), cfg.rounds, |i, run| {
                let (name, measure) = &impls[i];
                progress(&format!(
                    "ring {case} {} {name} run {}/{}",
                    bytes_label(batch_bytes),
                    run + 1,
                    cfg.rounds
                ));
                let (secs, sum) = measure(&shape)?;
                let expected = match (case, *name) {
                    (_, "bound") => bound_series(&shape),
                    ("stream", _) => series(0, shape.items as u64),
                    _ => window_series(shape.items, shape.batch),
                };
                if sum != expected {
                    return Err(Error::Corrupted {
                        what: format!("ring {case} {name} batch {batch_bytes} B"),
                        got: sum,
                        expected,
                    });
                }
                Ok((shape.items * ITEM) as f64 / secs / 1e9)
            })?;
            for ((name, _), s) in impls.iter().zip(&samples) {
                let sp = super::spread::Spread::of(s);
                rows.push(Row {
                    implementation: name,
                    case,
                    batch_bytes,
                    gbytes_per_s: sp.median,
                    range: (sp.min, sp.max),
                    rounds: sp.n,
                });
            }
        }
    }
    Ok(rows)
}

/// The no-queue bound's checksum: the consumer sums its queue-sized buffer
/// (items `0..queue`) batch by batch, wrapping around it.
fn bound_series(sh: &Shape) -> u32 {
    (0..sh.batches).fold(0u32, |a, b| {
        let off = (b * sh.batch) % sh.queue;
        a.wrapping_add(series(off as u64, sh.batch as u64))
    })
}

/// The median throughput of `imp` in `case` at `batch` bytes.
fn gbytes(rows: &[Row], imp: &str, case: &str, batch: usize) -> Option<f64> {
    rows.iter()
        .find(|r| r.implementation == imp && r.case == case && r.batch_bytes == batch)
        .map(|r| r.gbytes_per_s)
}

/// The rows' columns, with each row's ratio to dmaflow in the same case (the
/// `window` case for `window-copy`).
fn columns(rows: &[Row]) -> Columns<'_, Row> {
    let ratio = |r: &Row| {
        let case = r.case.strip_suffix("-copy").unwrap_or(r.case);
        gbytes(rows, "dmaflow", case, r.batch_bytes)
            .map_or("-".into(), |d| format!("{:.2}", r.gbytes_per_s / d))
    };
    let check = |v| {
        if v {
            "implausible: above the no-queue bound"
        } else {
            ""
        }
        .into()
    };
    Columns::new()
        .plain("impl", "impl", |r: &Row| r.implementation)
        .plain("case", "case", |r| r.case)
        .shown_as("batch", "batch_bytes", |r| r.batch_bytes, bytes_label)
        .fixed("GB/s (median)", "gbytes_per_s", 2, |r| r.gbytes_per_s)
        .shown("range", |r| format!("{:.2}..{:.2}", r.range.0, r.range.1))
        .kept("gbytes_per_s_min", |r| r.range.0)
        .kept("gbytes_per_s_max", |r| r.range.1)
        .kept("runs", |r| r.rounds)
        .shown("x dmaflow", ratio)
        .shown_as("check", "implausible", |r| r.implausible(rows), check)
}

/// The fastest peer's stream row at one batch size: on the shared wait
/// schedule, or (`own`) each with its own default wait.
fn fastest_peer(rows: &[Row], batch: usize, own: bool) -> Option<&Row> {
    rows.iter()
        .filter(|r| r.batch_bytes == batch && r.case == "stream")
        .filter(|r| !r.implementation.starts_with("dmaflow") && r.implementation != "bound")
        .filter(|r| r.implementation.ends_with("-own") == own)
        .max_by(|x, y| x.gbytes_per_s.total_cmp(&y.gbytes_per_s))
}

/// dmaflow against the fastest peer at one batch size, on the shared wait
/// schedule: dmaflow's median, the peer's row, and reading windows in place
/// over copying them out.
fn compare(rows: &[Row], batch: usize) -> Option<(f64, &Row, Option<f64>)> {
    let get = |case| gbytes(rows, "dmaflow", case, batch);
    let peer = fastest_peer(rows, batch, false)?;
    let window = get("window").zip(get("window-copy")).map(|(w, c)| w / c);
    Some((get("stream")?, peer, window))
}

/// dmaflow with its default wait (`Wait::Block`) against the fastest peer
/// with its own, at one batch size.
fn compare_own(rows: &[Row], batch: usize) -> Option<(f64, &Row)> {
    let d = gbytes(rows, "dmaflow-block", "stream", batch)?;
    Some((d, fastest_peer(rows, batch, true)?))
}

/// The shared queue with its reader in another process over the same queue
/// with its reader on another thread, at one batch size (medians).
fn across(rows: &[Row], batch: usize) -> Option<f64> {
    let get = |imp| gbytes(rows, imp, "stream", batch);
    Some(get("dmaflow-process")? / get("dmaflow-shm")?)
}

/// The batch sizes of the rows, in order.
fn batches(rows: &[Row]) -> Vec<usize> {
    let mut batches: Vec<usize> = rows.iter().map(|r| r.batch_bytes).collect();
    batches.dedup();
    batches
}

/// How dmaflow compares with the best peer and the copying reader, per batch size.
pub fn summary(rows: &[Row]) -> String {
    let mut out = String::new();
    for b in batches(rows) {
        let Some((d, peer, window)) = compare(rows, b) else {
            continue;
        };
        let (name, peer) = (peer.implementation, peer.gbytes_per_s);
        out += &format!(
            "{}: dmaflow / best peer ({name}) = {:.2}x",
            bytes_label(b),
            d / peer
        );
        if let Some((d, peer)) = compare_own(rows, b) {
            out += &format!(
                "; own default waits: dmaflow-block / best peer ({}) = {:.2}x",
                peer.implementation,
                d / peer.gbytes_per_s
            );
        }
        if let Some(ratio) = window {
            out += &format!("; window / window-copy = {ratio:.2}x");
        }
        if let Some(p) = across(rows, b) {
            out += &format!("; shared queue, other process / other thread = {p:.2}x");
        }
        out.push('\n');
    }
    out
}

/// The queue's targets: against the fastest peer at 64 B, 4 KiB and 64 KiB,
/// and between processes against between threads.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let peers = [(64, 1.2), (4 << 10, 1.0), (64 << 10, 1.0)].map(|(batch, want)| {
        let (d, peer, _) = compare(rows, batch)?;
        let (name, peer, r) = (
            peer.implementation,
            peer.gbytes_per_s,
            d / peer.gbytes_per_s,
        );
        Some(Target::new(
            format!(
                "{} batches, equal waits: dmaflow >= {want:.1}x the fastest peer",
                bytes_label(batch)
            ),
            format!("{r:.2}x ({d:.2} GB/s against {name} {peer:.2})"),
            r >= want,
        ))
    });
    let own = batches(rows).into_iter().filter_map(|b| {
        let (d, peer) = compare_own(rows, b)?;
        let (name, peer) = (peer.implementation, peer.gbytes_per_s);
        Some(Target::new(
            format!(
                "{} batches, each queue's own default wait: dmaflow >= 1.0x the fastest peer",
                bytes_label(b)
            ),
            format!("{:.2}x ({d:.2} GB/s against {name} {peer:.2})", d / peer),
            d >= peer,
        ))
    });
    let across = batches(rows).into_iter().filter_map(|b| {
        let p = across(rows, b)?;
        Some(Target::new(
            format!(
                "{} batches: the shared queue between processes within 10 % of it between \
                 threads",
                bytes_label(b)
            ),
            format!("{:.0} %", 100.0 * p),
            within(p, 0.9, 1.1),
        ))
    });
    peers
        .into_iter()
        .flatten()
        .chain(own)
        .chain(across)
        .collect()
}

/// One sentence: dmaflow against the fastest peer at the smallest and largest
/// batch, and what reading windows in place saves.
pub fn answer(rows: &[Row]) -> String {
    let lo = rows.iter().map(|r| r.batch_bytes).min();
    let hi = rows.iter().map(|r| r.batch_bytes).max();
    let clauses: Vec<String> = (lo.into_iter().chain(hi.filter(|h| Some(*h) != lo)))
        .filter_map(|b| {
            let (d, peer, window) = compare(rows, b)?;
            let window = window.map_or(String::new(), |r| {
                format!(", and reading windows in place is {r:.2}x copying them out")
            });
            Some(format!(
                "at {} batches dmaflow's queue moves {d:.2} GB/s, {:.2}x the fastest peer ({}){window}",
                bytes_label(b),
                d / peer.gbytes_per_s,
                peer.implementation,
            ))
        })
        .collect();
    sentence(&clauses)
}

/// The run as a report: table, targets, throughput against batch size.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let cal = dmaflow::ring::Calibration::get();
    let heading = format!(
        "ring: {} per measurement, median of {} runs (min..max beside it; implementations \
         taking turns, the order reversed every other round), queue {}; every queue's \
         consumer takes whatever is readable; one wait for every queue (dmaflow, its \
         shared queue and each peer): spin as long as a sched_yield costs on this machine \
         ({:.2} us, calibrated at start-up), then yield; dmaflow-spin and dmaflow-block: \
         dmaflow's other waits (block, its default, spins as long as a sched_yield \
         costs, then yields until a wake-up's cost, {:.2} us, has passed, then sleeps); -own: each peer's own default wait (rtrb, ringbuf, \
         vmcircbuffer: none, a retry with a pause between looks; crossbeam: send/recv); \
         `bound`: the same work on two threads with no queue between them",
        bytes_label(cfg.total_bytes),
        cfg.rounds,
        bytes_label(cfg.queue_bytes),
        cal.yield_cost.as_secs_f64() * 1e6,
        cal.spin_before_sleep().as_secs_f64() * 1e6,
    );
    let columns = columns(rows);
    Report::of("ring", heading, &columns, rows)
        .text(columns.table(rows) + &summary(rows))
        .answer(answer(rows))
        .targets(targets(rows))
        .plots([LinePlot::new(
            "Queue throughput against batch size",
            XAxis::Bytes,
            "batch size",
            "throughput (GB/s)",
            series_by(
                rows,
                |r| format!("{} {}", r.implementation, r.case),
                |r| r.batch_bytes as f64,
                |r| r.gbytes_per_s,
            ),
        )
        .log_y()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksums, the no-queue bound's flag, and a tiny run that
    /// verifies every implementation and reports every case.
    #[test]
    fn checksums_the_bound_and_a_tiny_run() {
        let direct = (10u32..10 + 1000).fold(0u32, |a, b| a.wrapping_add(b));
        assert_eq!(series(10, 1000), direct);
        assert_eq!(series(0, 0), 0);
        let mut v = vec![0f32; 1000];
        fill(&mut v, 10);
        assert_eq!(checksum(&v), direct);
        let row = |implementation, gbytes_per_s| Row {
            implementation,
            case: "stream",
            batch_bytes: 64,
            gbytes_per_s,
            range: (gbytes_per_s, gbytes_per_s),
            rounds: 1,
        };
        let rows = [
            row("bound", 10.0),
            row("ringbuf", 9000.0),
            row("dmaflow", 11.0),
        ];
        assert!(rows[1].implausible(&rows));
        assert!(!rows[2].implausible(&rows));
        assert!(columns(&rows).table(&rows).contains("implausible"));
        let rows = run(&Config::at(&Setup::TINY), &mut |_| {}).unwrap();
        let impls_per_batch = contenders("stream", false).len() + 2;
        assert_eq!(rows.len(), 2 * impls_per_batch);
        for r in &rows {
            assert!(r.gbytes_per_s.is_finite() && r.gbytes_per_s > 0.0, "{r:?}");
            assert!(
                r.range.0 <= r.gbytes_per_s && r.gbytes_per_s <= r.range.1,
                "{r:?}"
            );
        }
        assert!(rows.iter().any(|r| r.implementation == "bound"));
        let rep = report(&Config::at(&Setup::TINY), &rows);
        assert_eq!(rep.json["experiment"], "ring");
        assert_eq!(rep.json["rows"].as_array().unwrap().len(), rows.len());
        assert!(rep.text.contains("window-copy"));
        assert!(summary(&rows).contains("window / window-copy"));
    }
}
