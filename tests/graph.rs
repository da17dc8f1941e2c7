//! Process networks: lifecycle, bounded scheduling, deadlock, failures, determinism.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dmaflow::graph::{Error, Graph, Input, Output};
use dmaflow::ring;

mod common;
use common::Rng;

/// Drains `inp` into a shared vector.
fn sink(g: &mut Graph, name: &str, mut inp: Input<u32>) -> Arc<Mutex<Vec<u32>>> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let o = out.clone();
    g.node(name, move || {
        loop {
            let s = inp.peek(1)?;
            if s.is_empty() {
                return Ok(());
            }
            o.lock().unwrap().extend_from_slice(s);
            let n = s.len();
            inp.consume(n)?;
        }
    })
    .unwrap();
    out
}

#[test]
fn artificial_deadlock_grows_the_smallest_full_queue() {
    // The source writes all of A before any of B; the join needs one of each. With
    // small queues that would stall for ever; the runtime grows A instead.
    let mut g = Graph::new();
    let (mut a_out, mut a_in) = g
        .connect_with_capacity::<u32>(("src", "a"), ("join", "a"), 1)
        .unwrap();
    let (mut b_out, mut b_in) = g
        .connect_with_capacity::<u32>(("src", "b"), ("join", "b"), 1)
        .unwrap();
    let (mut j_out, j_in) = g.connect::<u32>(("join", "out"), ("sink", "in")).unwrap();
    let small = a_out.capacity();
    let n = 10 * small as u32;
    g.node("src", move || {
        let all: Vec<u32> = (0..n).collect();
        a_out.write(&all)?;
        b_out.write(&all)?;
        Ok(())
    })
    .unwrap();
    g.node("join", move || {
        loop {
            let a = a_in.peek(1)?;
            if a.is_empty() {
                return Ok(());
            }
            let x = a[0];
            a_in.consume(1)?;
            let b = b_in.peek(1)?;
            let y = b[0];
            b_in.consume(1)?;
            j_out.write(&[x + y])?;
        }
    })
    .unwrap();
    let got = sink(&mut g, "sink", j_in);
    g.run().unwrap();
    let got = got.lock().unwrap();
    assert_eq!(got.len(), n as usize);
    assert!(got.iter().enumerate().all(|(i, &v)| v == 2 * i as u32));
}

