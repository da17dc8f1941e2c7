//! Node code as users write it: a select over port futures, a task that is
//! always ready, a blocking call inside a task, a port kept past its node's
//! end, a panic whose payload panics when dropped, an over-aligned item type
//! and a task woken while it is polled. Each graph ends with its outcome or
//! a named error within a bound; none hangs, starves a task, reports a false
//! deadlock or hands out a misaligned slice. Slow stages (10 ms and 200 ms
//! a step) are never stopped and give their worker back between steps; a
//! feedback deadlock beside an endless receiver is reported at once; waits
//! under another executor's `block_on` (in a task, and over a `select!` in
//! a thread node) are counted as the waits they really are.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use dmaflow::graph::{Error, Graph};

mod common;
use common::{Rng, count, run_within};

#[test]
fn a_select_over_two_port_futures_with_one_kept_across_rounds_works() {
    // The everyday async idiom: a long-lived future (a stop signal) kept
    // across the rounds of a loop that selects over it and a fresh read.
    const N: u32 = 20_000;
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(2);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("sel", "a")).unwrap();
        let (mut ob, mut ib) = g.connect::<u32>(("b", "out"), ("sel", "stop")).unwrap();
        let (mut oc, ic) = g.connect::<u64>(("sel", "sum"), ("sink", "in")).unwrap();
        g.task("a", async move {
            let mut rng = Rng(round + 1);
            let (mut oa, mut k) = (oa, 0u32);
            while k < N {
                let m = (1 + rng.below(64) as u32).min(N - k);
                oa.write_async(&(k..k + m).collect::<Vec<_>>()).await?;
                k += m;
            }
            Ok(())
        })
        .unwrap();
        g.node("b", move || {
            std::thread::sleep(Duration::from_millis(round % 5));
            Ok(ob.write(&[7])?)
        })
        .unwrap();
        g.task("sel", async move {
            let (mut sum, mut stop_seen) = (0u64, false);
            let mut stop = pin!(ib.peek_async(1));
            loop {
                tokio::select! {
                    biased;
                    r = &mut stop, if !stop_seen => {
                        assert_eq!(r?, &[7]);
                        stop_seen = true;
                    }
                    s = ia.peek_async(1) => {
                        let s = s?;
                        if s.is_empty() {
                            break;
                        }
                        sum += s.iter().map(|&x| u64::from(x)).sum::<u64>();
                        let n = s.len();
                        ia.consume(n)?;
                    }
                }
            }
            if !stop_seen {
                stop.await?;
            }
            oc.write_async(&[sum]).await?;
            Ok(())
        })
        .unwrap();
        let got = common::collect(&mut g, "sink", ic).unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let expect = u64::from(N) * u64::from(N - 1) / 2;
        assert_eq!(*got.lock().unwrap(), vec![expect], "round {round}");
    }
}

