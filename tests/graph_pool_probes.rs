//! The task pool (per-worker queues, a shared queue for wakes from outside,
//! stealing) under node code as users write it: tasks woken from plain
//! threads and from a tokio runtime, graphs running side by side and one
//! inside another's node, many pipes on few or many workers, tasks that
//! yield themselves beside tasks fed by threads, wakers kept past the
//! graph's end, panics and the watchdog while other tasks are queued, and
//! sub-futures polled with wakers of their own.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use dmaflow::graph::{Error, Graph, Input, NodeResult, Output};

mod common;
use common::{BOUND, Rng, collect, count, run_within, sum_to_end};

/// Rounds each probe runs, to catch races.
const ROUNDS: u64 = 20;

/// An event fired from outside the graph: a count of fires and the waker
/// of the task waiting for the next one (a hand-made oneshot/notify, as a
/// user would write one).
#[derive(Default)]
struct Signal {
    state: Mutex<(u64, Option<Waker>)>,
}

impl Signal {
    fn fire(&self) {
        let waker = {
            let mut s = self.state.lock().unwrap();
            s.0 += 1;
            s.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn fired(&self) -> u64 {
        self.state.lock().unwrap().0
    }

    /// Ready once fired `n` times.
    fn wait(&self, n: u64) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            let mut s = self.state.lock().unwrap();
            if s.0 >= n {
                return Poll::Ready(());
            }
            s.1 = Some(cx.waker().clone());
            Poll::Pending
        })
    }
}

/// `tokio::task::yield_now` as users write it by hand: wakes itself, then
/// pending once.
async fn yield_now() {
    let mut done = false;
    std::future::poll_fn(move |cx| {
        if done {
            return Poll::Ready(());
        }
        done = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// Spins (yielding the thread) until `f` holds, at most [`BOUND`].
fn spin_until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < BOUND, "waited {BOUND:?} for {what}");
        std::thread::yield_now();
    }
}

/// A task that writes `0..n` in pieces of 1 to `max` items drawn from `seed`.
async fn count_async(mut out: Output<u32>, n: u32, seed: u64, max: usize) -> NodeResult {
    let mut rng = Rng(seed);
    let mut k = 0;
    while k < n {
        let m = (1 + rng.below(max)).min((n - k) as usize);
        let s = out.reserve_up_to_async(m).await?;
        let m = s.len();
        for (i, x) in s.iter_mut().enumerate() {
            *x = k + i as u32;
        }
        out.commit(m)?;
        k += m as u32;
    }
    Ok(())
}

/// A task that passes `x * 3 + add` on, peeking with random thresholds and
/// consuming random amounts.
async fn map_async(mut inp: Input<u32>, mut out: Output<u32>, add: u32, seed: u64) -> NodeResult {
    let mut rng = Rng(seed);
    loop {
        let t = 1 + rng.below(16);
        let s = inp.peek_async(t).await?;
        if s.is_empty() {
            return Ok(());
        }
        let take = 1 + rng.below(s.len());
        let v: Vec<u32> = s[..take].iter().map(|&x| x * 3 + add).collect();
        inp.consume(take)?;
        out.write_async(&v).await?;
    }
}

/// A task that gathers its input into `got`.
async fn gather_async(mut inp: Input<u32>, got: Arc<Mutex<Vec<u32>>>) -> NodeResult {
    let mut all = Vec::new();
    loop {
        let s = inp.peek_async(1).await?;
        if s.is_empty() {
            break;
        }
        all.extend_from_slice(s);
        let n = s.len();
        inp.consume(n)?;
    }
    *got.lock().unwrap() = all;
    Ok(())
}

/// Adds pipe `p` (a source, a mapper and a gathering task) to `g`; the
/// source is a thread node when `thread_src`. Returns what the sink got.
fn add_pipe(g: &mut Graph, p: usize, n: u32, seed: u64, thread_src: bool) -> Arc<Mutex<Vec<u32>>> {
    let (src, map, sink) = (format!("src{p}"), format!("map{p}"), format!("sink{p}"));
    let (o1, i1) = g.connect::<u32>((&src, "out"), (&map, "in")).unwrap();
    let (o2, i2) = g.connect::<u32>((&map, "out"), (&sink, "in")).unwrap();
    if thread_src {
        g.node(&src, move || count(o1, n, seed, 0)).unwrap();
    } else {
        g.task(&src, count_async(o1, n, seed, 200)).unwrap();
    }
    g.task(&map, map_async(i1, o2, p as u32, seed ^ 0x55))
        .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    g.task(&sink, gather_async(i2, got.clone())).unwrap();
    got
}

fn expected_pipe(p: usize, n: u32) -> Vec<u32> {
    (0..n).map(|x| x * 3 + p as u32).collect()
}

