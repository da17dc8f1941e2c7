//! Exhaustive interleavings of the graph's blocking protocol: the runtime's
//! own waits, stall checks, growth and abort, on the queue's own cursor
//! protocol (slots without memory: `L = ()`).

use super::wait::Counted;
use super::{Edge, ReadEnd, Runtime, Side, WaitError, WriteEnd};
use crate::graph::error::Error;
use crate::ring;
use crate::ring::Wait;
use crate::ring::cursor::{ReadSide, WriteSide, pair};
use crate::sync::{Ordering, lock};
use loom::sync::Arc;
use loom::thread;

impl WriteEnd for WriteSide<()> {
    fn capacity(&self) -> usize {
        WriteSide::capacity(self)
    }
    fn position(&self) -> u64 {
        WriteSide::position(self)
    }
    fn grow(&mut self, min_items: usize) -> Result<(), ring::Error> {
        self.relayout((), min_items);
        Ok(())
    }
    fn has_room(&mut self, n: usize) -> Result<bool, ring::Error> {
        self.wait_free(n, false)
    }
}

impl ReadEnd for ReadSide<()> {
    fn position(&self) -> u64 {
        ReadSide::position(self)
    }
    fn ready(&mut self, threshold: usize) -> Result<Option<usize>, ring::Error> {
        match self.wait_available(threshold, false) {
            Ok(Some(_)) => Ok(Some(threshold)),
            Ok(None) => Ok(None),
            Err(ring::Error::ThresholdTooLarge { .. }) if self.writer_closed() => {
                Ok(Some(self.capacity()))
            }
            Err(ring::Error::ThresholdTooLarge { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(f);
}

/// A runtime with `nodes` running nodes and one edge of `capacity` from
/// node 0 to node 1.
fn setup(nodes: usize, capacity: usize) -> (Arc<Runtime>, std::sync::Arc<Edge>) {
    let rt = Runtime::new();
    let edge = std::sync::Arc::new(Edge::new(
        0,
        "a.out -> b.in".into(),
        0,
        capacity,
        4,
        usize::MAX,
    ));
    {
        let mut s = lock(&rt.sched);
        for i in 0..nodes {
            s.add_node(&format!("n{i}"));
        }
        s.edges.push(edge.clone());
        s.readers_of.push(vec![1]);
    }
    (Arc::new(rt), edge)
}

/// The writer's side of a node: wait, publish, tell the readers.
fn write(rt: &Runtime, edge: &Edge, w: &mut WriteSide<()>, n: usize) -> Result<(), WaitError> {
    rt.wait_room(0, edge, w, n)?;
    w.publish(n);
    rt.after_commit(edge, w.position());
    Ok(())
}

/// Reads up to the end of the stream in steps of `threshold`; returns the count.
fn read_all(
    rt: &Runtime,
    edge: &Edge,
    r: &mut ReadSide<()>,
    threshold: usize,
) -> Result<u64, WaitError> {
    let mut got = 0;
    loop {
        let t = rt.wait_items(1, edge, r, threshold)?;
        if !take_readable(rt, edge, r, t, &mut got)? {
            return Ok(got);
        }
    }
}

/// Takes what is readable at threshold `t` (a fresh look, as
/// `Reader::peek(t)` does), adding it to `got` and telling the writer;
/// `false` at the end of the stream.
fn take_readable(
    rt: &Runtime,
    edge: &Edge,
    r: &mut ReadSide<()>,
    t: usize,
    got: &mut u64,
) -> Result<bool, WaitError> {
    let n = r
        .wait_available(t, false)
        .map_err(WaitError::Queue)?
        .unwrap_or(0);
    if n == 0 {
        return Ok(false);
    }
    r.release(n).map_err(WaitError::Queue)?;
    *got += n as u64;
    rt.after_consume(edge, r.position());
    Ok(true)
}

#[test]
fn loom_graph_waits_on_both_sides_lose_no_wakeup() {
    model(|| {
        let (rt, edge) = setup(2, 1);
        let (mut w, mut r) = pair((), 1, Wait::Spin);
        let (rt2, e2) = (rt.clone(), edge.clone());
        let t = thread::spawn(move || {
            for _ in 0..2 {
                write(&rt2, &e2, &mut w, 1).unwrap();
            }
            drop(w);
            rt2.wake(&e2, Side::Read);
            rt2.finish(0, "n0", Ok(Ok(())));
        });
        assert_eq!(read_all(&rt, &edge, &mut r, 1).unwrap(), 2);
        drop(r);
        rt.wake(&edge, Side::Write);
        rt.finish(1, "n1", Ok(Ok(())));
        t.join().unwrap();
        assert!(lock(&rt.sched).failure.is_none());
    });
}

#[test]
fn loom_graph_reader_that_closes_early_ends_a_waiting_writer() {
    model(|| {
        let (rt, edge) = setup(2, 1);
        let (mut w, r) = pair((), 1, Wait::Spin);
        let (rt2, e2) = (rt.clone(), edge.clone());
        let t = thread::spawn(move || {
            // The reader finishes without reading: the writer, waiting on
            // a full queue, must see the queue closed, never sleep on.
            drop(r);
            rt2.wake(&e2, Side::Write);
            rt2.finish(1, "n1", Ok(Ok(())));
        });
        write(&rt, &edge, &mut w, 1).unwrap();
        let second = write(&rt, &edge, &mut w, 1);
        assert!(
            matches!(second, Err(WaitError::Queue(ring::Error::Closed))),
            "{second:?}"
        );
        drop(w);
        rt.finish(0, "n0", Ok(Ok(())));
        t.join().unwrap();
    });
}

#[test]
fn loom_graph_threshold_beyond_the_queue_grows_it() {
    model(|| {
        // The reader's threshold (2) exceeds the queue (1): the writer,
        // blocked on the full queue, is asked to grow it and goes on.
        let (rt, edge) = setup(2, 1);
        let (mut w, mut r) = pair((), 1, Wait::Spin);
        let (rt2, e2) = (rt.clone(), edge.clone());
        let t = thread::spawn(move || {
            for _ in 0..2 {
                write(&rt2, &e2, &mut w, 1).unwrap();
            }
            drop(w);
            rt2.wake(&e2, Side::Read);
            rt2.finish(0, "n0", Ok(Ok(())));
        });
        let got = read_all(&rt, &edge, &mut r, 2).unwrap();
        assert_eq!(got, 2);
        drop(r);
        rt.wake(&edge, Side::Write);
        rt.finish(1, "n1", Ok(Ok(())));
        t.join().unwrap();
        assert!(edge.capacity.load(Ordering::SeqCst) >= 2);
    });
}

#[test]
fn loom_graph_abort_wakes_both_sides() {
    model(|| {
        // Three nodes: a writer and a reader on one edge, and a third that
        // fails. Whatever the two are doing then, neither waits for ever:
        // each ends with `Aborted` or has finished its work.
        let (rt, edge) = setup(3, 1);
        let (mut w, mut r) = pair((), 1, Wait::Spin);
        let (rt2, e2) = (rt.clone(), edge.clone());
        let writer = thread::spawn(move || {
            let res = (0..3).try_for_each(|_| write(&rt2, &e2, &mut w, 1));
            // Done, stopped, or its reader was stopped first.
            assert!(
                matches!(
                    res,
                    Ok(()) | Err(WaitError::Aborted) | Err(WaitError::Queue(ring::Error::Closed))
                ),
                "{res:?}"
            );
            drop(w);
            rt2.wake(&e2, Side::Read);
            rt2.finish(0, "n0", Ok(Ok(())));
        });
        let (rt3, e3) = (rt.clone(), edge.clone());
        let reader = thread::spawn(move || {
            let res = read_all(&rt3, &e3, &mut r, 1);
            // Everything the writer wrote before it was stopped, or stopped.
            assert!(
                matches!(res, Ok(0..=3) | Err(WaitError::Aborted)),
                "{res:?}"
            );
            drop(r);
            rt3.wake(&e3, Side::Write);
            rt3.finish(1, "n1", Ok(Ok(())));
        });
        rt.finish(2, "n2", Ok(Err("fails".into())));
        writer.join().unwrap();
        reader.join().unwrap();
        assert!(matches!(lock(&rt.sched).failure, Some(Error::Node { .. })));
    });
}

/// Two nodes (`tasks`: task nodes) each waiting, through `read`, to read
/// what the other would write: the one that leaves none running reports the
/// cycle and both are woken to learn of it. Returns the graph's failure.
fn cycle_of_two<T: std::fmt::Debug + 'static>(
    tasks: bool,
    read: fn(&Runtime, usize, &Edge, &mut ReadSide<()>) -> Result<T, WaitError>,
) -> Option<Error> {
    let rt = Arc::new(Runtime::new());
    let ab = std::sync::Arc::new(Edge::new(0, "a.out -> b.in".into(), 0, 1, 4, usize::MAX));
    let ba = std::sync::Arc::new(Edge::new(1, "b.out -> a.in".into(), 1, 1, 4, usize::MAX));
    {
        let mut s = lock(&rt.sched);
        s.add_node("a");
        s.add_node("b");
        s.task = vec![tasks, tasks];
        s.edges = vec![ab.clone(), ba.clone()];
        s.readers_of = vec![vec![1], vec![0]];
    }
    let (w_ab, mut r_ab) = pair((), 1, Wait::Spin);
    let (w_ba, mut r_ba) = pair((), 1, Wait::Spin);
    let (rt2, ba2) = (rt.clone(), ba.clone());
    let a = thread::spawn(move || {
        let res = read(&rt2, 0, &ba2, &mut r_ba);
        assert!(matches!(res, Err(WaitError::Aborted)), "{res:?}");
        drop((w_ab, r_ba));
        rt2.finish(0, "a", Ok(Ok(())));
    });
    let res = read(&rt, 1, &ab, &mut r_ab);
    assert!(matches!(res, Err(WaitError::Aborted)), "{res:?}");
    drop((w_ba, r_ab));
    rt.finish(1, "b", Ok(Ok(())));
    a.join().unwrap();
    lock(&rt.sched).failure.take()
}

#[test]
fn loom_graph_reader_of_its_own_output_reports_the_deadlock() {
    model(|| {
        // Two thread nodes, each blocking to read what the other would write.
        let failure = cycle_of_two(false, |rt, node, edge, r| rt.wait_items(node, edge, r, 1));
        assert!(
            matches!(failure, Some(Error::Deadlock { .. })),
            "{failure:?}"
        );
    });
}

/// A waker that raises a flag.
struct Flag(crate::sync::AtomicBool);

impl std::task::Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One blocking round of task node `node` as dmaflow's executor runs it:
/// the wait left during the poll ([`Counted::Polled`]), the node counted
/// blocked once the poll has ended ([`Runtime::parked`], without the lock),
/// then the task asleep until its waker is woken.
fn polled_round(
    rt: &Runtime,
    node: usize,
    edge: &Edge,
    wait: (Side, usize, u64),
    ready: impl FnOnce() -> Result<bool, ring::Error>,
) -> Result<(), WaitError> {
    let flag = std::sync::Arc::new(Flag(crate::sync::AtomicBool::new(false)));
    let waker = std::task::Waker::from(flag.clone());
    let (side, amount, target) = wait;
    let (s, look, sleep, _) = rt.begin_block(
        node,
        edge,
        side,
        amount,
        target,
        ready,
        Counted::Polled(&waker),
    )?;
    let state = rt.node_state(&s, node);
    let seen = state.epoch();
    drop(s);
    look.map_err(WaitError::Queue)?;
    if sleep {
        // The poll has returned pending.
        rt.parked(state, seen);
        while !flag.0.load(Ordering::SeqCst) {
            thread::yield_now();
        }
    }
    Ok(())
}

/// Writes `n` items one at a time as polled task node 0.
fn write_polled(rt: &Runtime, edge: &Edge, w: &mut WriteSide<()>, n: usize) {
    for _ in 0..n {
        while !w.has_room(1).unwrap() {
            let target = (w.position() + 1).saturating_sub(w.capacity() as u64);
            polled_round(rt, 0, edge, (Side::Write, 1, target), || w.has_room(1)).unwrap();
        }
        w.publish(1);
        rt.after_commit(edge, w.position());
    }
}

/// Reads to the end of the stream as polled task node `node` waiting on
/// `edge`; returns the count.
fn read_polled(
    rt: &Runtime,
    node: usize,
    edge: &Edge,
    r: &mut ReadSide<()>,
) -> Result<u64, WaitError> {
    let mut got = 0;
    loop {
        if rt.aborted() {
            return Err(WaitError::Aborted);
        }
        match r.ready(1).map_err(WaitError::Queue)? {
            Some(t) => {
                if !take_readable(rt, edge, r, t, &mut got)? {
                    return Ok(got);
                }
            }
            None => {
                let target = r.position() + 1;
                polled_round(rt, node, edge, (Side::Read, 1, target), || {
                    r.ready(1).map(|t| t.is_some())
                })?;
            }
        }
    }
}

#[test]
fn loom_graph_polled_tasks_lose_no_wakeup_and_count_no_false_stall() {
    model(|| {
        // Both sides are tasks: a wait counted blocked without the lock
        // (after its poll) races with the other side's resumption of it.
        let (rt, edge) = setup(2, 1);
        {
            let mut s = lock(&rt.sched);
            s.task = vec![true, true];
        }
        let (mut w, mut r) = pair((), 1, Wait::Spin);
        let (rt2, e2) = (rt.clone(), edge.clone());
        let t = thread::spawn(move || {
            write_polled(&rt2, &e2, &mut w, 2);
            drop(w);
            rt2.wake(&e2, Side::Read);
            rt2.finish(0, "n0", Ok(Ok(())));
        });
        assert_eq!(read_polled(&rt, 1, &edge, &mut r).unwrap(), 2);
        drop(r);
        rt.wake(&edge, Side::Write);
        rt.finish(1, "n1", Ok(Ok(())));
        t.join().unwrap();
        assert!(lock(&rt.sched).failure.is_none());
        assert_eq!(rt.running.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn loom_graph_polled_tasks_in_a_cycle_report_the_deadlock() {
    model(|| {
        // Two tasks: the one whose lock-free count of blocked nodes leaves
        // none running reports the cycle.
        match cycle_of_two(true, read_polled) {
            Some(Error::Deadlock { cycle }) => {
                assert!(cycle.contains("closes the cycle"), "{cycle}")
            }
            other => panic!("{other:?}"),
        }
    });
}