#[test]
fn a_task_whose_ports_are_always_ready_does_not_starve_another_task() {
    for workers in [1, 2] {
        let mut g = Graph::new();
        g.set_workers(workers);
        // A queue that holds all the source writes: the busy task's input is
        // always readable.
        const ALL: usize = 4 << 20;
        let (mut so, mut bi) = g
            .connect_with_capacity::<u32>(("src", "out"), ("busy", "in"), ALL)
            .unwrap();
        let (mut bo, si) = g
            .connect_with_capacity::<u32>(("busy", "out"), ("sink", "in"), ALL)
            .unwrap();
        let (o2, mut i2) = g.connect::<u32>(("src2", "out"), ("other", "in")).unwrap();
        let other_done = Arc::new(AtomicBool::new(false));
        let seen_by_busy = Arc::new(AtomicBool::new(false));
        // A fast thread source: its reader never waits.
        g.node("src", move || Ok(so.write(&vec![1; ALL])?)).unwrap();
        let (done, seen) = (other_done.clone(), seen_by_busy.clone());
        g.task("busy", async move {
            let t0 = Instant::now();
            // One item per call: always readable, always room.
            while !done.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(3) {
                if bi.peek_async(1).await?.is_empty() {
                    break;
                }
                bi.consume(1)?;
                bo.reserve_async(1).await?[0] = 1;
                bo.commit(1)?;
            }
            seen.store(done.load(Ordering::Acquire), Ordering::Release);
            Ok(())
        })
        .unwrap();
        common::collect(&mut g, "sink", si).unwrap();
        // Its items come once the busy task runs on ready queues alone.
        g.node("src2", move || {
            std::thread::sleep(Duration::from_millis(20));
            count(o2, 1000, 3, 0)
        })
        .unwrap();
        let done = other_done.clone();
        g.task("other", async move {
            let mut got = 0;
            loop {
                let n = i2.peek_async(1).await?.len();
                if n == 0 {
                    break;
                }
                got += n;
                i2.consume(n)?;
            }
            assert_eq!(got, 1000);
            done.store(true, Ordering::Release);
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap();
        assert!(
            seen_by_busy.load(Ordering::Acquire),
            "{workers} workers: the other task did not finish while the busy one ran"
        );
    }
}

#[test]
fn a_task_blocking_its_worker_stops_the_graph_naming_it() {
    // A blocking channel receive inside a task: past the limit the graph
    // ends with the task's name (the worker is left to the call).
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    let mut g = Graph::new();
    g.set_workers(1);
    g.set_task_hold_limit(Duration::from_millis(200));
    let (mut o, mut i) = g.connect::<u32>(("src", "out"), ("blocker", "in")).unwrap();
    g.task("src", async move {
        for k in 0..100_000u32 {
            o.write_async(&[k]).await?;
        }
        Ok(())
    })
    .unwrap();
    g.task("blocker", async move {
        i.peek_async(1).await?;
        let _ = rx.recv();
        Ok(())
    })
    .unwrap();
    let t0 = Instant::now();
    match run_within(g) {
        Err(Error::TaskHeldWorker { node, limit, last }) => {
            assert_eq!(node, "blocker");
            assert!(
                last.contains("src.out -> blocker.in") || last.contains("no port call"),
                "{last}"
            );
            assert_eq!(limit, Duration::from_millis(200));
        }
        other => panic!("expected the held worker reported, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    drop(tx);

    // A spin on a non-waiting call: reported, and the spin sees the stop.
    let mut g = Graph::new();
    g.set_task_hold_limit(Duration::from_millis(200));
    let (mut o, mut i) = g
        .connect::<u32>(("quiet", "out"), ("spinner", "in"))
        .unwrap();
    g.node("quiet", move || {
        // Writes nothing until the graph stops.
        while o.try_reserve(1).is_ok() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    })
    .unwrap();
    g.task("spinner", async move {
        while i.try_peek(1)?.is_none() {
            std::thread::yield_now();
        }
        Ok(())
    })
    .unwrap();
    match run_within(g) {
        Err(Error::TaskHeldWorker { node, .. }) => assert_eq!(node, "spinner"),
        other => panic!("expected the spin reported, got {other:?}"),
    }
}

#[test]
fn a_port_kept_past_its_nodes_end_never_hides_a_deadlock() {
    // Node w hands its output to a thread and returns; the thread writes on
    // (its waits are refused: the node has ended). Elsewhere a and b wait
    // on each other: the deadlock is reported with their cycle.
    let mut g = Graph::new();
    let (ow, iw) = g
        .connect_with_capacity::<u32>(("w", "out"), ("r", "in"), 1024)
        .unwrap();
    let (mut oab, mut iab) = g.connect::<u32>(("a", "out"), ("b", "in")).unwrap();
    let (mut oba, mut iba) = g.connect::<u32>(("b", "out"), ("a", "in")).unwrap();
    let (tx, helper) = std::sync::mpsc::channel();
    g.node("w", move || {
        std::thread::spawn(move || {
            let mut ow = ow;
            let r = (0..64).try_for_each(|_| ow.write(&[0; 1024]));
            let _ = tx.send(r);
        });
        Ok(())
    })
    .unwrap();
    let mut iw = iw;
    g.node("r", move || {
        loop {
            std::thread::sleep(Duration::from_millis(2));
            let n = iw.peek(1)?.len();
            if n == 0 {
                return Ok(());
            }
            iw.consume(n)?;
        }
    })
    .unwrap();
    g.node("a", move || {
        iba.peek(1)?;
        Ok(oab.write(&[1])?)
    })
    .unwrap();
    g.node("b", move || {
        iab.peek(1)?;
        Ok(oba.write(&[1])?)
    })
    .unwrap();
    match run_within(g) {
        Err(Error::Deadlock { cycle }) => {
            assert!(
                cycle.contains("a waits") && cycle.contains("b waits"),
                "{cycle}"
            );
            assert!(cycle.ends_with("closes the cycle"), "{cycle}");
        }
        other => panic!("expected the deadlock of a and b, got {other:?}"),
    }
    match helper.recv_timeout(common::BOUND) {
        Ok(Err(Error::WaitAfterEnd { node, port })) => assert_eq!((&*node, &*port), ("w", "out")),
        // It may have written everything without ever waiting, or (a
        // loaded machine starting its thread late) still be writing when
        // the deadlock stopped the graph.
        Ok(Ok(()) | Err(Error::Aborted { .. })) => {}
        other => panic!("the helper's writes: {other:?}"),
    }
}

#[test]
fn a_reader_of_a_port_kept_open_past_its_node_does_not_garble_the_cycle() {
    // r (added first) waits on w's output, which a thread keeps open after
    // w returned; a and b wait on each other: the report names their cycle.
    let mut g = Graph::new();
    let (ow, mut iw) = g.connect::<u32>(("w", "out"), ("r", "in")).unwrap();
    g.node("r", move || {
        iw.peek(1)?;
        Ok(())
    })
    .unwrap();
    let (mut oab, mut iab) = g.connect::<u32>(("a", "out"), ("b", "in")).unwrap();
    let (mut oba, mut iba) = g.connect::<u32>(("b", "out"), ("a", "in")).unwrap();
    let (release, held) = std::sync::mpsc::channel::<()>();
    g.node("w", move || {
        std::thread::spawn(move || {
            let _keep = ow;
            let _ = held.recv_timeout(common::BOUND);
        });
        Ok(())
    })
    .unwrap();
    g.node("a", move || {
        iba.peek(1)?;
        Ok(oab.write(&[1])?)
    })
    .unwrap();
    g.node("b", move || {
        iab.peek(1)?;
        Ok(oba.write(&[1])?)
    })
    .unwrap();
    let result = run_within(g);
    drop(release);
    match result {
        Err(Error::Deadlock { cycle }) => {
            assert!(
                cycle.contains("a waits") && cycle.contains("b waits"),
                "{cycle}"
            );
            assert!(!cycle.contains("r waits"), "{cycle}");
        }
        other => panic!("expected the deadlock of a and b, got {other:?}"),
    }
}

/// A panic payload whose own drop panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panics too");
    }
}

#[test]
fn a_panic_whose_payload_panics_when_dropped_is_the_graphs_error() {
    for task in [false, true] {
        let mut g = Graph::new();
        let (mut o, mut i) = g.connect::<u32>(("src", "out"), ("bad", "in")).unwrap();
        g.node("src", move || Ok(o.write(&[1, 2, 3])?)).unwrap();
        if task {
            g.task("bad", async move {
                i.peek_async(1).await?;
                std::panic::panic_any(Bomb)
            })
            .unwrap();
        } else {
            g.node("bad", move || {
                i.peek(1)?;
                std::panic::panic_any(Bomb)
            })
            .unwrap();
        }
        match run_within(g) {
            Err(Error::Panicked { node, .. }) => assert_eq!(node, "bad"),
            other => panic!("task {task}: expected the panic reported, got {other:?}"),
        }
    }
}

/// Items aligned beyond any page size in use.
#[derive(Clone, Copy)]
#[repr(C, align(65536))]
struct Aligned([u8; 65536]);

// SAFETY: a plain byte array, no padding (its size is its alignment), and
// all zeroes is a value.
unsafe impl bytemuck::Zeroable for Aligned {}
// SAFETY: as above: any bytes are a value, and it is `Copy` with no padding.
unsafe impl bytemuck::Pod for Aligned {}

#[test]
fn items_aligned_beyond_a_page_are_refused_not_handed_out_misaligned() {
    let mut g = Graph::new();
    match g.connect::<Aligned>(("w", "out"), ("r", "in")) {
        Err(Error::ItemAlignment {
            node, port, align, ..
        }) => {
            assert_eq!((&*node, &*port, align), ("w", "out", 65536));
        }
        Err(e) => panic!("expected the alignment refused, got {e}"),
        Ok(_) => panic!("expected the alignment refused, got a queue"),
    }
    // Page-aligned items are fine.
    #[derive(Clone, Copy)]
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    // SAFETY: as for `Aligned`.
    unsafe impl bytemuck::Zeroable for Page {}
    // SAFETY: as for `Aligned`.
    unsafe impl bytemuck::Pod for Page {}
    let (mut o, mut i) = g.connect::<Page>(("p", "out"), ("q", "in")).unwrap();
    g.node("p", move || {
        for _ in 0..8 {
            let s = o.reserve(3)?;
            assert_eq!(s.as_ptr() as usize % 4096, 0);
            o.commit(3)?;
        }
        Ok(())
    })
    .unwrap();
    g.node("q", move || {
        loop {
            let s = i.peek(1)?;
            if s.is_empty() {
                return Ok(());
            }
            assert_eq!(s.as_ptr() as usize % 4096, 0);
            let n = s.len();
            i.consume(n)?;
        }
    })
    .unwrap();
    g.node("w", || Ok(())).unwrap();
    g.node("r", || Ok(())).unwrap();
    run_within(g).unwrap();
}

#[test]
fn a_task_woken_during_its_poll_leaves_the_other_worker_free() {
    // Task a wakes itself in its poll, then wakes b and waits (in the same
    // poll) for b to run: the second worker must run b, not wait on a.
    for round in 0..5 {
        let mut g = Graph::new();
        g.set_workers(2);
        let b_waker: Arc<Mutex<Option<Waker>>> = Arc::default();
        let b_ran = Arc::new(AtomicBool::new(false));
        let b_ran_in_a_poll = Arc::new(AtomicU64::new(0));
        let (bw, br, seen) = (b_waker.clone(), b_ran.clone(), b_ran_in_a_poll.clone());
        g.task("a", async move {
            let mut first = true;
            std::future::poll_fn(|cx| {
                if !first {
                    return Poll::Ready(());
                }
                first = false;
                let t0 = Instant::now();
                while bw.lock().unwrap().is_none() {
                    assert!(t0.elapsed() < Duration::from_secs(5), "b never polled");
                    std::thread::yield_now();
                }
                cx.waker().wake_by_ref();
                std::thread::sleep(Duration::from_millis(30));
                bw.lock().unwrap().take().unwrap().wake();
                let t0 = Instant::now();
                while !br.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(1) {
                    std::thread::yield_now();
                }
                seen.store(u64::from(br.load(Ordering::Acquire)), Ordering::Release);
                Poll::Pending
            })
            .await;
            Ok(())
        })
        .unwrap();
        let (bw, br) = (b_waker.clone(), b_ran.clone());
        g.task("b", async move {
            let mut first = true;
            std::future::poll_fn(|cx| {
                if first {
                    first = false;
                    *bw.lock().unwrap() = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                br.store(true, Ordering::Release);
                Poll::Ready(())
            })
            .await;
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap();
        assert_eq!(
            b_ran_in_a_poll.load(Ordering::Acquire),
            1,
            "round {round}: b did not run while a's poll went on"
        );
    }
}

#[test]
fn a_port_read_by_another_task_while_its_own_node_waits_ends_the_graph() {
    port_read_by_another_node(false);
}

#[test]
fn a_port_read_by_another_thread_node_while_its_own_node_waits_ends_the_graph() {
    port_read_by_another_node(true);
}

fn port_read_by_another_node(thread: bool) {
    // Node x's input is read by node y (a task, or a thread node through
    // block_on) while x's own body waits on another port: the wait of y is
    // left with the runtime as x's, whose one waker slot then holds y's
    // waker, and x is never woken: the graph must end (read whole, or the
    // misuse refused by name), not hang.
    const N: u32 = 5_000;
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (oa, ia) = g.connect::<u32>(("a", "out"), ("x", "in")).unwrap();
        let (mut od, mut id) = g.connect::<u32>(("y", "done"), ("x", "done")).unwrap();
        g.node("a", move || {
            std::thread::sleep(Duration::from_millis(round % 4));
            count(oa, N, round + 1, 0)
        })
        .unwrap();
        let got = Arc::new(Mutex::new((0u64, 0u32)));
        let (g1, g2) = (got.clone(), got.clone());
        g.task("x", async move {
            let s = id.peek_async(1).await?;
            g2.lock().unwrap().1 = s.first().copied().unwrap_or(0);
            let n = s.len();
            id.consume(n)?;
            Ok(())
        })
        .unwrap();
        let y = async move {
            let (mut ia, mut sum) = (ia, 0u64);
            loop {
                let s = ia.peek_async(1).await?;
                if s.is_empty() {
                    break;
                }
                sum += s.iter().map(|&v| u64::from(v)).sum::<u64>();
                let n = s.len();
                ia.consume(n)?;
            }
            g1.lock().unwrap().0 = sum;
            od.write_async(&[9]).await?;
            Ok(())
        };
        if !thread {
            g.task("y", y).unwrap();
        } else {
            g.node("y", move || dmaflow::graph::block_on(y)).unwrap();
        }
        let r = run_within(g);
        let (sum, done) = *got.lock().unwrap();
        let all = u64::from(N) * u64::from(N - 1) / 2;
        match r {
            Ok(()) => assert_eq!((sum, done), (all, 9), "round {round}"),
            // Refused by name: the port is x's, waited on by y's body.
            Err(e) => assert!(
                e.to_string().contains("port in") || e.to_string().contains("port done"),
                "round {round}: {e}"
            ),
        }
    }
}

/// A stage's step of `ms` milliseconds of work (a large FFT, a decoder):
/// to the runtime, time spent between port calls, whatever fills it.
fn work(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

#[test]
fn a_slow_middle_stage_is_never_stopped_by_a_short_hold_limit() {
    // 10 ms a step under a 0.5 s limit, 150 steps (three limits' worth):
    // its input always full, its output always drained, it never waits at
    // a port; only the time since its last port call counts.
    const N: u32 = 150;
    let mut g = Graph::new();
    g.set_workers(2);
    g.set_task_hold_limit(Duration::from_millis(500));
    let (mut so, mut mi) = g.connect::<u32>(("src", "out"), ("fft", "in")).unwrap();
    let (mut mo, si) = g.connect::<u32>(("fft", "out"), ("sink", "in")).unwrap();
    g.task("src", async move {
        for k in 0..N {
            so.write_async(&[k]).await?;
        }
        Ok(())
    })
    .unwrap();
    g.task("fft", async move {
        loop {
            let s = mi.peek_async(1).await?;
            if s.is_empty() {
                return Ok(());
            }
            let v = s[0];
            work(10);
            mi.consume(1)?;
            mo.write_async(&[v * 2]).await?;
        }
    })
    .unwrap();
    let got = common::collect(&mut g, "sink", si).unwrap();
    run_within(g).unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        (0..N).map(|k| k * 2).collect::<Vec<_>>()
    );
}

#[test]
fn a_slow_stage_gives_its_worker_back_between_steps() {
    // 200 ms a step under the default limit, on one worker beside another
    // pipeline: between any two of its steps the other pipeline runs.
    const STEPS: u32 = 4;
    let mut g = Graph::new();
    g.set_workers(1);
    let (mut so, mut mi) = g.connect::<u32>(("src", "out"), ("decoder", "in")).unwrap();
    let (mut mo, si) = g
        .connect::<u32>(("decoder", "out"), ("sink", "in"))
        .unwrap();
    let (mut to, mut ti) = g.connect::<u32>(("tick", "out"), ("tock", "in")).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let ticks = Arc::new(AtomicU64::new(0));
    g.task("src", async move {
        for k in 0..STEPS {
            so.write_async(&[k]).await?;
        }
        Ok(())
    })
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (d, t, s2) = (done.clone(), ticks.clone(), seen.clone());
    g.task("decoder", async move {
        loop {
            let s = mi.peek_async(1).await?;
            if s.is_empty() {
                d.store(true, Ordering::Release);
                return Ok(());
            }
            let v = s[0];
            s2.lock().unwrap().push(t.load(Ordering::Acquire));
            work(200);
            mi.consume(1)?;
            mo.write_async(&[v]).await?;
        }
    })
    .unwrap();
    let got = common::collect(&mut g, "sink", si).unwrap();
    // The other pipeline: its progress is every item written or read.
    let (d, t) = (done.clone(), ticks.clone());
    g.task("tick", async move {
        while !d.load(Ordering::Acquire) {
            to.write_async(&[1]).await?;
            t.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    })
    .unwrap();
    let t = ticks.clone();
    g.task("tock", async move {
        loop {
            let n = ti.peek_async(1).await?.len();
            if n == 0 {
                return Ok(());
            }
            t.fetch_add(n as u64, Ordering::AcqRel);
            ti.consume(n)?;
        }
    })
    .unwrap();
    run_within(g).unwrap();
    assert_eq!(*got.lock().unwrap(), (0..STEPS).collect::<Vec<_>>());
    let seen = seen.lock().unwrap();
    assert!(
        seen.windows(2).all(|w| w[1] > w[0]),
        "the other pipeline did not run between the slow stage's steps: ticks seen at each step {seen:?}"
    );
}

#[test]
fn a_feedback_deadlock_beside_an_endless_receiver_is_reported() {
    // a and b each wait to read what the other writes (a feedback loop
    // without its first item) while a receiver writes on, forever, into a
    // queue a reads only after b: a deadlock no growth can break.
    let mut g = Graph::new();
    g.set_queue_limit(256 << 20);
    let (mut rx_out, mut a_samples) = g.connect::<f32>(("rx", "out"), ("a", "samples")).unwrap();
    let (mut ab, mut b_in) = g.connect::<f32>(("a", "out"), ("b", "in")).unwrap();
    let (mut ba, mut a_fb) = g.connect::<f32>(("b", "out"), ("a", "fb")).unwrap();
    g.node("rx", move || {
        let block = vec![0.5f32; 4096];
        loop {
            rx_out.write(&block)?;
        }
    })
    .unwrap();
    g.task("a", async move {
        loop {
            let fb = a_fb.peek_async(1).await?[0];
            a_fb.consume(1)?;
            let s = a_samples.peek_async(1).await?;
            let y = s[0] + fb;
            a_samples.consume(1)?;
            ab.write_async(&[y]).await?;
        }
    })
    .unwrap();
    g.task("b", async move {
        loop {
            let x = b_in.peek_async(1).await?[0];
            b_in.consume(1)?;
            ba.write_async(&[x * 0.5]).await?;
        }
    })
    .unwrap();
    match run_within(g) {
        Err(Error::Deadlock { cycle }) => {
            assert!(
                cycle.contains("a.out -> b.in") && cycle.contains("b.out -> a.fb"),
                "{cycle}"
            );
            assert!(!cycle.contains("rx"), "{cycle}");
        }
        other => panic!("expected the feedback deadlock, got {other:?}"),
    }
}

#[test]
fn a_port_read_under_another_executors_block_on_in_a_task_keeps_its_node_counted() {
    // Task t reads its first item under tokio's block_on (it waits there,
    // then goes on), then waits on u, which waits on t: a real deadlock,
    // to be reported, not left running for ever.
    let mut g = Graph::new();
    g.set_workers(2);
    let (mut so, mut t_first) = g.connect::<u32>(("src", "out"), ("t", "first")).unwrap();
    let (mut uo, mut t_in) = g.connect::<u32>(("u", "out"), ("t", "in")).unwrap();
    let (mut to, mut u_in) = g.connect::<u32>(("t", "out"), ("u", "in")).unwrap();
    g.node("src", move || {
        std::thread::sleep(Duration::from_millis(50));
        Ok(so.write(&[1])?)
    })
    .unwrap();
    g.task("t", async move {
        let rt = tokio::runtime::Builder::new_current_thread().build()?;
        let first = rt.block_on(async { Ok::<_, Error>(t_first.peek_async(1).await?[0]) })?;
        t_first.consume(1)?;
        let x = t_in.peek_async(1).await?[0];
        to.write_async(&[x + first]).await?;
        Ok(())
    })
    .unwrap();
    g.task("u", async move {
        let x = u_in.peek_async(1).await?[0];
        uo.write_async(&[x]).await?;
        Ok(())
    })
    .unwrap();
    match run_within(g) {
        Err(Error::Deadlock { cycle }) => {
            assert!(
                cycle.contains("u.out -> t.in") && cycle.contains("t.out -> u.in"),
                "{cycle}"
            )
        }
        other => panic!("expected the deadlock of t and u, got {other:?}"),
    }
}

#[test]
fn a_thread_node_selecting_under_tokios_block_on_over_an_empty_and_a_ready_port_runs() {
    // The select polls the empty port first (biased): its node must not
    // count as blocked while the ready port lets it go on.
    const N: u32 = 2_000;
    for round in 0..3u64 {
        let mut g = Graph::new();
        let (oa, mut ready) = g.connect::<u32>(("src", "out"), ("sel", "ready")).unwrap();
        let (ow, mut empty) = g.connect::<u32>(("w", "out"), ("sel", "empty")).unwrap();
        let (mut os, mut wi) = g.connect::<u64>(("sel", "sum"), ("w", "in")).unwrap();
        g.node("src", move || count(oa, N, round + 1, 0)).unwrap();
        g.node("sel", move || {
            // Once src has written everything and ended (and w waits on
            // sel): the graph's last running node is this one.
            let t0 = Instant::now();
            while ready.try_peek(N as usize + 1)?.is_none() {
                assert!(t0.elapsed() < Duration::from_secs(5), "src never ended");
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(20));
            let rt = tokio::runtime::Builder::new_current_thread().build()?;
            rt.block_on(async move {
                let mut sum = 0u64;
                loop {
                    tokio::select! {
                        biased;
                        e = empty.peek_async(1) => {
                            if e?.is_empty() {
                                break;
                            }
                            return Err("w wrote before it was given the sum".into());
                        }
                        r = ready.peek_async(1) => {
                            let r = r?;
                            if r.is_empty() {
                                break;
                            }
                            sum += r.iter().map(|&v| u64::from(v)).sum::<u64>();
                            let n = r.len();
                            ready.consume(n)?;
                        }
                    }
                }
                os.write_async(&[sum]).await?;
                Ok::<(), dmaflow::graph::BoxError>(())
            })
        })
        .unwrap();
        let total = Arc::new(AtomicU64::new(0));
        let t = total.clone();
        g.node("w", move || {
            let s = wi.peek(1)?;
            t.store(s[0], Ordering::Release);
            let n = s.len();
            wi.consume(n)?;
            drop(ow);
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(
            total.load(Ordering::Acquire),
            u64::from(N) * u64::from(N - 1) / 2,
            "round {round}"
        );
    }
}

#[test]
fn a_feedback_deadlock_beside_an_endless_pipeline_is_reported() {
    // An endless source into an endless sink never lets every node wait:
    // the feedback loop beside it is a deadlock all the same (tasks: seen
    // by the watchdog; threads: seen as the last of them blocks).
    for tasks in [true, false] {
        let mut g = Graph::new();
        let (mut so, mut si) = g.connect::<f32>(("src", "out"), ("sink", "in")).unwrap();
        let (mut ab, mut b_in) = g.connect::<f32>(("a", "out"), ("b", "in")).unwrap();
        let (mut ba, mut a_in) = g.connect::<f32>(("b", "out"), ("a", "in")).unwrap();
        g.task("src", async move {
            loop {
                so.write_async(&[0.5; 256]).await?;
            }
        })
        .unwrap();
        g.task("sink", async move {
            loop {
                let n = si.peek_async(1).await?.len();
                si.consume(n)?;
            }
        })
        .unwrap();
        if tasks {
            g.task("a", async move {
                let x = a_in.peek_async(1).await?[0];
                Ok(ab.write_async(&[x]).await?)
            })
            .unwrap();
            g.task("b", async move {
                let x = b_in.peek_async(1).await?[0];
                Ok(ba.write_async(&[x]).await?)
            })
            .unwrap();
        } else {
            g.node("a", move || {
                let x = a_in.peek(1)?[0];
                Ok(ab.write(&[x])?)
            })
            .unwrap();
            g.node("b", move || {
                let x = b_in.peek(1)?[0];
                Ok(ba.write(&[x])?)
            })
            .unwrap();
        }
        match run_within(g) {
            Err(Error::Deadlock { cycle }) => assert!(
                cycle.contains("a.out -> b.in") && cycle.contains("b.out -> a.in"),
                "tasks {tasks}: {cycle}"
            ),
            other => panic!("tasks {tasks}: expected the feedback deadlock, got {other:?}"),
        }
    }
}