#[test]
fn tasks_woken_from_a_plain_thread_and_a_tokio_thread_run_beside_a_yielding_task() {
    // Each of the tokio side's fires waits a timer tick (about 1 ms): a few
    // rounds of 100 keep the test short.
    const R: u64 = 100;
    for round in 0..4 {
        for workers in [1, 2] {
            let mut g = Graph::new();
            g.set_workers(workers);
            let got = add_pipe(&mut g, 0, 4000, round + 1, false);
            let sigs: Vec<Arc<Signal>> = (0..2).map(|_| Arc::new(Signal::default())).collect();
            let progress: Vec<Arc<AtomicU64>> =
                (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
            let ended = Arc::new(AtomicUsize::new(0));
            let mut outs = Vec::new();
            for k in 0..2 {
                let name = format!("ext{k}");
                let (mut o, i) = g
                    .connect::<u32>((&name, "out"), (&format!("c{k}"), "in"))
                    .unwrap();
                outs.push(collect(&mut g, &format!("c{k}"), i).unwrap());
                let (sig, prog, ended) = (sigs[k].clone(), progress[k].clone(), ended.clone());
                g.task(&name, async move {
                    for r in 1..=R {
                        sig.wait(r).await;
                        o.write_async(&[r as u32]).await?;
                        prog.store(r, Ordering::Release);
                    }
                    ended.fetch_add(1, Ordering::AcqRel);
                    Ok(())
                })
                .unwrap();
            }
            // Always ready: it yields itself until both woken tasks are done.
            let e2 = ended.clone();
            g.task("yielder", async move {
                let t0 = Instant::now();
                while e2.load(Ordering::Acquire) < 2 {
                    if t0.elapsed() > BOUND {
                        return Err("the tasks woken from outside starved".into());
                    }
                    yield_now().await;
                }
                Ok(())
            })
            .unwrap();
            // Fired from a plain thread.
            let (s0, p0) = (sigs[0].clone(), progress[0].clone());
            let plain = std::thread::spawn(move || {
                for r in 1..=R {
                    spin_until("ext0's progress", || p0.load(Ordering::Acquire) >= r - 1);
                    s0.fire();
                }
            });
            // Fired from a tokio runtime's thread, inside a tokio task.
            let (s1, p1) = (sigs[1].clone(), progress[1].clone());
            let tok = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    tokio::spawn(async move {
                        let t0 = Instant::now();
                        for r in 1..=R {
                            while p1.load(Ordering::Acquire) < r - 1 {
                                assert!(t0.elapsed() < BOUND, "ext1 made no progress");
                                tokio::time::sleep(Duration::from_micros(20)).await;
                            }
                            s1.fire();
                        }
                    })
                    .await
                    .unwrap();
                });
            });
            run_within(g).unwrap_or_else(|e| panic!("round {round}, {workers} workers: {e}"));
            plain.join().unwrap();
            tok.join().unwrap();
            assert_eq!(*got.lock().unwrap(), expected_pipe(0, 4000));
            for (k, out) in outs.iter().enumerate() {
                let want: Vec<u32> = (1..=R as u32).collect();
                assert_eq!(*out.lock().unwrap(), want, "ext{k}, round {round}");
                assert_eq!(sigs[k].fired(), R);
            }
        }
    }
}

/// A graph of `pipes` pipes; returns it with what each pipe's sink got.
fn pipes_graph(
    pipes: usize,
    n: u32,
    seed: u64,
    workers: usize,
) -> (Graph, Vec<Arc<Mutex<Vec<u32>>>>) {
    let mut g = Graph::new();
    g.set_workers(workers);
    let got = (0..pipes)
        .map(|p| add_pipe(&mut g, p, n, seed + p as u64, p % 5 == 4))
        .collect();
    (g, got)
}

fn check_pipes(got: &[Arc<Mutex<Vec<u32>>>], n: u32, what: &str) {
    for (p, g) in got.iter().enumerate() {
        let g = g.lock().unwrap();
        assert!(
            *g == expected_pipe(p, n),
            "{what}: pipe {p} got {} items, wrong",
            g.len()
        );
    }
}

#[test]
fn many_pipes_give_the_same_output_on_1_2_4_and_8_workers() {
    const N: u32 = 3000;
    for round in 0..ROUNDS {
        for workers in [1, 2, 4, 8] {
            let (g, got) = pipes_graph(50, N, round * 1000 + 1, workers);
            run_within(g).unwrap_or_else(|e| panic!("round {round}, {workers} workers: {e}"));
            check_pipes(&got, N, &format!("round {round}, {workers} workers"));
        }
    }
}

#[test]
fn graphs_run_side_by_side_and_one_inside_a_thread_node_of_another() {
    const N: u32 = 2000;
    for round in 0..ROUNDS {
        // Two graphs on threads of their own at the same time.
        let side: Vec<_> = (0..2)
            .map(|k| {
                std::thread::spawn(move || {
                    let (g, got) = pipes_graph(6, N, round * 10 + k, 2);
                    run_within(g).unwrap();
                    check_pipes(&got, N, &format!("side graph {k}, round {round}"));
                })
            })
            .collect();
        // A third whose thread node runs a whole graph and hands on its sum.
        let mut g = Graph::new();
        g.set_workers(2);
        let outer = add_pipe(&mut g, 1, N, round + 99, false);
        let (mut o, i) = g.connect::<u32>(("inner", "out"), ("sum", "in")).unwrap();
        g.node("inner", move || {
            let (inner, got) = pipes_graph(4, N, round + 7, 2);
            inner.run()?;
            check_pipes(&got, N, &format!("inner graph, round {round}"));
            let total: u64 = got
                .iter()
                .map(|g| g.lock().unwrap().iter().map(|&x| u64::from(x)).sum::<u64>())
                .sum();
            o.write(&[(total % 1_000_003) as u32])?;
            Ok(())
        })
        .unwrap();
        let sum = Arc::new(Mutex::new(Vec::new()));
        g.task("sum", gather_async(i, sum.clone())).unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        for s in side {
            s.join().unwrap();
        }
        assert_eq!(*outer.lock().unwrap(), expected_pipe(1, N));
        let want: u64 = (0..4)
            .map(|p| {
                expected_pipe(p, N)
                    .iter()
                    .map(|&x| u64::from(x))
                    .sum::<u64>()
            })
            .sum();
        assert_eq!(*sum.lock().unwrap(), vec![(want % 1_000_003) as u32]);
    }
}