#[test]
fn real_deadlock_is_reported_with_its_cycle() {
    let mut g = Graph::new();
    let (mut p_out, mut p_in) = g.connect::<u8>(("ping", "out"), ("pong", "in")).unwrap();
    let (mut q_out, mut q_in) = g.connect::<u8>(("pong", "out"), ("ping", "in")).unwrap();
    g.node("ping", move || {
        let _ = q_in.peek(1)?; // waits for pong, which waits for ping
        p_out.write(&[1])?;
        Ok(())
    })
    .unwrap();
    g.node("pong", move || {
        let _ = p_in.peek(1)?;
        q_out.write(&[1])?;
        Ok(())
    })
    .unwrap();
    match g.run() {
        Err(Error::Deadlock { cycle }) => {
            assert!(cycle.contains("ping") && cycle.contains("pong"), "{cycle}");
            assert!(
                cycle.contains("pong.out -> ping.in") || cycle.contains("ping.out -> pong.in"),
                "{cycle}"
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn threshold_beyond_the_queue_grows_it() {
    let mut g = Graph::new();
    let (mut out, mut inp) = g
        .connect_with_capacity::<u32>(("src", "out"), ("win", "in"), 16)
        .unwrap();
    let cap = out.capacity();
    let window = 5 * cap;
    let total = 20 * cap as u32;
    g.node("src", move || {
        for i in 0..total {
            out.write(&[i])?;
        }
        Ok(())
    })
    .unwrap();
    let sums = Arc::new(Mutex::new(Vec::new()));
    let s2 = sums.clone();
    g.node("win", move || {
        loop {
            let s = inp.peek(window)?;
            if s.len() < window {
                return Ok(());
            }
            s2.lock()
                .unwrap()
                .push(s[..window].iter().map(|&x| x as u64).sum::<u64>());
            inp.consume(cap)?;
        }
    })
    .unwrap();
    g.run().unwrap();
    let sums = sums.lock().unwrap();
    assert_eq!(sums.len(), 20 - 5 + 1);
    for (k, &s) in sums.iter().enumerate() {
        let first = (k * cap) as u64;
        let w = window as u64;
        assert_eq!(s, w * first + w * (w - 1) / 2);
    }
}

#[test]
fn a_failing_node_stops_the_graph_with_its_error() {
    let mut g = Graph::new();
    let (mut out, mut inp) = g
        .connect_with_capacity::<u32>(("src", "out"), ("bad", "in"), 1)
        .unwrap();
    g.node("src", move || {
        // Would block for ever on the full queue once `bad` stops reading.
        for i in 0.. {
            out.write(&[i])?;
        }
        Ok(())
    })
    .unwrap();
    g.node("bad", move || {
        let _ = inp.peek(10)?;
        Err("sensor unplugged".into())
    })
    .unwrap();
    match g.run() {
        Err(e @ Error::Node { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("bad") && msg.contains("sensor unplugged"),
                "{msg}"
            );
        }
        other => panic!("expected the node's error, got {other:?}"),
    }
}

#[test]
fn a_panicking_node_stops_the_graph() {
    let mut g = Graph::new();
    let (mut out, mut inp) = g.connect::<u32>(("src", "out"), ("boom", "in")).unwrap();
    let (mut o2, i2) = g.connect::<u32>(("boom", "out"), ("sink", "in")).unwrap();
    g.node("src", move || {
        for i in 0..1_000_000 {
            out.write(&[i])?;
        }
        Ok(())
    })
    .unwrap();
    g.node("boom", move || {
        let s = inp.peek(100)?;
        o2.write(&s[..10])?;
        panic!("division by zero in boom");
    })
    .unwrap();
    sink(&mut g, "sink", i2);
    match g.run() {
        Err(Error::Panicked { node, message }) => {
            assert_eq!(node, "boom");
            assert!(message.contains("division by zero"));
        }
        other => panic!("expected a panic error, got {other:?}"),
    }
}

#[test]
fn building_errors_are_named() {
    let mut g = Graph::new();
    let (_o, _i) = g.connect::<u8>(("a", "out"), ("b", "in")).unwrap();
    assert!(
        matches!(g.connect::<u8>(("a", "out"), ("c", "in")), Err(Error::DuplicatePort { node, port }) if node == "a" && port == "out")
    );
    g.node("a", || Ok(())).unwrap();
    assert!(matches!(g.node("a", || Ok(())), Err(Error::DuplicateNode(n)) if n == "a"));
    assert!(matches!(g.run(), Err(Error::NoBody(n)) if n == "b"));
}

#[test]
fn port_errors_name_node_and_port() {
    let mut g = Graph::new();
    let (mut out, inp) = g.connect::<u8>(("src", "out"), ("lazy", "in")).unwrap();
    g.node("src", move || {
        out.write(&[1])?;
        out.commit(5)?; // nothing reserved
        Ok(())
    })
    .unwrap();
    g.node("lazy", move || {
        drop(inp);
        Ok(())
    })
    .unwrap();
    let e = g.run().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("src") && msg.contains("out"), "{msg}");
}

/// Forks, joins and a feedback loop, with random chunking, thresholds, sleeps and
/// queue sizes; the output must be the same every time.
fn random_run(seed: u64, n: u32) -> Vec<u32> {
    let mut rng = Rng(seed);
    let mut cap = || 1 + rng.below(3000);
    let mut g = Graph::new();
    let (mut src_out, a_in) = g
        .connect_with_capacity::<u32>(("src", "out"), ("a", "in"), cap())
        .unwrap();
    let b_in = g.tap(&mut src_out, ("b", "in")).unwrap();
    let (a_out, ja_in) = g
        .connect_with_capacity::<u32>(("a", "out"), ("join", "a"), cap())
        .unwrap();
    let (b_out, jb_in) = g
        .connect_with_capacity::<u32>(("b", "out"), ("join", "b"), cap())
        .unwrap();
    let (mut fb_out, mut fb_in) = g
        .connect_with_capacity::<u32>(("delay", "out"), ("join", "fb"), cap())
        .unwrap();
    let (mut j_out, mut d_in) = g
        .connect_with_capacity::<u32>(("join", "out"), ("delay", "in"), cap())
        .unwrap();
    let s_in = g.tap(&mut j_out, ("sink", "in")).unwrap();

    let mut r = Rng(seed ^ 0x5555);
    g.node("src", move || {
        let mut i = 0u32;
        while i < n {
            let k = (1 + r.below(700) as u32).min(n - i);
            let s = src_out.reserve(k as usize)?;
            for (j, x) in s.iter_mut().enumerate() {
                *x = i + j as u32;
            }
            src_out.commit(k as usize)?;
            i += k;
            if r.below(50) == 0 {
                std::thread::sleep(Duration::from_micros(r.below(300) as u64));
            }
        }
        Ok(())
    })
    .unwrap();
    fn map(
        mut inp: Input<u32>,
        mut out: Output<u32>,
        seed: u64,
        f: fn(u32) -> u32,
    ) -> dmaflow::graph::NodeResult {
        let mut r = Rng(seed);
        loop {
            let t = 1 + r.below(2500);
            let s = inp.peek(t)?;
            if s.is_empty() {
                return Ok(());
            }
            let take = 1 + r.below(s.len());
            let mapped: Vec<u32> = s[..take].iter().map(|&x| f(x)).collect();
            inp.consume(take)?;
            out.write(&mapped)?;
            if r.below(40) == 0 {
                std::thread::sleep(Duration::from_micros(r.below(200) as u64));
            }
        }
    }
    g.node("a", move || {
        map(a_in, a_out, seed ^ 1, |x| x.wrapping_mul(3))
    })
    .unwrap();
    g.node("b", move || {
        map(b_in, b_out, seed ^ 2, |x| x.wrapping_add(7))
    })
    .unwrap();
    let (mut ja_in, mut jb_in) = (ja_in, jb_in);
    g.node("join", move || {
        loop {
            let a = ja_in.peek(1)?;
            if a.is_empty() {
                return Ok(());
            }
            let x = a[0];
            ja_in.consume(1)?;
            let y = jb_in.peek(1)?[0];
            jb_in.consume(1)?;
            let z = fb_in.peek(1)?[0];
            fb_in.consume(1)?;
            j_out.write(&[x.wrapping_add(y).wrapping_add(z) % 1_000_003])?;
        }
    })
    .unwrap();
    g.node("delay", move || {
        fb_out.write(&[0])?; // the initial token of the feedback loop
        loop {
            // One token circulates: a threshold above 1 would be a real deadlock.
            let s = d_in.peek(1)?;
            if s.is_empty() {
                return Ok(());
            }
            let v = s.to_vec();
            d_in.consume(v.len())?;
            match fb_out.write(&v) {
                // The join has finished and left: the loop is over.
                Err(Error::Port {
                    source: ring::Error::Closed,
                    ..
                }) => return Ok(()),
                other => other?,
            }
        }
    })
    .unwrap();
    let out = sink(&mut g, "sink", s_in);
    g.run().unwrap();
    out.lock().unwrap().clone()
}

#[test]
fn output_is_the_same_for_every_schedule() {
    let n = 20_000u32;
    let mut expect = Vec::with_capacity(n as usize);
    let mut fb = 0u32;
    for x in 0..n {
        let z = (x
            .wrapping_mul(3)
            .wrapping_add(x.wrapping_add(7))
            .wrapping_add(fb))
            % 1_000_003;
        expect.push(z);
        fb = z;
    }
    for seed in 1..=12u64 {
        let got = random_run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), n);
        assert_eq!(got.len(), expect.len(), "seed {seed}");
        assert!(got == expect, "seed {seed}: output differs");
    }
}

#[test]
fn a_reader_closed_keeping_memory_sees_its_window_unchanged_while_the_writer_runs_on() {
    // Two readers of one queue; one closes while slices of its window are
    // still in use elsewhere (what a Python node that kept a view does). The
    // writer runs on for many laps: what that window showed never changes.
    let mut g = Graph::new();
    let (mut out, mut early) = g
        .connect_with_capacity::<u32>(("src", "out"), ("early", "in"), 1)
        .unwrap();
    let rest = g.tap(&mut out, ("rest", "in")).unwrap();
    let cap = out.capacity();
    let n = 50 * cap as u32;
    g.node("src", move || {
        let all: Vec<u32> = (0..n).collect();
        out.write(&all)?;
        Ok(())
    })
    .unwrap();
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    g.node("early", move || {
        let w = early.peek(100)?;
        let (ptr, len) = (w.as_ptr() as usize, w.len());
        let before = w.to_vec();
        let hold = early.close_keeping_memory();
        // Let the writer run laps meanwhile.
        std::thread::sleep(Duration::from_millis(30));
        // SAFETY: `hold` keeps the memory mapped; the writer moved the queue
        // to new memory before reusing any of these slots (what is tested).
        let after: Vec<u32> =
            unsafe { std::slice::from_raw_parts(ptr as *const u32, len) }.to_vec();
        *s.lock().unwrap() = Some((before, after));
        drop(hold);
        Ok(())
    })
    .unwrap();
    let got = sink(&mut g, "rest", rest);
    g.run().unwrap();
    let (before, after) = seen.lock().unwrap().take().unwrap();
    assert_eq!(before, after, "the window changed under its holder");
    assert_eq!(got.lock().unwrap().len() as u32, n);
}

#[test]
fn reserve_up_to_gives_the_free_slots_and_never_more_than_asked() {
    // A writer that takes whatever room there is, as GNU Radio's work does,
    // a thread beside a task reader: every item arrives, in order, and no
    // reservation is empty or larger than asked.
    let mut g = Graph::new();
    let (mut out, mut inp) = g
        .connect_with_capacity::<u32>(("w", "out"), ("r", "in"), 1000)
        .unwrap();
    let sizes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = sizes.clone();
    g.node("w", move || {
        let mut i = 0u32;
        while i < 100_000 {
            let d = out.reserve_up_to(700)?;
            seen.lock().unwrap().push(d.len());
            for x in d.iter_mut() {
                *x = i;
                i += 1;
            }
            let k = d.len();
            out.commit(k)?;
        }
        Ok(())
    })
    .unwrap();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let put = got.clone();
    g.task("r", async move {
        loop {
            let s = inp.peek_async(1).await?;
            if s.is_empty() {
                return Ok(());
            }
            put.lock().unwrap().extend_from_slice(s);
            let k = s.len();
            inp.consume(k)?;
        }
    })
    .unwrap();
    common::run_within(g).unwrap();
    let got = got.lock().unwrap();
    assert!(got.iter().enumerate().all(|(i, &x)| x == i as u32) && got.len() >= 100_000);
    assert!(
        sizes
            .lock()
            .unwrap()
            .iter()
            .all(|&k| (1..=700).contains(&k))
    );
}
