//! The cost of a hand-over between task nodes, for `perf stat`: P pipes of
//! `source -> head(N) -> S copy stages -> sink`, every node a task, every
//! stage passing on what is readable and free per call (with `rand`, at most
//! a random 1..=128 items per call), as `dmaflow bench sched` runs them.
//!
//! ```text
//! cargo run --release --example handover -- copy|rand STAGES [PIPES] [SAMPLES] [WORKERS]
//! perf stat -e instructions:u,cycles:u target/release/examples/handover rand 10 4 2000000 1
//! ```
//!
//! With one worker the schedule (and so the instruction count) does not
//! depend on what else the machine runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dmaflow::graph::{Graph, Input, NodeResult, Output};

/// Calls of every pass stage together (for the mean hand-over size).
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Most items a random stage moves per call.
const RAND_MAX_COPY: u64 = 128;

/// xorshift64 (13, 7, 17).
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Fills what is free with zeros, for ever.
async fn source(mut out: Output<f32>) -> NodeResult {
    loop {
        let d = out.reserve_up_to_async(usize::MAX).await?;
        d.fill(0.0);
        let k = d.len();
        out.commit(k)?;
    }
}

/// Passes on at most `limit` items, what is readable and free per call (at
/// most a random draw per call with `rand`).
async fn pass(
    mut inp: Input<f32>,
    mut out: Output<f32>,
    mut left: u64,
    mut rand: Option<u64>,
) -> NodeResult {
    let mut calls = 0;
    while left > 0 {
        let s = inp.peek_async(1).await?;
        if s.is_empty() {
            break;
        }
        let mut k = (s.len() as u64).min(left) as usize;
        if let Some(st) = rand.as_mut() {
            k = k.min(1 + (xorshift(st) % RAND_MAX_COPY) as usize);
        }
        let d = out.reserve_up_to_async(k).await?;
        let m = d.len();
        d.copy_from_slice(&s[..m]);
        out.commit(m)?;
        inp.consume(m)?;
        left -= m as u64;
        calls += 1;
    }
    CALLS.fetch_add(calls, Ordering::Relaxed);
    Ok(())
}

/// Counts what arrives.
async fn sink(mut inp: Input<f32>, count: Arc<AtomicU64>) -> NodeResult {
    loop {
        let k = inp.peek_async(1).await?.len();
        if k == 0 {
            return Ok(());
        }
        inp.consume(k)?;
        count.fetch_add(k as u64, Ordering::Relaxed);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: handover copy|rand STAGES [PIPES] [SAMPLES] [WORKERS]";
    let rand = match args.first().map(String::as_str) {
        Some("copy") => false,
        Some("rand") => true,
        _ => return Err(usage.into()),
    };
    let num = |i: usize, default: u64| -> Result<u64, Box<dyn std::error::Error>> {
        Ok(match args.get(i) {
            Some(a) => a.parse().map_err(|_| format!("{usage}: bad {a:?}"))?,
            None => default,
        })
    };
    let stages = num(1, 10)? as usize;
    let pipes = num(2, 4)? as usize;
    let samples = num(3, 2_000_000)?;
    let workers = num(4, 1)? as usize;
    let mut g = Graph::new();
    g.set_workers(workers);
    let mut counts = Vec::new();
    for p in 0..pipes {
        let stage = |s: usize| format!("s{p}_{s}");
        let (src, h_in) = g.connect::<f32>((&format!("source{p}"), "out"), (&stage(0), "in"))?;
        g.task(&format!("source{p}"), source(src))?;
        let mut inp = h_in;
        for s in 0..=stages {
            let (out, next) = g.connect::<f32>((&stage(s), "out"), (&stage(s + 1), "in"))?;
            // Stage 0 is the head.
            let (limit, seed) = match s {
                0 => (samples, None),
                _ => (
                    u64::MAX,
                    rand.then_some(0x9E37_79B9_7F4A_7C15 ^ ((p as u64) << 32 | s as u64)),
                ),
            };
            g.task(&stage(s), pass(inp, out, limit, seed))?;
            inp = next;
        }
        let count = Arc::new(AtomicU64::new(0));
        g.task(&stage(stages + 1), sink(inp, count.clone()))?;
        counts.push(count);
    }
    let t0 = std::time::Instant::now();
    g.run()?;
    let secs = t0.elapsed().as_secs_f64();
    for c in &counts {
        let got = c.load(Ordering::Relaxed);
        if got != samples {
            return Err(format!("a sink took {got} items, not {samples}").into());
        }
    }
    let items = samples * pipes as u64 * (stages as u64 + 1);
    let calls = CALLS.load(Ordering::Relaxed);
    eprintln!(
        "{items} items handed over in {secs:.3} s ({calls} calls, {:.1} items per call)",
        items as f64 / calls as f64
    );
    Ok(())
}
