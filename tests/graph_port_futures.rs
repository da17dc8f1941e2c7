//! A task's port futures used as users use them: dropped unpolled or after
//! one pending poll, selected over, polled from another node or a thread
//! node, zero and huge requests, growth, deadlock reports and panics mid-wait.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use dmaflow::graph::{Error, Graph};

mod common;
use common::{Rng, count, run_within, sum_to_end};

/// Polls `f` once.
async fn poll_once<F: Future>(f: F) -> Option<F::Output> {
    let mut f = pin!(f);
    std::future::poll_fn(|cx| {
        Poll::Ready(match f.as_mut().poll(cx) {
            Poll::Ready(x) => Some(x),
            Poll::Pending => None,
        })
    })
    .await
}

const N: u32 = 5_000;
const SUM: u64 = N as u64 * (N as u64 - 1) / 2;

#[test]
fn port_futures_dropped_unpolled_or_after_one_pending_poll_leave_the_port_usable() {
    for round in 0..30u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("t", "a")).unwrap();
        let (ob, mut ib) = g.connect::<u32>(("b", "out"), ("t", "b")).unwrap();
        let (mut oc, mut ic) = g.connect::<u32>(("t", "out"), ("r", "in")).unwrap();
        g.node("a", move || count(oa, N, round + 1, 30)).unwrap();
        g.node("b", move || count(ob, N, round + 7, 0)).unwrap();
        g.task("t", async move {
            drop(ia.peek_async(1));
            drop(oc.reserve_async(4));
            // a is late: pending once, dropped.
            let first = poll_once(ia.peek_async(1))
                .await
                .map(|r| r.map(|s| s.len()));
            let sb = sum_to_end(&mut ib).await?;
            let _ = poll_once(ia.peek_async(usize::from(round % 3 == 0) * 100_000)).await;
            let sa = sum_to_end(&mut ia).await?;
            let _ = first;
            let s = oc.reserve_async(2).await?;
            s[0] = (sa % 1_000_000_007) as u32;
            s[1] = (sb % 1_000_000_007) as u32;
            oc.commit(2)?;
            Ok(())
        })
        .unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let g2 = got.clone();
        g.task("r", async move {
            loop {
                let s = ic.peek_async(1).await?;
                if s.is_empty() {
                    return Ok(());
                }
                g2.lock().unwrap().extend_from_slice(s);
                let n = s.len();
                ic.consume(n)?;
            }
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let e = (SUM % 1_000_000_007) as u32;
        assert_eq!(*got.lock().unwrap(), vec![e, e], "round {round}");
    }
}

#[test]
fn a_select_over_two_fresh_reads_of_one_task_loses_no_wakeup() {
    for round in 0..30u64 {
        let mut g = Graph::new();
        g.set_workers(2);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("sel", "a")).unwrap();
        let (ob, mut ib) = g.connect::<u32>(("b", "out"), ("sel", "b")).unwrap();
        g.node("a", move || count(oa, N, round + 1, round % 3))
            .unwrap();
        g.task("b", async move {
            let mut ob = ob;
            let mut rng = Rng(round + 3);
            let mut k = 0;
            while k < N {
                let m = (1 + rng.below(64) as u32).min(N - k);
                let s = ob.reserve_up_to_async(m as usize).await?;
                let m = s.len() as u32;
                for (i, x) in s.iter_mut().enumerate() {
                    *x = k + i as u32;
                }
                ob.commit(m as usize)?;
                k += m;
            }
            Ok(())
        })
        .unwrap();
        let total = std::sync::Arc::new(std::sync::Mutex::new(0u64));
        let t2 = total.clone();
        g.task("sel", async move {
            let (mut sum, mut a_end, mut b_end) = (0u64, false, false);
            while !(a_end && b_end) {
                tokio::select! {
                    s = ia.peek_async(1), if !a_end => {
                        let s = s?;
                        if s.is_empty() { a_end = true; continue; }
                        sum += s.iter().map(|&x| u64::from(x)).sum::<u64>();
                        let n = s.len();
                        ia.consume(n)?;
                    }
                    s = ib.peek_async(1), if !b_end => {
                        let s = s?;
                        if s.is_empty() { b_end = true; continue; }
                        sum += s.iter().map(|&x| u64::from(x)).sum::<u64>();
                        let n = s.len();
                        ib.consume(n)?;
                    }
                }
            }
            *t2.lock().unwrap() = sum;
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(*total.lock().unwrap(), 2 * SUM, "round {round}");
    }
}

#[test]
fn a_port_polled_from_another_nodes_task_or_a_thread_nodes_block_on_ends() {
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(2);
        // x's input read by task y (x's own body ends at once).
        let (oa, ia) = g.connect::<u32>(("a", "out"), ("x", "in")).unwrap();
        let (ob, mut ib) = g.connect::<u32>(("b", "out"), ("th", "in")).unwrap();
        g.node("a", move || count(oa, N, round + 1, round % 4))
            .unwrap();
        g.node("b", move || count(ob, N, round + 2, round % 3))
            .unwrap();
        g.task("x", async move { Ok(()) }).unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new((0u64, 0u64)));
        let (g1, g2) = (got.clone(), got.clone());
        g.task("y", async move {
            let mut ia = ia;
            g1.lock().unwrap().0 = sum_to_end(&mut ia).await?;
            Ok(())
        })
        .unwrap();
        g.node("th", move || {
            let s = dmaflow::graph::block_on(sum_to_end(&mut ib))?;
            g2.lock().unwrap().1 = s;
            Ok(())
        })
        .unwrap();
        let r = run_within(g);
        let (a, b) = *got.lock().unwrap();
        // Another node's port: either read whole or refused by name, never hung.
        match r {
            Ok(()) => assert_eq!((a, b), (SUM, SUM), "round {round}"),
            // After x's body returned the wait is refused as after its end;
            // while x's body still runs, as a wait from outside its body.
            Err(Error::WaitAfterEnd { node, port } | Error::PortShared { node, port }) => {
                assert_eq!((node.as_str(), port.as_str()), ("x", "in"))
            }
            Err(e) => panic!("round {round}: {e}"),
        }
    }
}

