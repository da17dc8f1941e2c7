//! Growing a queue keeps every unread and reserved item, and readers follow.

use dmaflow::ring::{Builder, Wait, channel};

#[test]
fn grow_keeps_unread_items_across_the_wrap() {
    let (mut w, mut r) = channel::<u32>(1024).unwrap();
    let cap = w.capacity();
    // Move the cursors off zero so the unread run wraps around the old end.
    let s = w.reserve(cap - 10).unwrap();
    s.fill(0);
    w.commit(cap - 10).unwrap();
    r.consume(cap - 10).unwrap();
    let s = w.reserve(cap).unwrap();
    for (i, x) in s.iter_mut().enumerate() {
        *x = i as u32;
    }
    w.commit(cap - 5).unwrap(); // 5 stay reserved
    w.grow(3 * cap).unwrap();
    assert!(w.capacity() >= 3 * cap);
    // The 5 reserved slots survive the move; write the rest after them.
    let s = w.reserve(5 + cap).unwrap();
    assert_eq!(
        &s[..5],
        &[
            (cap - 5) as u32,
            (cap - 4) as u32,
            (cap - 3) as u32,
            (cap - 2) as u32,
            (cap - 1) as u32
        ]
    );
    for (i, x) in s[5..].iter_mut().enumerate() {
        *x = (cap + i) as u32;
    }
    w.commit(5 + cap).unwrap();
    // A threshold beyond the old capacity is now fine, and every item is in order.
    let all = r.peek(2 * cap).unwrap();
    assert_eq!(all.len(), 2 * cap);
    assert!(all.iter().enumerate().all(|(i, &x)| x == i as u32));
    assert_eq!(r.capacity(), w.capacity());
}

#[test]
fn grow_to_a_smaller_size_does_nothing() {
    let (mut w, _r) = channel::<u8>(8192).unwrap();
    let cap = w.capacity();
    w.grow(10).unwrap();
    assert_eq!(w.capacity(), cap);
}

#[test]
fn readers_follow_growth_while_running() {
    // Spinning waiters get one core each; sleeping ones may share.
    for (wait, extra_readers) in [(Wait::Spin, 0), (Wait::Block, 2)] {
        let (mut w, r) = Builder::<u64>::new(1024).wait(wait).build().unwrap();
        let mut readers = vec![r];
        for _ in 0..extra_readers {
            readers.push(w.add_reader());
        }
        let total = 3_000_000u64;
        std::thread::scope(|s| {
            for mut r in readers.drain(..) {
                s.spawn(move || {
                    let mut expect = 0u64;
                    let mut t = 1;
                    loop {
                        // Threshold plus batch never exceeds the capacity, so no wait can be
                        // circular (that is the process network's job).
                        let v = r.peek(t.min(r.capacity() / 2)).unwrap();
                        if v.is_empty() {
                            break;
                        }
                        for &x in v {
                            assert_eq!(x, expect);
                            expect += 1;
                        }
                        let n = v.len();
                        r.consume(n).unwrap();
                        t = (t * 3 + 1) % 5000 + 1;
                    }
                    assert_eq!(expect, total);
                });
            }
            let mut next = 0u64;
            let mut round = 0usize;
            while next < total {
                let n = (round % 500 + 1).min((total - next) as usize);
                let slots = w.reserve(n).unwrap();
                for (i, x) in slots.iter_mut().enumerate() {
                    *x = next + i as u64;
                }
                w.commit(n).unwrap();
                next += n as u64;
                round += 1;
                if round.is_multiple_of(2_000) && w.capacity() < 1 << 16 {
                    let c = w.capacity();
                    w.grow(2 * c).unwrap();
                }
            }
            assert!(
                w.capacity() >= 1 << 14,
                "the test should have grown the queue"
            );
            drop(w);
        });
    }
}