#[test]
fn tasks_that_yield_themselves_do_not_starve_tasks_fed_by_thread_nodes() {
    const N: u32 = 5000;
    for round in 0..ROUNDS {
        for workers in [1, 2] {
            let mut g = Graph::new();
            g.set_workers(workers);
            let done = Arc::new(AtomicUsize::new(0));
            let mut sums = Vec::new();
            for k in 0..3 {
                let (o, mut i) = g
                    .connect::<u32>((&format!("feed{k}"), "out"), (&format!("eat{k}"), "in"))
                    .unwrap();
                g.node(&format!("feed{k}"), move || count(o, N, round * 3 + k, 0))
                    .unwrap();
                let sum = Arc::new(AtomicU64::new(0));
                let (s2, d2) = (sum.clone(), done.clone());
                g.task(&format!("eat{k}"), async move {
                    loop {
                        let s = i.peek_async(1).await?;
                        if s.is_empty() {
                            break;
                        }
                        s2.fetch_add(s.iter().map(|&x| u64::from(x)).sum(), Ordering::Relaxed);
                        let n = s.len();
                        i.consume(n)?;
                    }
                    d2.fetch_add(1, Ordering::AcqRel);
                    Ok(())
                })
                .unwrap();
                sums.push(sum);
            }
            for y in 0..2 {
                let d2 = done.clone();
                g.task(&format!("yield{y}"), async move {
                    let t0 = Instant::now();
                    while d2.load(Ordering::Acquire) < 3 {
                        if t0.elapsed() > BOUND {
                            return Err("the tasks fed by threads starved".into());
                        }
                        yield_now().await;
                    }
                    Ok(())
                })
                .unwrap();
            }
            let t0 = Instant::now();
            run_within(g).unwrap_or_else(|e| panic!("round {round}, {workers} workers: {e}"));
            let want = u64::from(N) * u64::from(N - 1) / 2;
            for s in &sums {
                assert_eq!(s.load(Ordering::Relaxed), want);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "round {round}, {workers} workers: {:?}",
                t0.elapsed()
            );
        }
    }
}

/// Counts its drops.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

#[test]
fn wakers_kept_past_the_graphs_end_neither_keep_the_bodies_nor_crash_when_woken() {
    for round in 0..ROUNDS {
        let kept: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let drops = Arc::new(AtomicUsize::new(0));
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (o, mut i) = g.connect::<u32>(("src", "out"), ("keeper", "in")).unwrap();
        g.task("src", count_async(o, 2000, round + 3, 64)).unwrap();
        let (k2, guard) = (kept.clone(), Dropped(drops.clone()));
        g.task("keeper", async move {
            let _guard = guard;
            let mut sum = 0u64;
            loop {
                std::future::poll_fn(|cx| {
                    k2.lock().unwrap().push(cx.waker().clone());
                    Poll::Ready(())
                })
                .await;
                let s = i.peek_async(1).await?;
                if s.is_empty() {
                    break;
                }
                sum += s.iter().map(|&x| u64::from(x)).sum::<u64>();
                let n = s.len();
                i.consume(n)?;
            }
            assert_eq!(sum, 1999 * 2000 / 2);
            Ok(())
        })
        .unwrap();
        // Meanwhile an outside thread wakes the kept wakers for nothing.
        let stop = Arc::new(AtomicBool::new(false));
        let (k3, s3) = (kept.clone(), stop.clone());
        let hammer = std::thread::spawn(move || {
            while !s3.load(Ordering::Acquire) {
                let w = k3.lock().unwrap().last().cloned();
                if let Some(w) = w {
                    w.wake();
                }
                std::thread::yield_now();
            }
        });
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(
            drops.load(Ordering::Acquire),
            1,
            "the body was not dropped at its end"
        );
        stop.store(true, Ordering::Release);
        hammer.join().unwrap();
        let wakers = std::mem::take(&mut *kept.lock().unwrap());
        assert!(!wakers.is_empty());
        // Woken after the end, here and from another thread.
        for w in &wakers {
            w.wake_by_ref();
        }
        let half = wakers.len() / 2;
        let mut wakers = wakers;
        let rest = wakers.split_off(half);
        std::thread::spawn(move || rest.into_iter().for_each(Waker::wake))
            .join()
            .unwrap();
        drop(wakers);
    }
}