#[test]
fn zero_and_huge_requests_answer_at_once() {
    let mut g = Graph::new();
    let (mut o, mut i) = g.connect::<u32>(("w", "out"), ("r", "in")).unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (l1, l2) = (log.clone(), log.clone());
    g.task("w", async move {
        let v = o.reserve_async(0).await.map(|s| s.len());
        l1.lock().unwrap().push(format!("reserve0 {v:?}"));
        let v = o.reserve_up_to_async(0).await.map(|s| s.len());
        l1.lock().unwrap().push(format!("upto0 {v:?}"));
        let v = o.reserve_async(usize::MAX).await.map(|s| s.len());
        l1.lock().unwrap().push(format!("reserveMAX {v:?}"));
        let v = o.reserve_up_to_async(usize::MAX).await.map(|s| s.len());
        l1.lock().unwrap().push(format!("uptoMAX {v:?}"));
        o.commit(0)?;
        o.write_async(&[1, 2, 3]).await?;
        Ok(())
    })
    .unwrap();
    g.task("r", async move {
        let v = i.peek_async(0).await.map(|s| s.len());
        l2.lock().unwrap().push(format!("peek0 {v:?}"));
        let v = i.peek_async(usize::MAX).await.map(|s| s.len());
        l2.lock().unwrap().push(format!("peekMAX {v:?}"));
        let s = sum_to_end(&mut i).await?;
        l2.lock().unwrap().push(format!("sum {s}"));
        Ok(())
    })
    .unwrap();
    let r = run_within(g);
    eprintln!("{r:?}\n{:#?}", log.lock().unwrap());
    assert!(log.lock().unwrap().iter().any(|l| l == "sum 6"), "{r:?}");
}

#[test]
fn growth_resolves_an_artificial_deadlock_between_tasks_on_the_fast_path() {
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (mut oa, mut ia) = g
            .connect_with_capacity::<u32>(("s", "a"), ("m", "a"), 16)
            .unwrap();
        let (mut ob, mut ib) = g
            .connect_with_capacity::<u32>(("s", "b"), ("m", "b"), 16)
            .unwrap();
        let cap = oa.capacity() as u32;
        let burst = 3 * cap + round as u32;
        g.task("s", async move {
            for k in 0..4u32 {
                for i in 0..burst {
                    oa.write_async(&[k * burst + i]).await?;
                }
                for i in 0..burst {
                    ob.write_async(&[k * burst + i]).await?;
                }
            }
            Ok(())
        })
        .unwrap();
        let ok = std::sync::Arc::new(std::sync::Mutex::new(false));
        let ok2 = ok.clone();
        g.task("m", async move {
            // b first: s must fill a beyond its capacity first.
            for k in 0..4u32 {
                for i in 0..burst {
                    let y = ib.peek_async(1).await?[0];
                    ib.consume(1)?;
                    assert_eq!(y, k * burst + i);
                }
                let s = ia.peek_async(burst as usize).await?;
                assert_eq!(s.len() as u32, burst.max(s.len() as u32));
                assert_eq!(s[0], k * burst);
                ia.consume(burst as usize)?;
            }
            *ok2.lock().unwrap() = true;
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(*ok.lock().unwrap());
    }
}

#[test]
fn a_deadlock_of_tasks_after_fast_path_calls_names_its_cycle() {
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (mut po, mut pi) = g.connect::<u32>(("ping", "out"), ("pong", "in")).unwrap();
        let (mut qo, mut qi) = g.connect::<u32>(("pong", "out"), ("ping", "in")).unwrap();
        let n = round as u32 * 10;
        g.task("ping", async move {
            for k in 0..n {
                po.write_async(&[k]).await?;
                let _ = qi.peek_async(1).await?;
                qi.consume(1)?;
            }
            let _ = qi.peek_async(1).await?; // waits for pong, which waits for ping
            Ok(())
        })
        .unwrap();
        g.task("pong", async move {
            for _ in 0..n {
                let x = pi.peek_async(1).await?[0];
                pi.consume(1)?;
                qo.write_async(&[x]).await?;
            }
            let _ = pi.peek_async(1).await?;
            Ok(())
        })
        .unwrap();
        match run_within(g) {
            Err(Error::Deadlock { cycle }) => assert!(
                cycle.contains("ping.out -> pong.in") && cycle.contains("pong.out -> ping.in"),
                "round {round}: {cycle}"
            ),
            other => panic!("round {round}: expected a deadlock, got {other:?}"),
        }
    }
}

