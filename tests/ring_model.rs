//! Model-based property tests: random sequences of queue operations against a
//! `VecDeque` per reader.

use std::collections::VecDeque;

use dmaflow::ring::{Error, Reader, channel};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    TryReserve(usize),
    Commit(usize),
    TryPeek(usize, usize),
    Consume(usize, usize),
    AddReader,
    DropReader(usize),
    DropWriter,
    Grow(usize),
}

fn op(cap: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..cap + cap / 2).prop_map(Op::TryReserve),
        4 => (0..cap + 8).prop_map(Op::Commit),
        4 => (0..4usize, 0..cap + cap / 2).prop_map(|(r, t)| Op::TryPeek(r, t)),
        4 => (0..4usize, 0..cap + 8).prop_map(|(r, m)| Op::Consume(r, m)),
        1 => Just(Op::AddReader),
        1 => (0..4usize).prop_map(Op::DropReader),
        1 => Just(Op::DropWriter),
        1 => (0..3usize).prop_map(Op::Grow),
    ]
}

struct ModelReader {
    real: Reader<u32>,
    items: VecDeque<u32>,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn queue_matches_model(min_items in 1usize..3000, ops in prop::collection::vec(op(4096), 1..120)) {
        let (w, r) = channel::<u32>(min_items).unwrap();
        let mut cap = w.capacity();
        prop_assert!(cap >= min_items);
        prop_assert_eq!((cap * 4) % 4096, 0, "capacity is whole pages");
        let mut writer = Some(w);
        let mut readers = vec![ModelReader { real: r, items: VecDeque::new() }];
        let mut pending: Vec<u32> = Vec::new(); // values in the reserved slots
        let mut next = 0u32;
        for op in ops {
            match op {
                Op::TryReserve(n) => {
                    let Some(w) = writer.as_mut() else { continue };
                    let longest = readers.iter().map(|r| r.items.len()).max();
                    match (w.try_reserve(n), longest) {
                        (Err(Error::ReserveTooLarge { requested, capacity }), _) => {
                            prop_assert!(n > cap);
                            prop_assert_eq!((requested, capacity), (n, cap));
                        }
                        (Err(Error::Closed), None) => prop_assert!(n <= cap),
                        (Ok(None), Some(len)) => prop_assert!(cap - len < n),
                        (Ok(Some(s)), longest) => {
                            prop_assert!(n <= cap - longest.unwrap_or(0));
                            prop_assert_eq!(s.len(), n);
                            pending.clear();
                            for x in s.iter_mut() {
                                *x = next;
                                pending.push(next);
                                next = next.wrapping_add(1);
                            }
                        }
                        (other, longest) => prop_assert!(false, "try_reserve({}) gave {:?} with longest {:?}", n, other.map(|o| o.map(|s| s.len())), longest),
                    }
                }
                Op::Commit(k) => {
                    let Some(w) = writer.as_mut() else { continue };
                    match w.commit(k) {
                        Ok(()) => {
                            prop_assert!(k <= pending.len());
                            for r in &mut readers {
                                r.items.extend(&pending[..k]);
                            }
                            pending.drain(..k);
                        }
                        Err(Error::CommitTooLarge { requested, reserved }) => {
                            prop_assert!(k > pending.len());
                            prop_assert_eq!((requested, reserved), (k, pending.len()));
                        }
                        Err(e) => prop_assert!(false, "commit: {}", e),
                    }
                }
                Op::TryPeek(i, t) => {
                    let Some(r) = readers.get_mut(i) else { continue };
                    let open = writer.is_some();
                    match r.real.try_peek(t) {
                        Err(Error::ThresholdTooLarge { threshold, capacity }) => {
                            prop_assert!(t > cap);
                            prop_assert_eq!((threshold, capacity), (t, cap));
                        }
                        Ok(None) => prop_assert!(open && r.items.len() < t),
                        Ok(Some(s)) => {
                            prop_assert!(t <= cap);
                            prop_assert!(!open || r.items.len() >= t);
                            // A prefix of what is readable, never short of the threshold.
                            prop_assert!(s.len() >= t.min(r.items.len()));
                            prop_assert!(s.iter().eq(r.items.iter().take(s.len())));
                            prop_assert!(!s.is_empty() || r.items.is_empty());
                        }
                        Err(e) => prop_assert!(false, "try_peek: {}", e),
                    }
                }
                Op::Consume(i, m) => {
                    let Some(r) = readers.get_mut(i) else { continue };
                    match r.real.consume(m) {
                        Ok(()) => {
                            prop_assert!(m <= r.items.len());
                            r.items.drain(..m);
                        }
                        Err(Error::ConsumeTooLarge { requested, available }) => {
                            prop_assert!(m > r.items.len());
                            prop_assert_eq!((requested, available), (m, r.items.len()));
                        }
                        Err(e) => prop_assert!(false, "consume: {}", e),
                    }
                }
                Op::AddReader => {
                    if let Some(w) = writer.as_mut() {
                        readers.push(ModelReader { real: w.add_reader(), items: VecDeque::new() });
                    }
                }
                Op::DropReader(i) => {
                    if i < readers.len() {
                        readers.remove(i);
                    }
                }
                Op::DropWriter => {
                    writer = None;
                }
                Op::Grow(k) => {
                    let Some(w) = writer.as_mut() else { continue };
                    let want = cap * k + 1;
                    w.grow(want).unwrap();
                    prop_assert!(w.capacity() >= want.max(cap));
                    cap = w.capacity();
                }
            }
        }
        if let Some(w) = writer.as_ref() {
            prop_assert_eq!(w.is_closed(), readers.is_empty());
        }
        // Whatever the model holds is what each reader still sees.
        drop(writer);
        for r in &mut readers {
            let mut rest = Vec::new();
            loop {
                let s = r.real.peek(1).unwrap();
                if s.is_empty() {
                    break;
                }
                rest.extend_from_slice(s);
                let n = s.len();
                r.real.consume(n).unwrap();
            }
            prop_assert!(rest.iter().eq(r.items.iter()));
            prop_assert!(r.real.is_writer_closed());
        }
    }
}
