//! Network edges between graphs, and between a graph and a plain ZeroMQ peer
//! standing in for GNU Radio (raw items, no end of stream).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dmaflow::graph::Graph;
use dmaflow_net::tags::{Header, Pmt, Tag};
use dmaflow_net::{Edge, Endpoint, Error, Pattern, Relay, Vanish, add_sink, add_source};

fn ipc(dir: &tempfile::TempDir, name: &str) -> Endpoint {
    Endpoint::parse(&format!("ipc://{}", dir.path().join(name).display())).unwrap()
}

/// A graph that receives `u32`s at `edge` and returns them with the graph's
/// result.
fn receive(edge: Edge) -> Result<(Vec<u32>, dmaflow_net::Stats), String> {
    let mut g = Graph::new();
    let (out, mut inp) = g
        .connect_with_capacity::<u32>(("net", "out"), ("check", "in"), 4096)
        .unwrap();
    let stats = add_source(&mut g, "net", edge, out).map_err(|e| e.to_string())?;
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    g.node("check", move || {
        loop {
            let s = inp.peek(1)?;
            if s.is_empty() {
                return Ok(());
            }
            keep.lock().unwrap().extend_from_slice(s);
            let n = s.len();
            // A slow reader: the sender meets back-pressure.
            if n > 3000 {
                std::thread::sleep(Duration::from_millis(1));
            }
            inp.consume(n)?;
        }
    })
    .unwrap();
    let r = g.run().map_err(|e| e.to_string());
    let stats = Arc::try_unwrap(stats).unwrap();
    r.map(|()| (std::mem::take(&mut *got.lock().unwrap()), stats))
}

/// A graph that sends `0..n` as `u32`s at `edge`.
fn send(edge: Edge, n: u32) -> std::thread::JoinHandle<Result<(), String>> {
    let mut g = Graph::new();
    let (mut out, inp) = g
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), 1000)
        .unwrap();
    add_sink(&mut g, "net", edge, inp).unwrap();
    g.node("count", move || {
        let mut i = 0;
        while i < n {
            let s = out.reserve(777.min((n - i) as usize))?;
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
    std::thread::spawn(move || g.run().map_err(|e| e.to_string()))
}

#[test]
fn push_pull_between_graphs_is_lossless_ordered_and_ends_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "a");
    let mut sink = Edge::sink(at.clone());
    sink.high_water_mark = 2;
    sink.max_items = 1000;
    let sender = send(sink, 1_000_000);
    let received = receive(Edge::source(at));
    sender.join().unwrap().unwrap();
    let (got, stats) = received.unwrap();
    assert_eq!(got.len(), 1_000_000);
    assert!(got.iter().enumerate().all(|(i, &x)| x == i as u32));
    assert_eq!(stats.snapshot().1, 1_000_000);
    assert!(stats.snapshot().0 >= 1000, "{:?}", stats.snapshot());
}

#[test]
fn the_source_may_bind_and_the_sink_connect_over_tcp() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let at = Endpoint::parse(&format!("tcp://127.0.0.1:{port}")).unwrap();
    let mut source = Edge::source(at.clone());
    source.bind = true;
    let mut sink = Edge::sink(at);
    sink.bind = false;
    let receiver = std::thread::spawn(move || receive(source));
    std::thread::sleep(Duration::from_millis(50));
    send(sink, 100_000).join().unwrap().unwrap();
    let (got, _) = receiver.join().unwrap().unwrap();
    assert_eq!(got, (0..100_000).collect::<Vec<u32>>());
}

/// A plain PUSH peer, as GNU Radio's push_sink is: raw bytes, no end.
fn raw_push(at: &Endpoint) -> (zmq::Context, zmq::Socket) {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::PUSH).unwrap();
    s.bind(at.as_str()).unwrap();
    (ctx, s)
}

fn bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn items_split_across_messages_join_and_an_idle_source_ends() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "gr");
    let (_ctx, push) = raw_push(&at);
    let mut edge = Edge::source(at);
    edge.idle_timeout = Some(Duration::from_millis(300));
    let receiver = std::thread::spawn(move || receive(edge));
    // 10 items cut at odd bytes, as a sender with any message size may.
    let all = bytes(&(0..10).collect::<Vec<u32>>());
    for part in [&all[..3], &all[3..17], &all[17..40]] {
        push.send(part, 0).unwrap();
    }
    let started = Instant::now();
    let (got, _) = receiver.join().unwrap().unwrap();
    assert_eq!(got, (0..10).collect::<Vec<u32>>());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_stream_that_ends_inside_an_item_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "cut");
    let (_ctx, push) = raw_push(&at);
    let mut edge = Edge::source(at);
    edge.idle_timeout = Some(Duration::from_millis(200));
    let receiver = std::thread::spawn(move || receive(edge));
    push.send(&[1u8, 0, 0, 0, 2, 0][..], 0).unwrap();
    let e = receiver.join().unwrap().unwrap_err();
    assert!(e.contains("2 bytes into a 4-byte item"), "{e}");
}

