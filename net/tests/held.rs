//! A sink that sends from its queue's slots: the slots ZeroMQ holds are
//! never rewritten before it lets go of them, a receiver that ends while
//! messages are held fails the graph cleanly, and a PUB sink counts what it
//! drops at the high-water mark.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dmaflow::graph::Graph;
use dmaflow_net::{Edge, Endpoint, Pattern, Stats, add_sink};

fn ipc(dir: &tempfile::TempDir, name: &str) -> Endpoint {
    Endpoint::parse(&format!("ipc://{}", dir.path().join(name).display())).unwrap()
}

/// A graph whose writer puts the counters `0..n` into a queue of `capacity`
/// items as fast as it can, in reservations of `per` items, and whose sink
/// sends them at `edge`; it runs on a thread of its own.
fn sender(
    edge: Edge,
    capacity: usize,
    n: u32,
) -> (
    Arc<Stats>,
    std::thread::JoinHandle<Result<(), dmaflow::graph::Error>>,
) {
    let mut g = Graph::new();
    let (mut out, inp) = g
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), capacity)
        .unwrap();
    let stats = add_sink(&mut g, "net", edge, inp).unwrap();
    g.node("count", move || {
        let mut i = 0u32;
        while i < n {
            // Whatever is free, up to the rest: the writer takes every
            // slot the moment it is given back.
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
    (stats, std::thread::spawn(move || g.run()))
}

/// Runs `f` on a thread and waits at most `limit` for it.
fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (put, got) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = put.send(f());
    });
    got.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("no answer within {limit:?}"))
}

/// A free loopback TCP endpoint.
fn tcp() -> Endpoint {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    Endpoint::parse(&format!("tcp://127.0.0.1:{port}")).unwrap()
}

#[test]
fn slots_held_by_zeromq_are_not_rewritten_before_it_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    held_slots_are_not_rewritten(ipc(&dir, "held"));
}

#[test]
fn slots_held_by_zeromq_over_tcp_are_not_rewritten_before_it_lets_go() {
    held_slots_are_not_rewritten(tcp());
}

/// A writer racing a slow receiver at `at`, every item checked.
fn held_slots_are_not_rewritten(at: Endpoint) {
    // Messages of 16 KiB (libzmq writes a message this large from its own
    // memory, late) in a queue of 64 KiB: the writer races the messages
    // still in flight for every slot, four times over per queue's worth.
    let mut edge = Edge::sink(at.clone());
    edge.max_items = 4096;
    edge.high_water_mark = 2;
    let n: u32 = 8 << 20;
    let ctx = zmq::Context::new();
    let rx = ctx.socket(zmq::PULL).unwrap();
    rx.set_rcvhwm(1).unwrap();
    rx.connect(at.as_str()).unwrap();
    let (stats, run) = sender(edge, 16 << 10, n);
    let checked = within(Duration::from_secs(60), move || {
        let mut next = 0u32;
        let mut messages = 0u64;
        loop {
            let m = rx.recv_msg(0).unwrap();
            if m.is_empty() {
                return (next, messages);
            }
            for c in m.chunks_exact(4) {
                let x = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                // A slot rewritten while ZeroMQ held it shows a later
                // counter (the writer's next lap) here.
                assert_eq!(x, next, "item {next} of message {messages}");
                next += 1;
            }
            messages += 1;
            // A slow receiver: the sink's messages wait in ZeroMQ.
            if messages.is_multiple_of(32) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    within(Duration::from_secs(30), move || run.join().unwrap()).unwrap();
    let (items, messages) = checked;
    assert_eq!(items, n);
    assert_eq!(messages, u64::from(n) / 4096);
    assert_eq!(stats.items.load(Ordering::Relaxed), u64::from(n));
    assert_eq!(stats.bytes.load(Ordering::Relaxed), u64::from(n) * 4);
    // Sent from the queue: nothing copied.
    assert_eq!(stats.copied.load(Ordering::Relaxed), 0);
    assert_eq!(stats.copies_per_byte(), 0.0);
    // The receiver was slow: the sink waited for room.
    assert!(stats.waited_ns.load(Ordering::Relaxed) > 0);
}

#[test]
fn small_messages_and_tagged_ones_are_copied_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "copied");
    let mut edge = Edge::sink(at.clone());
    // 64-byte messages: the default copies them (below Edge::COPY_BELOW).
    edge.max_items = 16;
    let ctx = zmq::Context::new();
    let rx = ctx.socket(zmq::PULL).unwrap();
    rx.connect(at.as_str()).unwrap();
    let n = 100_000u32;
    let (stats, run) = sender(edge, 4096, n);
    let got = within(Duration::from_secs(30), move || {
        let mut got = Vec::new();
        loop {
            let m = rx.recv_msg(0).unwrap();
            if m.is_empty() {
                return got;
            }
            assert_eq!(m.len(), 64);
            got.extend(
                m.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
        }
    });
    within(Duration::from_secs(30), move || run.join().unwrap()).unwrap();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
    assert_eq!(stats.copied.load(Ordering::Relaxed), u64::from(n) * 4);
    assert_eq!(stats.copies_per_byte(), 1.0);
}

#[test]
fn a_receiver_that_ends_while_messages_are_held_fails_the_graph_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "gone");
    let mut edge = Edge::sink(at.clone());
    edge.max_items = 4096;
    edge.high_water_mark = 4;
    edge.grace = Duration::from_millis(300);
    let ctx = zmq::Context::new();
    let rx = ctx.socket(zmq::PULL).unwrap();
    rx.set_rcvhwm(1).unwrap();
    rx.connect(at.as_str()).unwrap();
    // More than the queue, the pipes and the kernel hold: the sink has
    // messages over its slots in flight when the receiver goes.
    let (stats, run) = sender(edge, 64 << 10, 64 << 20);
    let first = within(Duration::from_secs(10), move || {
        let mut first = Vec::new();
        for _ in 0..8 {
            first.push(rx.recv_msg(0).unwrap());
        }
        // The receiver ends: its socket and context close.
        drop(rx);
        drop(ctx);
        first
    });
    for (k, m) in first.iter().enumerate() {
        let base = (k * 4096) as u32;
        assert!(
            m.chunks_exact(4)
                .enumerate()
                .all(|(i, c)| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) == base + i as u32),
            "message {k}"
        );
    }
    let t0 = Instant::now();
    let result = within(Duration::from_secs(30), move || run.join().unwrap());
    let e = result.unwrap_err().to_string();
    assert!(e.contains("no peer took the stream"), "{e}");
    // The grace period, then the linger for what was held: not a hang.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(stats.items.load(Ordering::Relaxed) >= 8 * 4096);
}