#[test]
fn a_task_panicking_with_a_pending_port_future_alive_is_reported() {
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("p", "a")).unwrap();
        let (mut ob, mut ib) = g.connect::<u32>(("p", "out"), ("r", "in")).unwrap();
        g.node("a", move || count(oa, N, round + 1, 20)).unwrap();
        g.task("p", async move {
            ob.write_async(&[1, 2]).await?;
            let mut f = pin!(ia.peek_async(N as usize));
            let pending =
                std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx).is_pending())).await;
            if pending || round < 100 {
                panic!("mid-wait {pending}");
            }
            Ok(())
        })
        .unwrap();
        g.task("r", async move {
            loop {
                let _ = ib.peek_async(1000).await?;
            }
        })
        .unwrap();
        match run_within(g) {
            Err(Error::Panicked { node, message }) => {
                assert_eq!(node, "p", "round {round}");
                assert!(message.contains("mid-wait"), "round {round}: {message}");
            }
            other => panic!("round {round}: expected the panic, got {other:?}"),
        }
    }
}

#[test]
fn a_port_future_moved_after_a_pending_poll_completes_where_it_is_moved() {
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("t", "in")).unwrap();
        let (mut oo, mut io) = g.connect::<u32>(("t2", "out"), ("t", "room")).unwrap();
        g.node("a", move || count(oa, N, round + 1, 10)).unwrap();
        g.task("t2", async move {
            // Room for 4 only after t has read some: a reserve that waits.
            let cap = oo.capacity();
            oo.write_async(&vec![0; cap]).await?;
            let mut f = Box::pin(oo.reserve_async(4));
            let _ = poll_once(f.as_mut()).await;
            let moved = vec![f];
            let s = moved.into_iter().next().unwrap().await?;
            s.copy_from_slice(&[1, 2, 3, 4]);
            oo.commit(4)?;
            Ok(())
        })
        .unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new((0u64, 0u64)));
        let g1 = got.clone();
        g.task("t", async move {
            let n = {
                let mut f = Box::pin(ia.peek_async(16));
                match poll_once(f.as_mut()).await {
                    // `a` was quicker than this poll: nothing was pending.
                    Some(ready) => ready?.len(),
                    None => {
                        let held = std::convert::identity(f);
                        held.await?.len()
                    }
                }
            };
            assert!(n >= 16, "round {round}: {n}");
            let sum = sum_to_end(&mut ia).await?;
            let tail: u64 = {
                let mut t = 0u64;
                loop {
                    let s = io.peek_async(1).await?;
                    if s.is_empty() {
                        break t;
                    }
                    t += s.iter().map(|&x| u64::from(x)).sum::<u64>();
                    let k = s.len();
                    io.consume(k)?;
                }
            };
            *g1.lock().unwrap() = (sum, tail);
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(*got.lock().unwrap(), (SUM, 10), "round {round}");
    }
}

