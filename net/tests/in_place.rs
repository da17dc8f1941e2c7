//! A source that hands each message to its first consumer where it landed:
//! items read in ZeroMQ's buffer, copies only where bytes must move.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dmaflow::graph::Graph;
use dmaflow_net::{Edge, Endpoint, add_sink, add_source_with};

fn ipc(dir: &tempfile::TempDir, name: &str) -> Endpoint {
    Endpoint::parse(&format!("ipc://{}", dir.path().join(name).display())).unwrap()
}

/// Runs a graph whose source at `edge` gathers every `u32` it is handed;
/// `push` feeds a plain PUSH socket bound at the edge's endpoint.
fn gather(
    edge: Edge,
    push: impl FnOnce(&zmq::Socket),
) -> (
    Result<(), dmaflow::graph::Error>,
    Vec<u32>,
    dmaflow_net::Stats,
) {
    let ctx = zmq::Context::new();
    let tx = ctx.socket(zmq::PUSH).unwrap();
    tx.bind(edge.endpoint.as_str()).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    let mut g = Graph::new();
    let stats = add_source_with::<u32, _>(&mut g, "net", edge, move |items| {
        keep.lock().unwrap().extend_from_slice(items);
        Ok(())
    })
    .unwrap();
    let run = std::thread::spawn(move || g.run());
    push(&tx);
    let r = run.join().unwrap();
    let got = std::mem::take(&mut *got.lock().unwrap());
    (r, got, Arc::try_unwrap(stats).unwrap())
}

fn bytes(v: impl IntoIterator<Item = u32>) -> Vec<u8> {
    v.into_iter().flat_map(u32::to_le_bytes).collect()
}

#[test]
fn large_messages_are_read_where_they_landed_without_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let edge = Edge::source(ipc(&dir, "big"));
    let (r, got, stats) = gather(edge, |tx| {
        for m in 0..64u32 {
            tx.send(bytes(m * 16384..(m + 1) * 16384), 0).unwrap();
        }
        tx.send(Vec::<u8>::new(), 0).unwrap();
    });
    r.unwrap();
    assert_eq!(got, (0..64 * 16384).collect::<Vec<u32>>());
    assert_eq!(stats.bytes.load(Ordering::Relaxed), 64 * 16384 * 4);
    // 64 KiB messages lie in memory of their own, aligned: no copy.
    assert_eq!(stats.copied.load(Ordering::Relaxed), 0);
}

#[test]
fn items_split_across_messages_are_joined_and_the_copy_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut edge = Edge::source(ipc(&dir, "split"));
    edge.idle_timeout = Some(Duration::from_millis(300));
    let all = bytes(0..10);
    let (r, got, stats) = gather(edge, |tx| {
        // 6 + 7 + 27 bytes: items 1 and 3 span two messages each.
        tx.send(&all[..6], 0).unwrap();
        tx.send(&all[6..13], 0).unwrap();
        tx.send(&all[13..], 0).unwrap();
        // A GNU Radio peer sends no end of stream: the idle timeout ends it.
    });
    r.unwrap();
    assert_eq!(got, (0..10).collect::<Vec<u32>>());
    let copied = stats.copied.load(Ordering::Relaxed);
    // At least the two split items' bytes moved; never more than all.
    assert!((8..=40).contains(&copied), "{copied}");
    assert_eq!(stats.items.load(Ordering::Relaxed), 10);
}

#[test]
fn a_consumer_writes_on_downstream_and_the_stream_ends_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "on");
    let n = 1u32 << 20;
    // dmaflow's sink in one graph ...
    let mut tx = Graph::new();
    let (mut out, inp) = tx
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), 1 << 16)
        .unwrap();
    let mut sink = Edge::sink(at.clone());
    sink.max_items = 8192;
    add_sink(&mut tx, "net", sink, inp).unwrap();
    tx.node("count", move || {
        let mut i = 0u32;
        while i < n {
            let s = out.reserve_up_to((n - i) as usize)?;
            for x in s.iter_mut() {
                *x = i;
                i += 1;
            }
            let k = s.len();
            out.commit(k)?;
        }
        Ok(())
    })
    .unwrap();
    // ... its source's consumer in another, writing on to a node.
    let mut rx = Graph::new();
    let (mut on, mut inp) = rx
        .connect_with_capacity::<u32>(("net", "out"), ("check", "in"), 1 << 16)
        .unwrap();
    let stats = add_source_with::<u32, _>(&mut rx, "net", Edge::source(at), move |items| {
        if items.is_empty() {
            // Nothing waiting: the graph's abort shows here.
            on.try_reserve(0)?;
            return Ok(());
        }
        on.write(items)?;
        Ok(())
    })
    .unwrap();
    let seen = Arc::new(Mutex::new(0u32));
    let count = seen.clone();
    rx.node("check", move || {
        let mut next = 0u32;
        loop {
            let s = inp.peek(1)?;
            if s.is_empty() {
                *count.lock().unwrap() = next;
                return Ok(());
            }
            for &x in s {
                assert_eq!(x, next);
                next += 1;
            }
            let k = s.len();
            inp.consume(k)?;
        }
    })
    .unwrap();
    let receiving = std::thread::spawn(move || rx.run());
    tx.run().unwrap();
    receiving.join().unwrap().unwrap();
    assert_eq!(*seen.lock().unwrap(), n);
    assert_eq!(stats.copied.load(Ordering::Relaxed), 0);
}
