//! A process network ends, grows a queue or reports; it never hangs. Each
//! graph here runs on a thread of its own and the test waits for it with a
//! timeout, so a regression fails instead of stalling.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dmaflow::graph::{Error, Graph, Input, NodeResult, Output};
use proptest::prelude::*;

mod common;
use common::Rng;

/// Runs `g` and waits for it at most [`common::BOUND`].
fn run_within(g: Graph) -> Result<(), Error> {
    common::run_within(g)
}

/// Defines a node body twice from one text: as a blocking function for a
/// thread node and as an async one for a task node (`[.await]` after each
/// port call that may wait; `peek`/`peek_async`, `reserve`/`reserve_async`,
/// `write`/`write_async` name the calls).
macro_rules! bodies {
    ($(#[$m:meta])* fn $name:ident / $aname:ident ($($arg:ident: $t:ty),*) -> $ret:ty $body:block) => {
        $(#[$m])*
        fn $name($($arg: $t),*) -> $ret {
            #[allow(unused_macros)]
            macro_rules! peek { ($p:expr, $n:expr) => { $p.peek($n) } }
            #[allow(unused_macros)]
            macro_rules! reserve { ($p:expr, $n:expr) => { $p.reserve($n) } }
            #[allow(unused_macros)]
            macro_rules! write { ($p:expr, $v:expr) => { $p.write($v) } }
            $body
        }
        $(#[$m])*
        async fn $aname($($arg: $t),*) -> $ret {
            #[allow(unused_macros)]
            macro_rules! peek { ($p:expr, $n:expr) => { $p.peek_async($n).await } }
            #[allow(unused_macros)]
            macro_rules! reserve { ($p:expr, $n:expr) => { $p.reserve_async($n).await } }
            #[allow(unused_macros)]
            macro_rules! write { ($p:expr, $v:expr) => { $p.write_async($v).await } }
            $body
        }
    };
}

/// Gives node `name` a body of both forms: a task when `task`, else a thread.
macro_rules! add {
    ($g:expr, $name:expr, $task:expr, $f:ident / $af:ident ($($a:expr),*)) => {
        if $task {
            $g.task($name, $af($($a),*)).unwrap()
        } else {
            $g.node($name, move || $f($($a),*)).unwrap()
        }
    };
}

bodies! {
    /// An endless source of `0, 1, 2, ...` in pieces of 1 to `piece` items.
    fn endless / endless_async(out: Output<u32>, piece: usize, seed: u64) -> NodeResult {
        let mut out = out;
        let mut r = Rng(seed | 1);
        let mut i = 0u32;
        loop {
            let k = 1 + r.below(piece);
            let s = reserve!(out, k)?;
            for (j, x) in s.iter_mut().enumerate() {
                *x = i.wrapping_add(j as u32);
            }
            out.commit(k)?;
            i = i.wrapping_add(k as u32);
        }
    }
}

bodies! {
    /// Passes on the first `limit` items and returns (GNU Radio's `head`).
    fn head / head_async(inp: Input<u32>, out: Output<u32>, limit: u64) -> NodeResult {
        let (mut inp, mut out) = (inp, out);
        let mut left = limit;
        while left > 0 {
            let s = peek!(inp, 1)?;
            if s.is_empty() {
                break;
            }
            let k = (s.len() as u64).min(left) as usize;
            let d = reserve!(out, k)?;
            d.copy_from_slice(&s[..k]);
            out.commit(k)?;
            inp.consume(k)?;
            left -= k as u64;
        }
        Ok(())
    }
}

bodies! {
    /// Reads to the end of the stream; the count and whether the items were
    /// `0, 1, 2, ...`.
    fn count_items / count_items_async(inp: Input<u32>, got: Arc<Mutex<(u64, bool)>>) -> NodeResult {
        let mut inp = inp;
        let (mut n, mut ordered) = (0u64, true);
        loop {
            let s = peek!(inp, 1)?;
            if s.is_empty() {
                break;
            }
            for (j, &x) in s.iter().enumerate() {
                ordered &= x == (n + j as u64) as u32;
            }
            n += s.len() as u64;
            let k = s.len();
            inp.consume(k)?;
        }
        *got.lock().unwrap() = (n, ordered);
        Ok(())
    }
}

/// A thread node reading to the end of the stream; its count and order.
fn counting_sink(g: &mut Graph, name: &str, inp: Input<u32>) -> Arc<Mutex<(u64, bool)>> {
    let got = Arc::new(Mutex::new((0u64, true)));
    let o = got.clone();
    g.node(name, move || count_items(inp, o)).unwrap();
    got
}

#[test]
fn endless_sources_behind_finished_heads_end_the_graph() {
    // The idiom of every SDR runtime's benchmark: four pipes of endless
    // source -> head(N) -> sink in one graph. The head finishes while its
    // source waits on the full queue; the source must end, and the graph with
    // it. Odd rounds run every node as a task (on 1, 2 or 3 workers).
    for round in 0..150u64 {
        let mut g = Graph::new();
        let task = round % 2 == 1;
        g.set_workers(1 + (round / 2 % 3) as usize);
        let mut sinks = Vec::new();
        let limit = 3000 + round * 37;
        for p in 0..4 {
            let (src, h_in) = g
                .connect::<u32>((&format!("src{p}"), "out"), (&format!("head{p}"), "in"))
                .unwrap();
            let (h_out, s_in) = g
                .connect::<u32>((&format!("head{p}"), "out"), (&format!("sink{p}"), "in"))
                .unwrap();
            let seed = round * 4 + p;
            // The source ends itself on `Closed`, as code written before that
            // ended a node normally does: what is tested is the race alone.
            let ended = |r: NodeResult| match r {
                Err(e) if e.to_string().contains("every reader has been dropped") => Ok(()),
                other => other,
            };
            if task {
                g.task(&format!("src{p}"), async move {
                    ended(endless_async(src, 700, seed).await)
                })
                .unwrap();
            } else {
                g.node(&format!("src{p}"), move || ended(endless(src, 700, seed)))
                    .unwrap();
            }
            add!(
                g,
                &format!("head{p}"),
                task,
                head / head_async(h_in, h_out, limit)
            );
            let got = Arc::new(Mutex::new((0u64, true)));
            let o = got.clone();
            add!(
                g,
                &format!("sink{p}"),
                task,
                count_items / count_items_async(s_in, o)
            );
            sinks.push(got);
        }
        run_within(g).unwrap_or_else(|e| panic!("round {round}: {e}"));
        for s in sinks {
            assert_eq!(*s.lock().unwrap(), (limit, true), "round {round}");
        }
    }
}

#[test]
fn task_nodes_of_a_cycle_report_the_deadlock() {
    // Two tasks each waiting to read what the other would write, beside a
    // thread node that finishes: the deadlock names both, on one worker or two.
    for workers in [1, 2] {
        let mut g = Graph::new();
        g.set_workers(workers);
        let (ab, mut ab_in) = g.connect::<u32>(("a", "out"), ("b", "in")).unwrap();
        let (ba, mut ba_in) = g.connect::<u32>(("b", "out"), ("a", "in")).unwrap();
        let (mut x, y) = g.connect::<u32>(("x", "out"), ("y", "in")).unwrap();
        g.task("a", async move {
            let _keep = ab;
            ba_in.peek_async(1).await?;
            Ok(())
        })
        .unwrap();
        g.task("b", async move {
            let _keep = ba;
            ab_in.peek_async(1).await?;
            Ok(())
        })
        .unwrap();
        g.node("x", move || Ok(x.write(&[1, 2, 3])?)).unwrap();
        let _y = counting_sink(&mut g, "y", y);
        match run_within(g) {
            Err(Error::Deadlock { cycle }) => {
                assert!(
                    cycle.contains("a.out -> b.in") && cycle.contains("b.out -> a.in"),
                    "{cycle}"
                )
            }
            other => panic!("expected a deadlock, got {other:?}"),
        }
    }
}

#[test]
fn a_blocking_call_in_a_task_that_would_wait_is_an_error_not_a_held_worker() {
    // A task that called the blocking `peek` and slept would hold its
    // worker (on one worker, every other task with it). The writer writes
    // only after the reader has had to wait.
    let mut g = Graph::new();
    g.set_workers(1);
    let (mut out, mut inp) = g.connect::<u32>(("w", "out"), ("r", "in")).unwrap();
    g.task("r", async move {
        inp.peek(1)?;
        Ok(())
    })
    .unwrap();
    g.node("w", move || {
        std::thread::sleep(Duration::from_millis(200));
        Ok(out.write(&[1])?)
    })
    .unwrap();
    match run_within(g) {
        Err(Error::BlockingInTask { node, port }) => {
            assert_eq!((node.as_str(), port.as_str()), ("r", "in"))
        }
        other => panic!("expected the blocking call's error, got {other:?}"),
    }
}

#[test]
fn a_task_that_panics_or_fails_stops_the_graph_with_its_error() {
    for panics in [false, true] {
        let mut g = Graph::new();
        let (out, inp) = g.connect::<u32>(("src", "out"), ("bad", "in")).unwrap();
        let (bad_out, s_in) = g.connect::<u32>(("bad", "out"), ("sink", "in")).unwrap();
        g.task("src", endless_async(out, 500, 3)).unwrap();
        g.task("bad", async move {
            let (mut inp, _out) = (inp, bad_out);
            inp.peek_async(100).await?;
            if panics {
                panic!("bad panics");
            }
            Err("bad fails".into())
        })
        .unwrap();
        let _got = counting_sink(&mut g, "sink", s_in);
        match run_within(g) {
            Err(Error::Panicked { node, message }) if panics => {
                assert_eq!((node.as_str(), message.as_str()), ("bad", "bad panics"))
            }
            Err(Error::Node { node, source }) if !panics => {
                assert_eq!(
                    (node.as_str(), source.to_string().as_str()),
                    ("bad", "bad fails")
                )
            }
            other => panic!("expected bad's error, got {other:?}"),
        }
    }
}

#[test]
fn a_reader_that_finishes_first_ends_a_writer_waiting_on_it() {
    // The reader returns without reading while the writer waits on a queue it
    // filled: the writer's wait ends with `Closed`, which ends it normally.
    for _ in 0..200 {
        let mut g = Graph::new();
        let (out, inp) = g
            .connect_with_capacity::<u32>(("w", "out"), ("r", "in"), 1)
            .unwrap();
        g.node("w", move || endless(out, 5000, 7)).unwrap();
        g.node("r", move || {
            drop(inp);
            Ok(())
        })
        .unwrap();
        run_within(g).unwrap();
    }
}

#[test]
fn a_node_of_its_own_cycle_reports_the_deadlock() {
    // A node waiting to read what only it would write: the real deadlock is
    // reported (it names the node), never slept on.
    for _ in 0..50 {
        let mut g = Graph::new();
        let (out, mut inp) = g.connect::<u32>(("me", "out"), ("me", "in")).unwrap();
        g.node("me", move || {
            let _keep = out;
            inp.peek(1)?;
            Ok(())
        })
        .unwrap();
        match run_within(g) {
            Err(Error::Deadlock { cycle }) => assert!(cycle.contains("me.out -> me.in"), "{cycle}"),
            other => panic!("expected a deadlock, got {other:?}"),
        }
    }
}

/// One stage of a branch in a random graph.
#[derive(Debug, Clone)]
enum Stage {
    /// Passes items on, reading with `threshold` and consuming up to `chunk`.
    Copy { threshold: usize, chunk: usize },
    /// Adds `c` to every item.
    Add { c: u32 },
    /// Passes the first `limit` items and returns.
    Head { limit: u64 },
    /// Returns an error before passing item number `at`.
    Fail { at: u64 },
    /// Panics before passing item number `at`.
    Panic { at: u64 },
}

fn stage() -> impl Strategy<Value = Stage> {
    prop_oneof![
        4 => (1usize..3000, 1usize..5000).prop_map(|(threshold, chunk)| Stage::Copy { threshold, chunk }),
        2 => (0u32..1000).prop_map(|c| Stage::Add { c }),
        2 => (0u64..6000).prop_map(|limit| Stage::Head { limit }),
        1 => (0u64..6000).prop_map(|at| Stage::Fail { at }),
        1 => (0u64..6000).prop_map(|at| Stage::Panic { at }),
    ]
}

/// A random graph: a source (finite or endless) fanned out to branches of
/// stages, joined again by a node that adds one item of each live branch.
#[derive(Debug, Clone)]
struct Shape {
    /// `None`: endless.
    items: Option<u64>,
    /// Queue sizes asked for (rounded up to pages by the queue).
    capacity: usize,
    branches: Vec<Vec<Stage>>,
    /// Bit `i` set: node `i` (source, stages in order, join, sink) is a task.
    tasks: u64,
    /// Worker threads for the task nodes.
    workers: usize,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop_oneof![3 => (0u64..8000).prop_map(Some), 1 => Just(None)],
        prop_oneof![Just(1usize), Just(1000), Just(1500), Just(3333)],
        prop::collection::vec(prop::collection::vec(stage(), 0..4), 1..4),
        prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
        1usize..4,
    )
        .prop_map(|(items, capacity, mut branches, tasks, workers)| {
            if items.is_none() {
                // An endless source needs every branch to end by itself.
                for b in &mut branches {
                    if !b.iter().any(|s| matches!(s, Stage::Head { .. })) {
                        b.push(Stage::Head { limit: 2500 });
                    }
                }
            }
            Shape {
                items,
                capacity,
                branches,
                tasks,
                workers,
            }
        })
}

bodies! {
    /// Runs one stage as a node body.
    fn stage_body / stage_body_async(st: Stage, inp: Input<u32>, out: Output<u32>, name: String) -> NodeResult {
        let (mut inp, mut out) = (inp, out);
        let (threshold, chunk) = match st {
            Stage::Copy { threshold, chunk } => (threshold, chunk),
            _ => (1, usize::MAX),
        };
        let mut passed = 0u64;
        loop {
            let s = peek!(inp, threshold)?;
            if s.is_empty() {
                return Ok(());
            }
            let mut k = s.len().min(chunk);
            match st {
                Stage::Head { limit } => {
                    if passed >= limit {
                        return Ok(());
                    }
                    k = k.min((limit - passed) as usize);
                }
                Stage::Fail { at } | Stage::Panic { at } if passed + k as u64 > at => {
                    k = (at - passed) as usize;
                    if k == 0 {
                        if matches!(st, Stage::Panic { .. }) {
                            panic!("{name} panics at item {at}");
                        }
                        return Err(format!("{name} fails at item {at}").into());
                    }
                }
                _ => {}
            }
            let add = if let Stage::Add { c } = st { c } else { 0 };
            let d = reserve!(out, k)?;
            for (d, &x) in d.iter_mut().zip(&s[..k]) {
                *d = x.wrapping_add(add);
            }
            out.commit(k)?;
            inp.consume(k)?;
            passed += k as u64;
        }
    }
}

bodies! {
    /// The join: one item of each live branch per round, their sum.
    fn join / join_async(lasts: Vec<Input<u32>>, j_out: Output<u32>) -> NodeResult {
        let mut j_out = j_out;
        let mut live: Vec<Option<Input<u32>>> = lasts.into_iter().map(Some).collect();
        loop {
            let mut sum = 0u32;
            let mut any = false;
            for slot in live.iter_mut() {
                let Some(inp) = slot else { continue };
                let s = peek!(inp, 1)?;
                if s.is_empty() {
                    *slot = None;
                    continue;
                }
                sum = sum.wrapping_add(s[0]);
                any = true;
                inp.consume(1)?;
            }
            if !any {
                return Ok(());
            }
            write!(j_out, &[sum])?;
        }
    }
}

bodies! {
    /// Reads to the end of the stream into `got`.
    fn collect / collect_async(inp: Input<u32>, got: Arc<Mutex<Vec<u32>>>) -> NodeResult {
        let mut inp = inp;
        let mut all = Vec::new();
        loop {
            let s = peek!(inp, 1)?;
            if s.is_empty() {
                break;
            }
            all.extend_from_slice(s);
            let k = s.len();
            inp.consume(k)?;
        }
        *got.lock().unwrap() = all;
        Ok(())
    }
}

bodies! {
    /// Writes `0..n` in one call (in pieces of the queue).
    fn count_to / count_to_async(out: Output<u32>, n: u64) -> NodeResult {
        let mut out = out;
        let all: Vec<u32> = (0..n as u32).collect();
        write!(out, &all)?;
        Ok(())
    }
}

/// What a shape must give: for each branch, the number of items it delivers
/// when nothing fails and the constant it adds; and the stages that may fail
/// (with whether each certainly fails).
struct Expect {
    lengths: Vec<u64>,
    adds: Vec<u32>,
    /// (node name, certainly fails)
    failing: Vec<(String, bool)>,
}

fn expect(shape: &Shape) -> Expect {
    let mut e = Expect {
        lengths: Vec::new(),
        adds: Vec::new(),
        failing: Vec::new(),
    };
    for (b, stages) in shape.branches.iter().enumerate() {
        let mut reach = shape.items.unwrap_or(u64::MAX);
        let mut add = 0u32;
        for (i, st) in stages.iter().enumerate() {
            match *st {
                Stage::Head { limit } => reach = reach.min(limit),
                Stage::Add { c } => add = add.wrapping_add(c),
                Stage::Fail { at } | Stage::Panic { at } if reach > at => {
                    // Certain unless a head after it may stop reading first:
                    // a head with a limit above `at` never does (it waits for
                    // more than the stage passes before failing).
                    let cut = stages[i + 1..]
                        .iter()
                        .any(|s| matches!(*s, Stage::Head { limit } if limit <= at));
                    e.failing.push((format!("b{b}s{i}"), !cut));
                    reach = at;
                }
                _ => {}
            }
        }
        e.lengths.push(reach);
        e.adds.push(add);
    }
    e
}

fn build_and_run(shape: &Shape) -> (Result<(), Error>, Vec<u32>) {
    let mut g = Graph::new();
    g.set_workers(shape.workers);
    let mut kind = (0..64).map(|i| shape.tasks >> i & 1 == 1);
    let cap = shape.capacity;
    let nb = shape.branches.len();
    // Source, fanned out to the first node of each branch.
    let mut firsts = Vec::new();
    let (mut src, first) = g
        .connect_with_capacity::<u32>(("src", "out"), (&node_name(0, 0, shape), "in0"), cap)
        .unwrap();
    firsts.push(first);
    for b in 1..nb {
        firsts.push(
            g.tap(&mut src, (&node_name(b, 0, shape), &format!("in{b}")))
                .unwrap(),
        );
    }
    let task = kind.next().unwrap_or(false);
    match shape.items {
        Some(n) => add!(g, "src", task, count_to / count_to_async(src, n)),
        None => add!(
            g,
            "src",
            task,
            endless / endless_async(src, 900, n_seed(nb))
        ),
    }
    let mut lasts = Vec::new();
    for (b, (stages, mut inp)) in shape.branches.iter().zip(firsts).enumerate() {
        for (i, st) in stages.iter().enumerate() {
            let me = format!("b{b}s{i}");
            let next = node_name(b, i + 1, shape);
            let (out, next_in) = g
                .connect_with_capacity::<u32>((&me, "out"), (&next, &format!("in{b}")), cap)
                .unwrap();
            let (st, name) = (st.clone(), me.clone());
            let task = kind.next().unwrap_or(false);
            add!(
                g,
                &me,
                task,
                stage_body / stage_body_async(st, inp, out, name)
            );
            inp = next_in;
        }
        lasts.push(inp);
    }
    let (j_out, s_in) = g
        .connect_with_capacity::<u32>(("join", "out"), ("sink", "in"), cap)
        .unwrap();
    let task = kind.next().unwrap_or(false);
    add!(g, "join", task, join / join_async(lasts, j_out));
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = got.clone();
    let task = kind.next().unwrap_or(false);
    add!(g, "sink", task, collect / collect_async(s_in, g2));
    let r = run_within(g);
    let v = got.lock().unwrap().clone();
    (r, v)
}

fn n_seed(nb: usize) -> u64 {
    0x9E37_79B9 ^ nb as u64
}

/// The node that reads a branch's `i`th queue: its stage, or the join.
fn node_name(b: usize, i: usize, shape: &Shape) -> String {
    if i < shape.branches[b].len() {
        format!("b{b}s{i}")
    } else {
        "join".to_string()
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random chains, fan-out and fan-in, odd queue sizes, thresholds larger
    /// than the queue, heads, failures and panics, each node a thread or a
    /// task on 1 to 3 workers: each run ends within the bound with the
    /// outcome the graph implies.
    #[test]
    fn random_graphs_end_with_the_outcome_they_imply(shape in shape()) {
        let e = expect(&shape);
        let (r, got) = build_and_run(&shape);
        let certain = e.failing.iter().any(|(_, c)| *c);
        match r {
            Ok(()) => {
                prop_assert!(!certain, "a stage that must fail did not: {:?}", e.failing);
                let rounds = e.lengths.iter().copied().max().unwrap_or(0);
                prop_assert_eq!(got.len() as u64, rounds);
                for (i, &v) in got.iter().enumerate() {
                    let mut want = 0u32;
                    for (l, a) in e.lengths.iter().zip(&e.adds) {
                        if (i as u64) < *l {
                            want = want.wrapping_add((i as u32).wrapping_add(*a));
                        }
                    }
                    prop_assert_eq!(v, want, "item {}", i);
                }
            }
            Err(Error::Node { node, .. }) | Err(Error::Panicked { node, .. }) => {
                prop_assert!(
                    e.failing.iter().any(|(n, _)| *n == node),
                    "{} failed, but only {:?} may", node, e.failing
                );
            }
            Err(other) => prop_assert!(false, "unexpected outcome: {}", other),
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1000,
        max_shrink_iters: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    /// A ring of nodes passing `tokens` round: each fires on its threshold
    /// and passes exactly that many on. Fewer tokens than the first threshold
    /// is a real deadlock, reported with the cycle; a multiple of a common
    /// threshold runs its rounds and ends.
    #[test]
    fn rings_end_or_report_their_cycle(
        k in 2usize..5,
        thresholds in prop::collection::vec(1usize..3000, 5),
        common in 1usize..3000,
        batches in 1usize..4,
        deadlocked in any::<bool>(),
        rounds in 1usize..6,
    ) {
        let (tokens, t): (usize, Vec<usize>) = if deadlocked {
            let t1 = thresholds[1 % k].max(1);
            (t1 - 1, thresholds[..k].to_vec())
        } else {
            (common * batches, vec![common; k])
        };
        let mut g = Graph::new();
        let name = |i: usize| format!("r{i}");
        let mut outs = Vec::new();
        let mut ins = Vec::new();
        for i in 0..k {
            let (o, inp) = g
                .connect_with_capacity::<u32>((&name(i), "out"), (&name((i + 1) % k), "in"), 1)
                .unwrap();
            outs.push(o);
            ins.push(inp);
        }
        // Node i reads the queue written by node i - 1.
        ins.rotate_right(1);
        let fired = Arc::new(Mutex::new(0usize));
        for (i, (mut out, mut inp)) in outs.into_iter().zip(ins).enumerate() {
            let ti = t[i];
            let fired = fired.clone();
            g.node(&name(i), move || {
                let mut n = 0usize;
                if i == 0 {
                    out.write(&vec![7u32; tokens])?;
                }
                loop {
                    if i == 0 && n == rounds {
                        *fired.lock().unwrap() = n;
                        return Ok(());
                    }
                    let s = inp.peek(ti)?;
                    if s.len() < ti {
                        return Ok(());
                    }
                    let v = s[..ti].to_vec();
                    inp.consume(ti)?;
                    out.write(&v)?;
                    n += 1;
                }
            })
            .unwrap();
        }
        let r = run_within(g);
        if deadlocked {
            match r {
                Err(Error::Deadlock { cycle }) => {
                    for i in 0..k {
                        prop_assert!(cycle.contains(&name(i)), "{} not in {}", name(i), cycle);
                    }
                }
                other => prop_assert!(false, "expected a deadlock, got {:?}", other),
            }
        } else {
            prop_assert!(r.is_ok(), "{:?}", r);
            prop_assert_eq!(*fired.lock().unwrap(), rounds);
        }
    }
}

#[test]
fn a_writer_that_only_polls_still_grows_the_queue_for_a_large_threshold() {
    // The writer never blocks (try_reserve and yield); the reader's threshold
    // exceeds the queue. The runtime never sees the writer blocked, so the
    // growth the reader asked for must happen in the writer's poll.
    let mut g = Graph::new();
    let (mut out, mut inp) = g
        .connect_with_capacity::<u32>(("w", "out"), ("r", "in"), 1)
        .unwrap();
    let cap = out.capacity();
    let n = 4 * cap as u32;
    g.node("w", move || {
        let mut i = 0u32;
        while i < n {
            match out.try_reserve(1)? {
                Some(s) => {
                    s[0] = i;
                    out.commit(1)?;
                    i += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        Ok(())
    })
    .unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let o = got.clone();
    g.node("r", move || {
        // Ask once the writer has filled the queue and only polls.
        std::thread::sleep(Duration::from_millis(30));
        let s = inp.peek(3 * cap)?;
        assert!(s.len() >= 3 * cap);
        o.lock().unwrap().extend_from_slice(&s[..3 * cap]);
        Ok(())
    })
    .unwrap();
    run_within(g).unwrap();
    let got = got.lock().unwrap();
    assert_eq!(*got, (0..3 * cap as u32).collect::<Vec<_>>());
}

#[test]
fn an_output_whose_reader_finished_beside_one_still_read_is_an_error_not_a_truncation() {
    // One node, two outputs: "display" reads ten items and returns, "sink"
    // wants everything. The write to the display's queue returns `Closed`
    // while the sink still reads: the graph must fail, not end short.
    let mut g = Graph::new();
    let (mut main_out, main_in) = g.connect::<u32>(("demod", "main"), ("sink", "in")).unwrap();
    let (mut dbg_out, mut dbg_in) = g
        .connect::<u32>(("demod", "dbg"), ("display", "in"))
        .unwrap();
    g.node("demod", move || {
        for i in 0..200_000u32 {
            main_out.write(&[i])?;
            dbg_out.write(&[i])?;
        }
        Ok(())
    })
    .unwrap();
    g.node("display", move || {
        let n = dbg_in.peek(10)?.len().min(10);
        dbg_in.consume(n)?;
        Ok(())
    })
    .unwrap();
    let _got = counting_sink(&mut g, "sink", main_in);
    match run_within(g) {
        Err(Error::Port { node, port, .. }) => {
            assert_eq!((node.as_str(), port.as_str()), ("demod", "dbg"))
        }
        other => panic!("expected the closed output's error, got {other:?}"),
    }
}

#[test]
fn a_threshold_beyond_the_queue_limit_is_the_ports_error_not_memory_exhausted() {
    let mut g = Graph::new();
    let (out, mut inp) = g.connect::<u32>(("w", "out"), ("r", "in")).unwrap();
    g.node("w", move || endless(out, 1000, 1)).unwrap();
    g.node("r", move || {
        inp.peek(1 << 40)?;
        Ok(())
    })
    .unwrap();
    match run_within(g) {
        Err(Error::Port {
            node,
            port,
            source: dmaflow::ring::Error::QueueLimit { bytes, limit },
        }) => {
            assert_eq!((node.as_str(), port.as_str()), ("r", "in"));
            assert_eq!(bytes, 4 << 40);
            assert_eq!(limit, dmaflow::graph::DEFAULT_QUEUE_LIMIT);
        }
        other => panic!("expected the queue limit, got {other:?}"),
    }
}

#[test]
fn growth_that_bounded_scheduling_needs_stops_at_the_queue_limit() {
    // `w` writes a million items to `a`, then one to `b`; `r` reads `b`
    // first: `a` must hold the whole million (4 MB) before `r` reads it.
    let graph = |limit: Option<usize>| {
        let mut g = Graph::new();
        if let Some(l) = limit {
            g.set_queue_limit(l);
        }
        let (mut a_out, mut a_in) = g.connect::<u32>(("w", "a"), ("r", "a")).unwrap();
        let (mut b_out, mut b_in) = g.connect::<u32>(("w", "b"), ("r", "b")).unwrap();
        g.node("w", move || {
            let chunk: Vec<u32> = (0..1000).collect();
            for _ in 0..1000 {
                a_out.write(&chunk)?;
            }
            b_out.write(&[7])?;
            Ok(())
        })
        .unwrap();
        g.node("r", move || {
            // `w` failing closes `b` before the graph stops: this node may
            // see the end of `b` first (then the graph's error is w's).
            if b_in.peek(1)?.is_empty() {
                return Ok(());
            }
            assert_eq!(b_in.peek(1)?, [7]);
            b_in.consume(1)?;
            let mut n = 0;
            loop {
                let k = a_in.peek(1)?.len();
                if k == 0 {
                    break;
                }
                a_in.consume(k)?;
                n += k;
            }
            assert_eq!(n, 1_000_000);
            Ok(())
        })
        .unwrap();
        g
    };
    run_within(graph(None)).expect("4 MB is within the default limit");
    match run_within(graph(Some(1 << 20))) {
        Err(Error::QueueLimit {
            queue,
            writer,
            items,
            limit,
        }) => {
            assert_eq!((queue.as_str(), writer.as_str()), ("w.a -> r.a", "w"));
            assert_eq!((items, limit), (1000, 1 << 20));
        }
        other => panic!("expected the queue limit on w.a, got {other:?}"),
    }
}

#[test]
fn a_task_awaiting_two_ports_at_once_waits_on_both_not_a_false_deadlock() {
    // A select over two port futures: the node waits on both, and goes on
    // with whichever is ready first (b's item; a waits for sel's output).
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;
    let mut g = Graph::new();
    let (mut oa, ia) = g.connect::<u32>(("a", "out"), ("sel", "a")).unwrap();
    let (mut ob, ib) = g.connect::<u32>(("b", "out"), ("sel", "b")).unwrap();
    let (mut oc, mut ic) = g.connect::<u32>(("sel", "c"), ("a", "in")).unwrap();
    g.task("a", async move {
        ic.peek_async(1).await?;
        oa.write_async(&[1]).await?;
        Ok(())
    })
    .unwrap();
    g.node("b", move || {
        std::thread::sleep(Duration::from_millis(50));
        Ok(ob.write(&[2])?)
    })
    .unwrap();
    g.task("sel", async move {
        let (mut ia, mut ib) = (ia, ib);
        let mut fa = pin!(ia.peek_async(1));
        let mut fb = pin!(ib.peek_async(1));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = fa.as_mut().poll(cx) {
                return Poll::Ready(r.map(|s| s.len()));
            }
            if let Poll::Ready(r) = fb.as_mut().poll(cx) {
                return Poll::Ready(r.map(|s| s.len()));
            }
            Poll::Pending
        })
        .await?;
        oc.write_async(&[0]).await?;
        Ok(())
    })
    .unwrap();
    run_within(g).unwrap();
}

#[test]
fn block_on_inside_a_task_stops_the_graph_instead_of_holding_its_worker() {
    let mut g = Graph::new();
    g.set_workers(1);
    let (mut o, mut i) = g.connect::<u32>(("src", "out"), ("sink", "in")).unwrap();
    g.task("sink", async move {
        loop {
            let n = dmaflow::graph::block_on(i.peek_async(1))?.len();
            if n == 0 {
                return Ok(());
            }
            i.consume(n)?;
        }
    })
    .unwrap();
    g.task("src", async move {
        for k in 0..100_000u32 {
            o.write_async(&[k]).await?;
        }
        Ok(())
    })
    .unwrap();
    match run_within(g) {
        Err(Error::Panicked { node, message }) => {
            assert_eq!(node, "sink");
            assert!(
                message.contains("block_on called inside a task node"),
                "{message}"
            );
        }
        other => panic!("expected the misuse reported, got {other:?}"),
    }
}