/// Runs `g` (bounded) while a thread wakes the wakers in `kept` again and
/// again, for nothing.
fn run_woken_for_nothing(g: Graph, kept: &Arc<Mutex<Vec<Waker>>>) -> Result<(), Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let (k3, s3) = (kept.clone(), stop.clone());
    let hammer = std::thread::spawn(move || {
        while !s3.load(Ordering::Acquire) {
            let ws = k3.lock().unwrap().clone();
            ws.iter().for_each(Waker::wake_by_ref);
            std::thread::yield_now();
        }
    });
    let r = run_within(g);
    stop.store(true, Ordering::Release);
    hammer.join().unwrap();
    r
}

#[test]
fn spurious_wakes_from_outside_neither_lose_a_deadlock_report_nor_fake_one() {
    for round in 0..ROUNDS {
        let kept: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        // a and b each wait to read what the other never writes.
        let (to_a, mut ia) = g.connect::<u32>(("b", "out"), ("a", "in")).unwrap();
        let (to_b, mut ib) = g.connect::<u32>(("a", "out"), ("b", "in")).unwrap();
        let ka = kept.clone();
        g.task("a", async move {
            let _own_output = to_b;
            std::future::poll_fn(|cx| {
                ka.lock().unwrap().push(cx.waker().clone());
                Poll::Ready(())
            })
            .await;
            ia.peek_async(1).await?;
            Ok(())
        })
        .unwrap();
        let kb = kept.clone();
        g.task("b", async move {
            let _own_output = to_a;
            std::future::poll_fn(|cx| {
                kb.lock().unwrap().push(cx.waker().clone());
                Poll::Ready(())
            })
            .await;
            ib.peek_async(1).await?;
            Ok(())
        })
        .unwrap();
        let r = run_woken_for_nothing(g, &kept);
        match r {
            Err(Error::Deadlock { .. }) => {}
            other => panic!("round {round}: expected a deadlock, got {other:?}"),
        }

        // And a pipe that ends, its reader woken for nothing all along.
        let kept: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (o, mut i) = g.connect::<u32>(("src", "out"), ("r", "in")).unwrap();
        g.node("src", move || count(o, 20_000, round, 0)).unwrap();
        let k2 = kept.clone();
        let sum = Arc::new(AtomicU64::new(0));
        let s2 = sum.clone();
        g.task("r", async move {
            std::future::poll_fn(|cx| {
                k2.lock().unwrap().push(cx.waker().clone());
                Poll::Ready(())
            })
            .await;
            loop {
                let s = i.peek_async(1 + (round as usize % 7)).await?;
                if s.is_empty() {
                    return Ok(());
                }
                s2.fetch_add(s.iter().map(|&x| u64::from(x)).sum(), Ordering::Relaxed);
                let n = s.len();
                i.consume(n)?;
            }
        })
        .unwrap();
        let r = run_woken_for_nothing(g, &kept);
        r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(sum.load(Ordering::Relaxed), 19_999 * 20_000 / 2);
    }
}

#[test]
fn a_task_panicking_while_others_are_queued_on_its_worker_ends_the_graph_and_drops_every_body() {
    for round in 0..ROUNDS {
        let workers = 1 + (round % 2) as usize;
        let drops = Arc::new(AtomicUsize::new(0));
        let mut g = Graph::new();
        g.set_workers(workers);
        // A chain of 12 tasks; stage 6 panics after a few hundred items.
        let mut ports = Vec::new();
        for s in 0..11 {
            ports.push(
                g.connect::<u32>((&format!("s{s}"), "out"), (&format!("s{}", s + 1), "in"))
                    .unwrap(),
            );
        }
        let mut ins: Vec<Option<Input<u32>>> = vec![None];
        let mut outs: Vec<Option<Output<u32>>> = Vec::new();
        for (o, i) in ports {
            outs.push(Some(o));
            ins.push(Some(i));
        }
        outs.push(None);
        for s in 0..12 {
            let guard = Dropped(drops.clone());
            let inp = ins[s].take();
            let out = outs[s].take();
            let panic_at = if s == 6 { 300 + round * 17 } else { u64::MAX };
            g.task(&format!("s{s}"), async move {
                let _guard = guard;
                match (inp, out) {
                    (None, Some(o)) => count_async(o, 100_000, round, 50).await,
                    (Some(mut i), o) => {
                        let mut o = o;
                        let mut seen = 0u64;
                        loop {
                            let s = i.peek_async(1).await?;
                            if s.is_empty() {
                                return Ok(());
                            }
                            let v = s.to_vec();
                            i.consume(v.len())?;
                            seen += v.len() as u64;
                            assert!(seen < panic_at, "stage panics at {seen}");
                            if let Some(o) = o.as_mut() {
                                o.write_async(&v).await?;
                            }
                        }
                    }
                    (None, None) => unreachable!(),
                }
            })
            .unwrap();
        }
        match run_within(g) {
            Err(Error::Panicked { node, message }) => {
                assert_eq!(node, "s6", "round {round}");
                assert!(message.contains("stage panics"), "{message}");
            }
            other => panic!("round {round}: expected s6's panic, got {other:?}"),
        }
        assert_eq!(
            drops.load(Ordering::Acquire),
            12,
            "round {round}: bodies left undropped"
        );
    }
}