#[test]
fn a_vanished_peer_fails_or_ends_as_configured_and_a_restarted_one_reconnects() {
    let dir = tempfile::tempdir().unwrap();
    for vanish in [Vanish::Fail, Vanish::End] {
        let at = ipc(&dir, &format!("v{vanish:?}"));
        let mut edge = Edge::source(at.clone());
        edge.vanish = vanish;
        edge.grace = Duration::from_millis(300);
        let (ctx, push) = raw_push(&at);
        let receiver = std::thread::spawn(move || receive(edge));
        push.send(bytes(&[1, 2, 3]), 0).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // The peer process goes away.
        push.set_linger(0).unwrap();
        drop(push);
        drop(ctx);
        let r = receiver.join().unwrap();
        match vanish {
            Vanish::Fail => {
                let e = r.unwrap_err();
                assert!(e.contains("went away mid-stream after 3 items"), "{e}");
            }
            Vanish::End => assert_eq!(r.unwrap().0, vec![1, 2, 3]),
        }
    }
    // A peer back within the grace period carries on the stream.
    let at = ipc(&dir, "back");
    let mut edge = Edge::source(at.clone());
    edge.grace = Duration::from_secs(5);
    edge.idle_timeout = Some(Duration::from_secs(5));
    let (ctx, push) = raw_push(&at);
    let receiver = std::thread::spawn(move || receive(edge));
    push.send(bytes(&[1, 2]), 0).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    push.set_linger(0).unwrap();
    drop(push);
    drop(ctx);
    std::thread::sleep(Duration::from_millis(200));
    let (_ctx, push) = raw_push(&at);
    push.send(bytes(&[3, 4]), 0).unwrap();
    push.send(Vec::<u8>::new(), 0).unwrap(); // end of stream
    assert_eq!(receiver.join().unwrap().unwrap().0, vec![1, 2, 3, 4]);
}

/// A tagged message of `items` at `offset` with `tags`.
fn tagged(offset: u64, items: &[u32], tags: Vec<Tag>) -> Vec<u8> {
    let mut m = Vec::new();
    Header { offset, tags }.write(&mut m);
    m.extend(bytes(items));
    m
}

#[test]
fn offsets_from_a_peer_are_checked_and_the_error_names_it() {
    let tag = |offset| Tag {
        offset,
        key: Pmt::Symbol("k".into()),
        value: Pmt::True,
        srcid: Pmt::False,
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // The message's items run past the counter's end (a wrap).
        (
            "wrap",
            tagged(u64::MAX - 1, &[1, 2, 3], vec![]),
            "past the end",
        ),
        // A tag far in the future (never drained) or before the message.
        (
            "future",
            tagged(10, &[1, 2], vec![tag(1 << 60)]),
            "outside its message",
        ),
        (
            "past",
            tagged(10, &[1, 2], vec![tag(3)]),
            "outside its message",
        ),
        // A count of tags no message carries.
        (
            "count",
            {
                let mut m = tagged(0, &[], vec![]);
                m[11..19].copy_from_slice(&u64::MAX.to_le_bytes());
                m
            },
            "tags",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, msg, says) in cases {
        let at = ipc(&dir, name);
        let (_ctx, push) = raw_push(&at);
        let mut edge = Edge::source(at.clone());
        edge.pass_tags = true;
        edge.idle_timeout = Some(Duration::from_millis(300));
        let receiver = std::thread::spawn(move || receive(edge));
        push.send(msg, 0).unwrap();
        let e = receiver.join().unwrap().unwrap_err();
        assert!(e.contains(says) && e.contains(at.as_str()), "{name}: {e}");
    }
}

#[test]
fn tag_headers_are_read_and_written_and_sub_counts_what_it_lost() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "tags");
    let ctx = zmq::Context::new();
    let publisher = ctx.socket(zmq::PUB).unwrap();
    publisher.bind(at.as_str()).unwrap();
    let mut edge = Edge::source(at);
    edge.pattern = Pattern::PubSub;
    edge.pass_tags = true;
    edge.idle_timeout = Some(Duration::from_millis(500));
    let receiver = std::thread::spawn(move || receive(edge));
    std::thread::sleep(Duration::from_millis(200)); // SUB joins late: PUB drops
    let msg = |offset: u64, items: &[u32], tags: Vec<Tag>| {
        let mut m = Vec::new();
        Header { offset, tags }.write(&mut m);
        m.extend(bytes(items));
        m
    };
    let tag = Tag {
        offset: 5,
        key: Pmt::Symbol("burst".into()),
        value: Pmt::True,
        srcid: Pmt::False,
    };
    publisher.send(msg(4, &[4, 5], vec![tag]), 0).unwrap();
    // Items 6..10 never reach this subscriber (as if dropped at the HWM).
    publisher.send(msg(10, &[10, 11], vec![]), 0).unwrap();
    let (got, stats) = receiver.join().unwrap().unwrap();
    assert_eq!(got, vec![4, 5, 10, 11]);
    let (_, _, dropped, tags) = stats.snapshot();
    assert_eq!((dropped, tags), (4, 1));
}