#[test]
fn a_pub_sink_at_its_high_water_mark_counts_what_it_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "pub");
    let mut edge = Edge::sink(at.clone());
    edge.pattern = Pattern::PubSub;
    edge.max_items = 4096;
    edge.high_water_mark = 2;
    edge.grace = Duration::from_secs(5);
    let n: u32 = 16 << 20;
    let ctx = zmq::Context::new();
    let rx = ctx.socket(zmq::SUB).unwrap();
    rx.set_rcvhwm(2).unwrap();
    rx.set_subscribe(b"").unwrap();
    let mut g = Graph::new();
    let (mut out, inp) = g
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), 64 << 10)
        .unwrap();
    let stats = add_sink(&mut g, "net", edge, inp).unwrap();
    // Subscribed before the first message (the PUB socket is bound).
    rx.connect(at.as_str()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    g.node("count", move || {
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
    let run = std::thread::spawn(move || g.run());
    // A slow subscriber that starts late and reads until the end of stream
    // (or a quiet second: the end of stream itself may be dropped).
    let (items, messages) = within(Duration::from_secs(60), move || {
        std::thread::sleep(Duration::from_millis(100));
        rx.set_rcvtimeo(1000).unwrap();
        let (mut items, mut messages) = (0u64, 0u64);
        let mut last: Option<u32> = None;
        while let Ok(m) = rx.recv_msg(0) {
            if m.is_empty() {
                break;
            }
            let first = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
            // Whole messages or none: each one a run of counters, later
            // than the one before.
            assert!(last.is_none_or(|l| first > l));
            for (i, c) in m.chunks_exact(4).enumerate() {
                assert_eq!(
                    u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                    first + i as u32
                );
            }
            last = Some(first);
            items += (m.len() / 4) as u64;
            messages += 1;
            if messages.is_multiple_of(8) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        (items, messages)
    });
    within(Duration::from_secs(30), move || run.join().unwrap()).unwrap();
    let sent = stats.items.load(Ordering::Relaxed);
    let dropped = stats.dropped_at_hwm.load(Ordering::Relaxed);
    assert!(dropped > 0, "nothing dropped: {sent} items sent");
    // Every item either went or was counted as dropped.
    assert_eq!(sent + dropped, u64::from(n));
    // What went arrived (the subscriber drained it within the linger).
    assert_eq!(items, sent, "{messages} messages");
}

#[test]
fn a_receiver_gone_while_the_whole_queue_is_in_flight_is_noticed() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "all-held");
    // The sink connects: ZeroMQ keeps its messages for a peer that may come
    // back, and its high-water mark is far above the queue, so no send is
    // refused: every slot ends up in flight and only the sink's own watch
    // over its peer ends the wait.
    let mut edge = Edge::sink(at.clone());
    edge.bind = false;
    edge.max_items = 4096;
    edge.high_water_mark = 1000;
    edge.grace = Duration::from_millis(300);
    let ctx = zmq::Context::new();
    let rx = ctx.socket(zmq::PULL).unwrap();
    rx.set_rcvhwm(1).unwrap();
    rx.bind(at.as_str()).unwrap();
    let (_stats, run) = sender(edge, 16 << 10, 64 << 20);
    within(Duration::from_secs(10), move || {
        for _ in 0..2 {
            rx.recv_msg(0).unwrap();
        }
        drop(rx);
        drop(ctx);
    });
    let t0 = Instant::now();
    let e = within(Duration::from_secs(30), move || run.join().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no peer took the stream"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}