#[test]
fn the_watchdog_giving_up_a_worker_leaves_the_tasks_on_its_queue_to_the_others() {
    for round in 0..ROUNDS {
        let mut g = Graph::new();
        g.set_workers(1);
        g.set_task_hold_limit(Duration::from_millis(100));
        let ran_after = Arc::new(AtomicBool::new(false));
        let (mut o, mut i) = g.connect::<u32>(("holder", "out"), ("r", "in")).unwrap();
        let (o2, i2) = g.connect::<u32>(("other", "out"), ("r2", "in")).unwrap();
        g.task("holder", async move {
            // Let r wait first, so that the commit wakes it onto this worker's
            // own queue; then block the worker.
            for _ in 0..20 {
                yield_now().await;
            }
            o.write_async(&[1, 2, 3]).await?;
            std::thread::sleep(Duration::from_millis(1500));
            Ok(())
        })
        .unwrap();
        let ra = ran_after.clone();
        g.task("r", async move {
            // Polled again once woken (by the holder's commit, onto the
            // held worker's own queue): items or the graph's stop.
            let first = i.peek_async(1).await.map(<[u32]>::len);
            ra.store(true, Ordering::Release);
            first?;
            loop {
                let n = i.peek_async(1).await?.len();
                if n == 0 {
                    return Ok(());
                }
                i.consume(n)?;
            }
        })
        .unwrap();
        g.task("other", count_async(o2, 1_000_000, round, 64))
            .unwrap();
        let sink = Arc::new(Mutex::new(Vec::new()));
        g.task("r2", gather_async(i2, sink)).unwrap();
        let t0 = Instant::now();
        match run_within(g) {
            Err(Error::TaskHeldWorker { node, .. }) => assert_eq!(node, "holder", "round {round}"),
            other => panic!("round {round}: expected the held worker reported, got {other:?}"),
        }
        assert!(
            t0.elapsed() < Duration::from_millis(1200),
            "round {round}: the graph waited for the held worker ({:?})",
            t0.elapsed()
        );
        assert!(
            ran_after.load(Ordering::Acquire),
            "round {round}: the task queued on the held worker never ran"
        );
    }
}

/// Polls two futures to their ends the way `futures::stream::FuturesUnordered`
/// does: each with a waker of its own that notes which one to poll again.
struct JoinOwnWakers<A: Future, B: Future> {
    a: Pin<Box<A>>,
    b: Pin<Box<B>>,
    out: (Option<A::Output>, Option<B::Output>),
    flags: [Arc<Flag>; 2],
}

struct Flag {
    woken: AtomicBool,
    parent: Mutex<Option<Waker>>,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        if let Some(w) = self.parent.lock().unwrap().as_ref() {
            w.wake_by_ref();
        }
    }
}

impl<A: Future, B: Future> Future for JoinOwnWakers<A, B> {
    type Output = (A::Output, B::Output);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        for f in &this.flags {
            *f.parent.lock().unwrap() = Some(cx.waker().clone());
        }
        if this.out.0.is_none() && this.flags[0].woken.swap(false, Ordering::AcqRel) {
            let w = Waker::from(this.flags[0].clone());
            if let Poll::Ready(x) = this.a.as_mut().poll(&mut Context::from_waker(&w)) {
                this.out.0 = Some(x);
            }
        }
        if this.out.1.is_none() && this.flags[1].woken.swap(false, Ordering::AcqRel) {
            let w = Waker::from(this.flags[1].clone());
            if let Poll::Ready(x) = this.b.as_mut().poll(&mut Context::from_waker(&w)) {
                this.out.1 = Some(x);
            }
        }
        if this.out.0.is_some() && this.out.1.is_some() {
            return Poll::Ready((this.out.0.take().unwrap(), this.out.1.take().unwrap()));
        }
        Poll::Pending
    }
}

// Every field is Unpin: the futures are boxed.
impl<A: Future, B: Future> Unpin for JoinOwnWakers<A, B> {}

fn join_own_wakers<A: Future, B: Future>(a: A, b: B) -> JoinOwnWakers<A, B> {
    let flag = || {
        Arc::new(Flag {
            woken: AtomicBool::new(true),
            parent: Mutex::new(None),
        })
    };
    JoinOwnWakers {
        a: Box::pin(a),
        b: Box::pin(b),
        out: (None, None),
        flags: [flag(), flag()],
    }
}

/// Adds a task `sink` gathering `inp`, runs `g` (bounded) and checks that
/// the sink got `want`.
fn sink_gets(mut g: Graph, inp: Input<u32>, want: &[u32], what: &str) {
    let got = Arc::new(Mutex::new(Vec::new()));
    g.task("sink", gather_async(inp, got.clone())).unwrap();
    run_within(g).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(*got.lock().unwrap() == want, "{what}: wrong output");
}