#[test]
fn a_sink_with_tags_writes_gr_zeromq_headers() {
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "hdr");
    let ctx = zmq::Context::new();
    let pull = ctx.socket(zmq::PULL).unwrap();
    let mut sink = Edge::sink(at.clone());
    sink.pass_tags = true;
    sink.max_items = 600;
    let sender = send(sink, 1000);
    pull.connect(at.as_str()).unwrap();
    let mut next = 0u64;
    loop {
        let m = pull.recv_bytes(0).unwrap();
        let (h, items) = Header::parse(&m).unwrap();
        assert_eq!(h.offset, next);
        if items.is_empty() {
            break;
        }
        next += (items.len() / 4) as u64;
    }
    assert_eq!(next, 1000);
    // The reader closes its end after the end of stream, as dmaflow's does.
    drop(pull);
    sender.join().unwrap().unwrap();
}

#[test]
fn tags_received_go_back_out_at_the_same_items_past_the_nodes_between() {
    // A GNU Radio-shaped peer: a PUSH that sends tagged messages (no end of
    // stream) and a PULL that reads the graph's output with its headers.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (ipc(&dir, "in"), ipc(&dir, "out"));
    let ctx = zmq::Context::new();
    let push = ctx.socket(zmq::PUSH).unwrap();
    push.bind(a.as_str()).unwrap();
    let relay = Relay::new();
    let mut src = Edge::source(a);
    src.pass_tags = true;
    src.idle_timeout = Some(Duration::from_millis(400));
    src.relay = Some(relay.clone());
    let mut snk = Edge::sink(b.clone());
    snk.pass_tags = true;
    snk.max_items = 300;
    snk.send_eos = false;
    snk.grace = Duration::from_millis(200);
    snk.relay = Some(relay);
    let mut g = Graph::new();
    let (s_out, mut d_in) = g
        .connect_with_capacity::<u32>(("source", "out"), ("double", "in"), 256)
        .unwrap();
    let (mut d_out, k_in) = g
        .connect_with_capacity::<u32>(("double", "out"), ("sink", "in"), 256)
        .unwrap();
    let received = add_source(&mut g, "source", src, s_out).unwrap();
    let sent = add_sink(&mut g, "sink", snk, k_in).unwrap();
    // A node that knows nothing of tags, in uneven batches.
    g.node("double", move || {
        loop {
            let s = d_in.peek(1)?;
            if s.is_empty() {
                return Ok(());
            }
            let n = s.len().min(77);
            let doubled: Vec<u32> = s[..n].iter().map(|x| 2 * x).collect();
            d_in.consume(n)?;
            d_out.write(&doubled)?;
        }
    })
    .unwrap();
    let graph = std::thread::spawn(move || g.run().map_err(|e| e.to_string()));
    let key = |k: &str| Pmt::Symbol(k.into());
    let tag = |offset: u64, k: &str| Tag {
        offset,
        key: key(k),
        value: Pmt::Long(offset as i64),
        srcid: Pmt::Symbol("gr".into()),
    };
    // The sender's stream starts at offset 5000 (it sent earlier to someone
    // else): the receiving end places tags by its own count of items.
    let mut next = 0u32;
    for (len, tags) in [
        (400u32, vec![tag(5000, "first"), tag(5399, "edge")]),
        (100, vec![]),
        (700, vec![tag(5500 + 650, "late"), tag(5500 + 3, "early")]),
    ] {
        let mut m = Vec::new();
        Header {
            offset: 5000 + next as u64,
            tags,
        }
        .write(&mut m);
        m.extend(bytes(&(next..next + len).collect::<Vec<_>>()));
        push.send(m, 0).unwrap();
        next += len;
    }
    let pull = ctx.socket(zmq::PULL).unwrap();
    pull.connect(b.as_str()).unwrap();
    pull.set_rcvtimeo(5000).unwrap();
    let (mut items, mut tags) = (Vec::new(), Vec::new());
    while items.len() < 1200 {
        let m = pull.recv_bytes(0).unwrap();
        let (h, body) = Header::parse(&m).unwrap();
        assert_eq!(h.offset, items.len() as u64);
        for t in &h.tags {
            let local = t.offset - h.offset;
            assert!(local < (body.len() / 4) as u64, "{t} outside its message");
        }
        tags.extend(h.tags);
        items.extend(
            body.chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap())),
        );
    }
    graph.join().unwrap().unwrap();
    assert_eq!(items, (0..1200).map(|x| 2 * x).collect::<Vec<_>>());
    let placed: Vec<(u64, String)> = tags.iter().map(|t| (t.offset, t.key.to_string())).collect();
    let want = [(0, "first"), (399, "edge"), (503, "early"), (1150, "late")];
    assert_eq!(placed, want.map(|(o, k)| (o, k.to_string())).to_vec());
    // Values and source ids cross unchanged.
    assert_eq!(tags[3].value, Pmt::Long(6150));
    assert_eq!(tags[3].srcid, key("gr"));
    assert_eq!(received.snapshot().3, 4);
    assert_eq!(sent.snapshot().3, 4);
    assert_eq!(received.tags_seen()[1].to_string(), "edge=5399@399");
}

