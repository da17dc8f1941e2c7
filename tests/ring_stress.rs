//! Two-thread stress: tens of millions of sequence-numbered items through the queue
//! in every wait mode, with 1 and 3 readers and reservations of every size up to half
//! the queue, so that they straddle the wrap point. Nothing may be lost, duplicated
//! or reordered.

use dmaflow::ring::{Builder, Reader, Wait};

mod common;
use common::Rng;

fn check_reader(mut r: Reader<u64>, total: u64, seed: u64) -> u64 {
    let mut rng = Rng(seed);
    let cap = r.capacity();
    let mut expect = 0u64;
    loop {
        let threshold = 1 + rng.below(cap / 2);
        let s = r.peek(threshold).unwrap();
        if s.is_empty() {
            break;
        }
        let short = s.len() < threshold;
        let take = 1 + rng.below(s.len());
        for (i, &x) in s[..take].iter().enumerate() {
            assert_eq!(x, expect + i as u64, "item out of sequence");
        }
        assert!(
            !short || r.is_writer_closed(),
            "peek returned short of its threshold"
        );
        expect += take as u64;
        r.consume(take).unwrap();
    }
    assert_eq!(expect, total, "items lost");
    expect
}

fn stress(wait: Wait, readers: usize, total: u64) {
    let (mut w, r) = Builder::<u64>::new(1 << 14).wait(wait).build().unwrap();
    let mut all = vec![r];
    for _ in 1..readers {
        all.push(w.add_reader());
    }
    let cap = w.capacity();
    std::thread::scope(|s| {
        let handles: Vec<_> = all
            .into_iter()
            .enumerate()
            .map(|(i, r)| s.spawn(move || check_reader(r, total, 0x9E37_79B9 + i as u64)))
            .collect();
        let mut rng = Rng(0xDEAD_BEEF);
        let mut next = 0u64;
        while next < total {
            let n = (1 + rng.below(cap / 2)).min((total - next) as usize);
            let slots = w.reserve(n).unwrap();
            for (i, x) in slots.iter_mut().enumerate() {
                *x = next + i as u64;
            }
            // Sometimes publish in two steps.
            let first = rng.below(n + 1);
            w.commit(first).unwrap();
            w.commit(n - first).unwrap();
            next += n as u64;
        }
        drop(w);
        for h in handles {
            assert_eq!(h.join().unwrap(), total);
        }
    });
}

const ITEMS: u64 = 20_000_000;

#[test]
fn spin_one_reader() {
    stress(Wait::Spin, 1, ITEMS);
}

#[test]
fn spin_three_readers() {
    stress(Wait::Spin, 3, ITEMS);
}

#[test]
fn yield_one_reader() {
    stress(Wait::Yield, 1, ITEMS);
}

#[test]
fn yield_three_readers() {
    stress(Wait::Yield, 3, ITEMS);
}

#[test]
fn block_one_reader() {
    stress(Wait::Block, 1, ITEMS);
}

#[test]
fn block_three_readers() {
    stress(Wait::Block, 3, ITEMS);
}

#[test]
fn small_batches_many_wakeups() {
    // Tiny reservations in block mode: every commit may have to wake a sleeper.
    let (mut w, mut r) = Builder::<u64>::new(512).wait(Wait::Block).build().unwrap();
    let total = 2_000_000u64;
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut expect = 0;
            loop {
                let v = r.peek(1).unwrap();
                if v.is_empty() {
                    break;
                }
                let n = v.len();
                for &x in v {
                    assert_eq!(x, expect);
                    expect += 1;
                }
                r.consume(n).unwrap();
            }
            assert_eq!(expect, total);
        });
        for i in 0..total {
            w.reserve(1).unwrap()[0] = i;
            w.commit(1).unwrap();
        }
        drop(w);
    });
}