#[test]
fn two_reads_joined_by_a_combinator_with_wakers_of_its_own_both_end() {
    // `futures::join_all`/`FuturesUnordered` style: every sub-future has a
    // waker of its own. In the node's own body (a task, or a thread node
    // through block_on) each wait keeps its waker: both reads end, every
    // item summed, never refused, never hung.
    for round in 0..ROUNDS {
        let thread = round % 3 == 2;
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("j", "a")).unwrap();
        let (ob, mut ib) = g.connect::<u32>(("b", "out"), ("j", "b")).unwrap();
        g.node("a", move || count(oa, 5000, round + 1, 1)).unwrap();
        g.node("b", move || count(ob, 5000, round + 2, 2)).unwrap();
        let got = Arc::new(Mutex::new(None));
        let g2 = got.clone();
        let body = async move {
            let (sa, sb) = join_own_wakers(sum_to_end(&mut ia), sum_to_end(&mut ib)).await;
            *g2.lock().unwrap() = Some((sa?, sb?));
            Ok(())
        };
        if thread {
            g.node("j", move || dmaflow::graph::block_on(body)).unwrap();
        } else {
            g.task("j", body).unwrap();
        }
        run_within(g).unwrap_or_else(|e| panic!("round {round} (thread {thread}): {e}"));
        let want = 4999 * 5000 / 2;
        assert_eq!(*got.lock().unwrap(), Some((want, want)), "round {round}");
    }
}

#[test]
fn a_diamond_that_needs_growth_gives_the_same_output_on_1_2_and_4_workers() {
    // src feeds a fast branch (3x) and a slow one (2x, which waits for 5000 items
    // before it passes any on); join reads both in step: the queues must
    // grow (bounded scheduling) with every node a task.
    const N: u32 = 50_000;
    for round in 0..ROUNDS {
        for workers in [1, 2, 4] {
            let mut g = Graph::new();
            g.set_workers(workers);
            let (mut o, i_fast) = g
                .connect_with_capacity::<u32>(("src", "out"), ("fast", "in"), 1024)
                .unwrap();
            let mut i_slow = g.tap(&mut o, ("slow", "in")).unwrap();
            let (o_fast, mut j_fast) = g
                .connect_with_capacity::<u32>(("fast", "out"), ("join", "a"), 1024)
                .unwrap();
            let (mut o_slow, mut j_slow) = g
                .connect_with_capacity::<u32>(("slow", "out"), ("join", "b"), 1024)
                .unwrap();
            let (mut o_join, i_out) = g.connect::<u32>(("join", "out"), ("sink", "in")).unwrap();
            g.task("src", count_async(o, N, round + 5, 300)).unwrap();
            g.task("fast", map_async(i_fast, o_fast, 0, round)).unwrap();
            g.task("slow", async move {
                let mut first = true;
                loop {
                    let t = if first { 5000 } else { 1 };
                    first = false;
                    let s = i_slow.peek_async(t).await?;
                    if s.is_empty() {
                        return Ok(());
                    }
                    let v: Vec<u32> = s.iter().map(|&x| x * 2).collect();
                    i_slow.consume(v.len())?;
                    o_slow.write_async(&v).await?;
                }
            })
            .unwrap();
            g.task("join", async move {
                loop {
                    let na = j_fast.peek_async(1).await?.len();
                    let nb = j_slow.peek_async(1).await?.len();
                    let m = na.min(nb);
                    if m == 0 {
                        if na + nb != 0 {
                            return Err("the branches ended unevenly".into());
                        }
                        return Ok(());
                    }
                    let a = j_fast.peek_async(m).await?[..m].to_vec();
                    let b = j_slow.peek_async(m).await?[..m].to_vec();
                    let v: Vec<u32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                    j_fast.consume(m)?;
                    j_slow.consume(m)?;
                    o_join.write_async(&v).await?;
                }
            })
            .unwrap();
            let want: Vec<u32> = (0..N).map(|x| 5 * x).collect();
            sink_gets(
                g,
                i_out,
                &want,
                &format!("round {round}, {workers} workers"),
            );
        }
    }
}

#[test]
fn tasks_handing_over_through_their_own_signals_beside_port_pipes_lose_no_wakeup() {
    // Two tasks ping-pong through hand-made signals (wakes from the pool's
    // own workers, not the runtime's), beside pipes of tasks.
    const R: u64 = 2000;
    for round in 0..ROUNDS {
        for workers in [1, 2, 4] {
            let (mut g, got) = pipes_graph(8, 2000, round + 11, workers);
            let (ping, pong) = (Arc::new(Signal::default()), Arc::new(Signal::default()));
            let (a_ping, a_pong) = (ping.clone(), pong.clone());
            g.task("ping", async move {
                for r in 1..=R {
                    a_ping.fire();
                    a_pong.wait(r).await;
                }
                Ok(())
            })
            .unwrap();
            let (b_ping, b_pong) = (ping.clone(), pong.clone());
            g.task("pong", async move {
                for r in 1..=R {
                    b_ping.wait(r).await;
                    b_pong.fire();
                }
                Ok(())
            })
            .unwrap();
            run_within(g).unwrap_or_else(|e| panic!("round {round}, {workers} workers: {e}"));
            check_pipes(&got, 2000, &format!("round {round}, {workers} workers"));
            assert_eq!((ping.fired(), pong.fired()), (R, R));
        }
    }
}

