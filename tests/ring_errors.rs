//! Every bad input gets its error, never a stall or a panic.

use std::time::{Duration, Instant};

use dmaflow::ring::{Builder, Error, Wait, channel};

#[test]
fn reserve_beyond_capacity() {
    let (mut w, _r) = channel::<u32>(1000).unwrap();
    let cap = w.capacity();
    match w.reserve(cap + 1) {
        Err(Error::ReserveTooLarge {
            requested,
            capacity,
        }) => assert_eq!((requested, capacity), (cap + 1, cap)),
        other => panic!("expected ReserveTooLarge, got {:?}", other.map(|s| s.len())),
    }
    assert!(matches!(
        w.try_reserve(cap + 1),
        Err(Error::ReserveTooLarge { .. })
    ));
    // The whole capacity is fine.
    assert_eq!(w.reserve(cap).unwrap().len(), cap);
}

#[test]
fn threshold_beyond_capacity() {
    let (_w, mut r) = channel::<u64>(10).unwrap();
    let cap = r.capacity();
    let e = r.peek(cap + 1).unwrap_err();
    assert!(
        matches!(e, Error::ThresholdTooLarge { threshold, capacity } if threshold == cap + 1 && capacity == cap)
    );
    assert!(e.to_string().contains("threshold"));
    assert!(matches!(
        r.try_peek(cap + 1),
        Err(Error::ThresholdTooLarge { .. })
    ));
}

#[test]
fn commit_beyond_reservation() {
    let (mut w, mut r) = channel::<u8>(10).unwrap();
    assert!(matches!(
        w.commit(1),
        Err(Error::CommitTooLarge {
            requested: 1,
            reserved: 0
        })
    ));
    w.reserve(4).unwrap().copy_from_slice(b"abcd");
    w.commit(3).unwrap();
    assert!(matches!(
        w.commit(2),
        Err(Error::CommitTooLarge {
            requested: 2,
            reserved: 1
        })
    ));
    w.commit(1).unwrap();
    assert_eq!(r.peek(4).unwrap(), b"abcd");
}

#[test]
fn consume_beyond_readable() {
    let (mut w, mut r) = channel::<u8>(10).unwrap();
    w.reserve(2).unwrap().copy_from_slice(b"xy");
    w.commit(2).unwrap();
    let e = r.consume(3).unwrap_err();
    assert!(matches!(
        e,
        Error::ConsumeTooLarge {
            requested: 3,
            available: 2
        }
    ));
    r.consume(2).unwrap();
    assert!(matches!(
        r.consume(1),
        Err(Error::ConsumeTooLarge {
            requested: 1,
            available: 0
        })
    ));
}

#[test]
fn writer_waiting_on_full_queue_sees_readers_leave() {
    for wait in [Wait::Spin, Wait::Yield, Wait::Block] {
        let (mut w, r) = Builder::<u32>::new(1024).wait(wait).build().unwrap();
        let r2 = w.add_reader();
        let cap = w.capacity();
        w.reserve(cap).unwrap();
        w.commit(cap).unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(r);
            std::thread::sleep(Duration::from_millis(20));
            drop(r2);
        });
        let e = w.reserve(1).unwrap_err();
        assert!(matches!(e, Error::Closed), "{wait:?}: {e}");
        assert!(w.is_closed());
        t.join().unwrap();
        assert!(matches!(w.reserve(cap), Err(Error::Closed)));
    }
}

#[test]
fn reader_gets_the_rest_after_the_writer_leaves() {
    for wait in [Wait::Spin, Wait::Yield, Wait::Block] {
        let (mut w, mut r) = Builder::<u16>::new(100).wait(wait).build().unwrap();
        w.reserve(3).unwrap().copy_from_slice(&[1, 2, 3]);
        w.commit(3).unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(w);
        });
        // Waits for 10 items, but the writer leaves after 3: the 3 come back.
        assert_eq!(r.peek(10).unwrap(), &[1, 2, 3]);
        t.join().unwrap();
        r.consume(3).unwrap();
        assert!(r.peek(10).unwrap().is_empty());
        assert_eq!(r.try_peek(10).unwrap(), Some(&[][..]));
    }
}