#[test]
fn a_threshold_read_gets_at_least_the_threshold_until_the_stream_ends() {
    for round in 0..10u64 {
        let mut g = Graph::new();
        let (mut o, mut i) = g.connect::<u32>(("w", "out"), ("r", "in")).unwrap();
        g.node("w", move || {
            for k in 0..10u32 {
                o.write(&[k])?;
                std::thread::sleep(Duration::from_micros(200 * round));
            }
            Ok(())
        })
        .unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        g.task("r", async move {
            loop {
                let s = i.peek_async(4).await?;
                s2.lock().unwrap().push(s.len());
                if s.len() < 4 {
                    return Ok(());
                }
                i.consume(3)?;
            }
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let seen = seen.lock().unwrap();
        let (last, rest) = seen.split_last().unwrap();
        assert!(rest.iter().all(|&n| n >= 4), "round {round}: {seen:?}");
        assert_eq!(*last, 1, "round {round}: {seen:?}"); // 10 = 3 * 3 + 1
    }
}

/// Ticks set by a helper thread, each waking the waker left by the last poll.
#[derive(Default)]
struct Ticks(std::sync::Mutex<(u32, Option<std::task::Waker>)>);

impl Ticks {
    /// Waits for a tick past `seen`.
    async fn after(&self, seen: u32) -> u32 {
        std::future::poll_fn(|cx| {
            let mut t = self.0.lock().unwrap();
            if t.0 > seen {
                return Poll::Ready(t.0);
            }
            t.1 = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

#[test]
fn a_long_lived_read_selected_with_wakes_from_outside_the_graph_loses_nothing() {
    for round in 0..20u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (oa, mut ia) = g.connect::<u32>(("a", "out"), ("t", "in")).unwrap();
        g.node("a", move || count(oa, N, round + 1, 5)).unwrap();
        let ticks = std::sync::Arc::new(Ticks::default());
        let t2 = ticks.clone();
        let ticker = std::thread::spawn(move || {
            for _ in 0..200 {
                std::thread::sleep(Duration::from_micros(50));
                let w = {
                    let mut t = t2.0.lock().unwrap();
                    t.0 += 1;
                    t.1.take()
                };
                if let Some(w) = w {
                    w.wake();
                }
            }
        });
        let got = std::sync::Arc::new(std::sync::Mutex::new(0u64));
        let g1 = got.clone();
        g.task("t", async move {
            let (mut sum, mut seen) = (0u64, 0u32);
            loop {
                // The read lives across every tick that ends the select.
                let (part, n) = {
                    let mut read = pin!(ia.peek_async(N as usize / 2));
                    let s = loop {
                        tokio::select! {
                            s = &mut read => break s?,
                            k = ticks.after(seen) => seen = k,
                        }
                    };
                    (s.iter().map(|&x| u64::from(x)).sum::<u64>(), s.len())
                };
                if n == 0 {
                    break;
                }
                sum += part;
                ia.consume(n)?;
            }
            *g1.lock().unwrap() = sum;
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        ticker.join().unwrap();
        assert_eq!(*got.lock().unwrap(), SUM, "round {round}");
    }
}

/// A future that, on its one poll, lets `go` run and waits for `done` (the
/// other node's write, made while the select's earlier branch waits), then
/// gives that node time to block, and stays pending (never woken).
fn other_node_acts_meanwhile(
    go: std::sync::mpsc::Sender<()>,
    done: std::sync::mpsc::Receiver<()>,
) -> impl Future<Output = ()> {
    let mut once = Some((go, done));
    std::future::poll_fn(move |_| {
        if let Some((go, done)) = once.take() {
            let _ = go.send(());
            let _ = done.recv_timeout(Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(60));
        }
        Poll::Pending
    })
}

#[test]
fn a_select_whose_first_read_is_resumed_while_it_polls_the_next_reports_no_deadlock() {
    // Task t selects over a read of `a`, a branch during whose poll node w
    // writes `a` (resuming t's first wait, t being polled) and then blocks
    // reading t's `back`, and a read of `b` (which w never writes). t has
    // been woken: it is not blocked on `b`, and no deadlock exists. With t
    // counted blocked on `b` once its poll ends, the stall check saw a
    // cycle t -> w -> t and reported it.
    for round in 0..6u64 {
        let mut g = Graph::new();
        g.set_workers(1 + (round % 2) as usize);
        let (mut oa, mut ia) = g.connect::<u32>(("w", "a"), ("t", "a")).unwrap();
        let (ob, mut ib) = g.connect::<u32>(("w", "b"), ("t", "b")).unwrap();
        let (mut oback, mut iback) = g.connect::<u32>(("t", "back"), ("w", "back")).unwrap();
        let (go_tx, go_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        g.node("w", move || {
            let _keep_b_open = ob;
            go_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("t's select polled");
            oa.write(&[7])?;
            done_tx.send(()).unwrap();
            let got = iback.peek(1)?.to_vec();
            assert_eq!(got, [8]);
            iback.consume(1)?;
            Ok(())
        })
        .unwrap();
        g.task("t", async move {
            let mut meanwhile = pin!(other_node_acts_meanwhile(go_tx, done_rx));
            let first = tokio::select! {
                biased;
                a = ia.peek_async(1) => a?.to_vec(),
                () = &mut meanwhile => unreachable!("never ready"),
                b = ib.peek_async(1) => panic!("b is never written: {:?}", b.map(|s| s.len())),
            };
            assert_eq!(first, [7]);
            ia.consume(1)?;
            oback.write_async(&[8]).await?;
            Ok(())
        })
        .unwrap();
        let r = run_within(g);
        assert!(
            r.is_ok(),
            "round {round}: {:?}",
            r.err().map(|e| e.to_string())
        );
    }
}