#[test]
fn a_thread_node_driving_its_body_with_tokios_block_on_between_tasks() {
    // A user's thread node runs its async body on a tokio runtime (a
    // foreign executor) instead of dmaflow's block_on.
    const N: u32 = 20_000;
    for round in 0..ROUNDS {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (o, i) = g.connect::<u32>(("src", "out"), ("tk", "in")).unwrap();
        let (o2, i2) = g.connect::<u32>(("tk", "out"), ("sink", "in")).unwrap();
        g.task("src", count_async(o, N, round, 100)).unwrap();
        g.node("tk", move || {
            let rt = tokio::runtime::Builder::new_current_thread().build()?;
            rt.block_on(map_async(i, o2, 7, round))
        })
        .unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        g.task("sink", gather_async(i2, got.clone())).unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(*got.lock().unwrap() == expected_pipe(7, N), "round {round}");
    }
}

#[test]
fn a_second_task_blocking_on_a_worker_the_watchdog_gave_up_before_is_caught_too() {
    // holder blocks its worker past the limit (the watchdog gives that
    // worker up), then, once back, wakes blocker: woken by the task that
    // worker polls, blocker goes on that worker's own queue, and blocks it
    // too. The graph must end about a limit later, not when blocker's call
    // returns (were it a call that never returns, the graph would hang).
    let mut late = Vec::new();
    for round in 0..ROUNDS / 4 {
        let mut g = Graph::new();
        g.set_workers(1);
        g.set_task_hold_limit(Duration::from_millis(100));
        let sig = Arc::new(Signal::default());
        let s2 = sig.clone();
        g.task("holder", async move {
            std::thread::sleep(Duration::from_millis(400));
            s2.fire();
            Ok(())
        })
        .unwrap();
        let s3 = sig.clone();
        g.task("blocker", async move {
            s3.wait(1).await;
            std::thread::sleep(Duration::from_secs(4));
            Ok(())
        })
        .unwrap();
        let t0 = Instant::now();
        let r = run_within(g);
        let took = t0.elapsed();
        assert!(
            matches!(&r, Err(Error::TaskHeldWorker { node, .. }) if node == "holder"),
            "round {round}: {r:?}"
        );
        if took >= Duration::from_secs(2) {
            late.push(took);
        }
    }
    assert!(
        late.is_empty(),
        "{} of {} rounds ended only when blocker's call returned: {late:?}",
        late.len(),
        ROUNDS / 4
    );
}

#[test]
fn many_short_graphs_of_tiny_tasks_start_and_end() {
    // The workers' sleep and wake-up at a graph's start and end, hundreds
    // of times: a lost notification hangs one of them.
    for round in 0..300u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 4) as usize);
        let (mut o, mut i) = g.connect::<u32>(("a", "out"), ("b", "in")).unwrap();
        g.task("a", async move {
            o.write_async(&[round as u32]).await?;
            Ok(())
        })
        .unwrap();
        let got = Arc::new(AtomicU64::new(u64::MAX));
        let g2 = got.clone();
        g.task("b", async move {
            let s = i.peek_async(1).await?;
            g2.store(u64::from(s[0]), Ordering::Release);
            Ok(())
        })
        .unwrap();
        for k in 0..3 {
            g.task(&format!("empty{k}"), async { Ok(()) }).unwrap();
        }
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(got.load(Ordering::Acquire), round);
    }
}

#[test]
fn a_task_given_up_by_the_watchdog_and_woken_after_the_end_is_dropped() {
    for woken in [false, true] {
        let drops = Arc::new(AtomicUsize::new(0));
        // Held by the test only (the body holds a Weak): no cycle through
        // the body.
        let sig = Arc::new(Signal::default());
        let mut g = Graph::new();
        g.set_workers(1);
        g.set_task_hold_limit(Duration::from_millis(50));
        let (s2, guard) = (Arc::downgrade(&sig), Dropped(drops.clone()));
        g.task("holder", async move {
            let _guard = guard;
            std::thread::sleep(Duration::from_millis(300));
            // Back, it waits for something that comes after the end.
            std::future::poll_fn(|cx| match s2.upgrade() {
                Some(s) if s.fired() == 0 => {
                    s.state.lock().unwrap().1 = Some(cx.waker().clone());
                    Poll::Pending
                }
                _ => Poll::Ready(()),
            })
            .await;
            Ok(())
        })
        .unwrap();
        g.task("other", async { Ok(()) }).unwrap();
        match run_within(g) {
            Err(Error::TaskHeldWorker { node, .. }) => assert_eq!(node, "holder"),
            other => panic!("expected the held worker reported, got {other:?}"),
        }
        // The held worker comes back and leaves.
        std::thread::sleep(Duration::from_millis(600));
        if woken {
            sig.fire();
        }
        drop(sig);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            drops.load(Ordering::Acquire),
            1,
            "woken after the end: {woken}: the body was never dropped"
        );
    }
}