#[test]
fn bad_endpoints_and_a_port_in_use_are_named_before_running() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let mut g = Graph::new();
    let (out, _inp) = g.connect::<u32>(("a", "out"), ("b", "in")).unwrap();
    let at = Endpoint::parse(&format!("tcp://127.0.0.1:{port}")).unwrap();
    let mut edge = Edge::source(at);
    edge.bind = true;
    let e = add_source(&mut g, "a", edge, out).unwrap_err();
    assert!(e.is_bad_input());
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("bind tcp://127.0.0.1:{port}")) && text.contains("in use"),
        "{text}"
    );
    assert!(matches!(
        Endpoint::parse("tcp//x:1"),
        Err(Error::BadEndpoint { .. })
    ));
}

#[test]
fn network_edges_run_beside_task_nodes() {
    // The edges' nodes wait on sockets, so they are thread nodes; the nodes
    // beside them here are tasks on the graphs' worker pools.
    let dir = tempfile::tempdir().unwrap();
    let at = ipc(&dir, "tasks");
    let mut tx = Graph::new();
    let (mut out, inp) = tx
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), 1000)
        .unwrap();
    add_sink(&mut tx, "net", Edge::sink(at.clone()), inp).unwrap();
    tx.task("count", async move {
        let all: Vec<u32> = (0..200_000).collect();
        out.write_async(&all).await?;
        Ok(())
    })
    .unwrap();
    let sender = std::thread::spawn(move || tx.run().map_err(|e| e.to_string()));
    let mut rx = Graph::new();
    let (out, mut inp) = rx
        .connect_with_capacity::<u32>(("net", "out"), ("check", "in"), 4096)
        .unwrap();
    add_source(&mut rx, "net", Edge::source(at), out).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    rx.task("check", async move {
        loop {
            let s = inp.peek_async(1).await?;
            if s.is_empty() {
                return Ok(());
            }
            keep.lock().unwrap().extend_from_slice(s);
            let n = s.len();
            inp.consume(n)?;
        }
    })
    .unwrap();
    // Both graphs on threads, each waited for with a bound.
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(rx.run().map_err(|e| e.to_string()));
    });
    let bound = Duration::from_secs(20);
    ended
        .recv_timeout(bound)
        .expect("the receiving graph hangs")
        .unwrap();
    let start = Instant::now();
    while !sender.is_finished() {
        assert!(start.elapsed() < bound, "the sending graph hangs");
        std::thread::sleep(Duration::from_millis(5));
    }
    sender.join().unwrap().unwrap();
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 200_000);
    assert!(got.iter().enumerate().all(|(i, &x)| x == i as u32));
}