#[test]
fn non_blocking_calls_do_not_block() {
    let (mut w, mut r) = channel::<u32>(1).unwrap();
    let cap = w.capacity();
    assert_eq!(r.try_peek(1).unwrap(), None);
    w.try_reserve(cap).unwrap().unwrap();
    w.commit(cap).unwrap();
    assert!(w.try_reserve(1).unwrap().is_none());
    assert_eq!(r.try_peek(cap).unwrap().unwrap().len(), cap);
}

#[test]
fn zero_sized_items_are_refused() {
    assert!(matches!(channel::<()>(10), Err(Error::ZeroSizedItem)));
}

#[test]
fn impossible_sizes_report_the_size() {
    match channel::<u64>(usize::MAX / 4) {
        Err(Error::CapacityOverflow { .. }) => {}
        other => panic!("expected CapacityOverflow, got {:?}", other.err()),
    }
    // Fits a usize but not the address space (47 bits of user space on x86-64).
    match channel::<u8>(1 << 50) {
        Err(e @ Error::Map { .. }) => {
            // The queue's size, or the reservation for its two copies and the
            // pages mapped a third time after them.
            let msg = e.to_string();
            let sizes = msg
                .split_whitespace()
                .filter_map(|w| w.parse::<usize>().ok());
            let named = sizes.collect::<Vec<_>>();
            assert!(
                named
                    .iter()
                    .any(|&b| b == 1 << 50 || (2 << 50..=(2 << 50) + (1 << 20)).contains(&b)),
                "{msg}"
            );
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a 2^50-byte queue should not be possible"),
    }
}

#[test]
fn add_reader_sees_only_later_items() {
    let (mut w, mut r1) = channel::<u8>(16).unwrap();
    w.reserve(2).unwrap().copy_from_slice(b"ab");
    w.commit(2).unwrap();
    let mut r2 = w.add_reader();
    w.reserve(1).unwrap().copy_from_slice(b"c");
    w.commit(1).unwrap();
    assert_eq!(r1.peek(3).unwrap(), b"abc");
    assert_eq!(r2.peek(1).unwrap(), b"c");
}

#[test]
fn blocked_reader_costs_no_cpu() {
    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write into.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0);
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
    let (mut w, mut r) = Builder::<u32>::new(16).wait(Wait::Block).build().unwrap();
    let t = std::thread::spawn(move || {
        let (c0, t0) = (thread_cpu(), Instant::now());
        let s = r.peek(1).unwrap();
        assert_eq!(s, &[42]);
        (thread_cpu() - c0, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    w.reserve(1).unwrap()[0] = 42;
    w.commit(1).unwrap();
    let (cpu, wall) = t.join().unwrap();
    assert!(wall >= Duration::from_millis(250), "woke early: {wall:?}");
    // A spinning waiter would burn about as much CPU as wall time.
    assert!(cpu < wall / 5, "used {cpu:?} of CPU in {wall:?} asleep");
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
    match Builder::<Aligned>::new(4).build() {
        Err(Error::ItemAlignment { align, page }) => {
            assert_eq!(align, 65536);
            assert!(page < align, "page {page}");
        }
        Err(e) => panic!("expected the alignment refused, got {e}"),
        Ok(_) => panic!("expected the alignment refused, got a queue"),
    }
    assert!(matches!(
        channel::<Aligned>(4),
        Err(Error::ItemAlignment { .. })
    ));
    // Page-aligned items are queued, every slot aligned.
    #[derive(Clone, Copy)]
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    // SAFETY: as for `Aligned`.
    unsafe impl bytemuck::Zeroable for Page {}
    // SAFETY: as for `Aligned`.
    unsafe impl bytemuck::Pod for Page {}
    let (mut w, mut r) = Builder::<Page>::new(4).wait(Wait::Spin).build().unwrap();
    for _ in 0..8 {
        let s = w.reserve(3).unwrap();
        assert_eq!(s.as_ptr() as usize % 4096, 0);
        w.commit(3).unwrap();
        let s = r.peek(3).unwrap();
        assert_eq!(s.as_ptr() as usize % 4096, 0);
        r.consume(3).unwrap();
    }
}