#[test]
fn a_relay_selecting_between_its_input_and_its_output_room_keeps_every_item() {
    // A relay with a buffer of its own: in one select it reads when it has
    // room and writes when it holds items, between tasks and small queues.
    const N: u32 = 30_000;
    for round in 0..ROUNDS {
        for workers in [1, 2, 4] {
            let mut g = Graph::new();
            g.set_workers(workers);
            let (o, mut inp) = g
                .connect_with_capacity::<u32>(("src", "out"), ("relay", "in"), 1024)
                .unwrap();
            let (mut out, i2) = g
                .connect_with_capacity::<u32>(("relay", "out"), ("sink", "in"), 1024)
                .unwrap();
            g.task("src", count_async(o, N, round + 21, 500)).unwrap();
            g.task("relay", async move {
                let mut buf: std::collections::VecDeque<u32> = Default::default();
                let mut ended = false;
                let mut rng = Rng(round + 1);
                while !(ended && buf.is_empty()) {
                    let want = 1 + rng.below(700);
                    tokio::select! {
                        s = inp.peek_async(1), if !ended && buf.len() < 4096 => {
                            let s = s?;
                            if s.is_empty() {
                                ended = true;
                                continue;
                            }
                            let k = s.len().min(want);
                            buf.extend(&s[..k]);
                            inp.consume(k)?;
                        }
                        s = out.reserve_up_to_async(buf.len().min(want)), if !buf.is_empty() => {
                            let s = s?;
                            let k = s.len();
                            for (x, y) in s.iter_mut().zip(buf.drain(..k)) {
                                *x = y;
                            }
                            out.commit(k)?;
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
            let want: Vec<u32> = (0..N).collect();
            sink_gets(g, i2, &want, &format!("round {round}, {workers} workers"));
        }
    }
}

#[test]
fn tasks_of_two_graphs_waking_each_other_run_each_on_its_own_pool() {
    // A task of one graph wakes a task of another from its worker: the wake
    // must reach the other graph's pool (its workers), not the waker's.
    const R: u64 = 1000;
    for round in 0..ROUNDS {
        let (ping, pong) = (Arc::new(Signal::default()), Arc::new(Signal::default()));
        let mut graphs = Vec::new();
        for side in 0..2 {
            let (mut g, got) = pipes_graph(3, 2000, round * 2 + side, 1 + side as usize);
            let (p, q) = (ping.clone(), pong.clone());
            let name = if side == 0 { "ping" } else { "pong" };
            let pool_threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
            let seen = pool_threads.clone();
            g.task(name, async move {
                for r in 1..=R {
                    seen.lock().unwrap().insert(std::thread::current().id());
                    if side == 0 {
                        p.fire();
                        q.wait(r).await;
                    } else {
                        p.wait(r).await;
                        q.fire();
                    }
                }
                Ok(())
            })
            .unwrap();
            graphs.push((g, got, pool_threads));
        }
        let (mut handles, mut checks) = (Vec::new(), Vec::new());
        for (g, got, threads) in graphs {
            handles.push(std::thread::spawn(move || run_within(g)));
            checks.push((got, threads));
        }
        for h in handles {
            h.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        for (got, _) in &checks {
            check_pipes(got, 2000, &format!("round {round}"));
        }
        let (a, b) = (checks[0].1.lock().unwrap(), checks[1].1.lock().unwrap());
        assert!(
            a.is_disjoint(&b),
            "round {round}: a task ran on the other graph's worker"
        );
        assert_eq!((ping.fired(), pong.fired()), (R, R));
    }
}

#[test]
fn tasks_awaiting_tokio_timers_driven_on_a_tokio_thread_run_to_their_ends() {
    // A user's task awaits tokio sleeps made on a tokio runtime's handle
    // (that runtime driven by a thread of its own): each wake comes from
    // the tokio thread, beside pipes of tasks.
    for round in 0..ROUNDS / 2 {
        let stop = Arc::new(AtomicBool::new(false));
        let (htx, hrx) = std::sync::mpsc::channel();
        let s2 = stop.clone();
        let driver = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            htx.send(rt.handle().clone()).unwrap();
            rt.block_on(async move {
                while !s2.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            });
        });
        let handle = hrx.recv_timeout(BOUND).unwrap();
        let (mut g, got) = pipes_graph(4, 3000, round + 31, 1 + (round % 2) as usize);
        let mut outs = Vec::new();
        for k in 0..2 {
            let (mut o, i) = g
                .connect::<u32>((&format!("timed{k}"), "out"), (&format!("tc{k}"), "in"))
                .unwrap();
            outs.push(collect(&mut g, &format!("tc{k}"), i).unwrap());
            let h = handle.clone();
            g.task(&format!("timed{k}"), async move {
                for r in 0..40u32 {
                    let sleep = {
                        let _in = h.enter();
                        tokio::time::sleep(Duration::from_micros(300))
                    };
                    sleep.await;
                    o.write_async(&[r]).await?;
                }
                Ok(())
            })
            .unwrap();
        }
        let r = run_within(g);
        stop.store(true, Ordering::Release);
        driver.join().unwrap();
        r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        check_pipes(&got, 3000, &format!("round {round}"));
        for o in &outs {
            assert_eq!(*o.lock().unwrap(), (0..40).collect::<Vec<u32>>());
        }
    }
}
