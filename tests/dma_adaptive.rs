//! Adaptive completion: correct data in every mode, direct and scatter-gather,
//! and what a wait costs on the interrupt line, counted on the emulated
//! board's lines (each enable is a `write()` on a UIO board, each wait a
//! `poll()` and a `read()`).

use dmaflow::axi::Channel;
use dmaflow::dma::{Completion, Link, PacketRing};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::sim::LineOps;
use dmaflow::rig::{Rig, SimEngine};
use dmaflow::sim::{Clock, Loopback};

/// 100 MHz x 1 byte (paper 000's fabric): 64 KiB take 655 us on the link,
/// far beyond any spin, so an adaptive wait sleeps.
const SLOW: Clock = Clock::Rate {
    mhz: 100.0,
    bytes_per_cycle: 1.0,
};

fn rig(clock: Clock, sg: bool) -> Rig {
    Rig::new(
        8 << 20,
        clock,
        sg,
        CachePolicy::Explicit,
        Box::new(Loopback),
    )
    .unwrap()
}

fn ops(e: &SimEngine) -> [LineOps; 2] {
    [
        e.irq(Channel::Mm2s).operations(),
        e.irq(Channel::S2mm).operations(),
    ]
}

fn pattern(seq: usize, p: &mut [u8]) {
    for (i, b) in p.iter_mut().enumerate() {
        *b = (seq.wrapping_mul(31) ^ i) as u8;
    }
}

const MODES: [Completion; 4] = [
    Completion::Poll,
    Completion::Yield,
    Completion::Irq,
    Completion::Adaptive,
];

#[test]
fn every_mode_moves_fresh_data_direct_and_scatter_gather() {
    for clock in [Clock::Unlimited, SLOW] {
        // Direct register mode.
        let r = rig(clock, false);
        let e = &r.engines[0];
        for (seq, &c) in MODES.iter().cycle().take(24).enumerate() {
            for len in [8usize, 4096, 20_000] {
                let mut tx = e.pool().alloc::<u8>(len).unwrap();
                let mut rx = e.pool().alloc::<u8>(len).unwrap();
                pattern(seq + len, tx.as_mut_slice());
                assert_eq!(e.two_way(&tx, len, &mut rx, c).unwrap(), len, "{c:?}");
                assert_eq!(rx.as_slice(), tx.as_slice(), "{c:?} {len} bytes");
            }
        }
        // Scatter-gather: a ring of packets, in and out.
        let r = rig(clock, true);
        let e = &r.engines[0];
        for c in MODES {
            let mut ring = PacketRing::new(e, 8, 2048, 4, c).unwrap();
            let mut out = [0u8; 2048];
            for seq in 0..40usize {
                let len = 1 + (seq * 97) % 2048;
                let mut p = vec![0u8; len];
                pattern(seq, &mut p);
                ring.send(&p).unwrap();
                assert_eq!(ring.recv(&mut out).unwrap(), len, "{c:?}");
                assert_eq!(&out[..len], &p[..], "{c:?} packet {seq}");
            }
        }
    }
}

/// A sleeping adaptive wait re-arms the line once and sleeps once; it never
/// re-arms after the completion (the interrupt mode does, and so makes at
/// least three line operations per wait).
#[test]
fn a_sleeping_adaptive_wait_makes_two_line_operations() {
    let r = rig(SLOW, false);
    let e = &r.engines[0];
    let len = 64 << 10;
    let n = 12;
    let mut tx = e.pool().alloc::<u8>(len).unwrap();
    let mut rx = e.pool().alloc::<u8>(len).unwrap();
    let mut run = |c: Completion| {
        e.two_way(&tx, len, &mut rx, c).unwrap();
        let before = ops(e);
        for seq in 0..n {
            pattern(seq, tx.as_mut_slice());
            assert_eq!(e.two_way(&tx, len, &mut rx, c).unwrap(), len);
            assert_eq!(rx.as_slice(), tx.as_slice());
        }
        let after = ops(e);
        [after[0].since(before[0]), after[1].since(before[1])]
    };
    // Each mode after one transfer of its own: what another mode left on
    // the lines (an interrupt taken while polling, left pending) is not
    // counted against it.
    let adaptive = run(Completion::Adaptive);
    let irq = run(Completion::Irq);
    eprintln!("adaptive {adaptive:?}\nirq {irq:?}");
    let n = n as u64;
    // MM2S: 655 us away, beyond the spin limit, so every wait sleeps: one
    // re-arm, one sleep, woken by the interrupt.
    let mm2s = adaptive[0];
    assert!(mm2s.waits >= n, "MM2S waits did not sleep: {mm2s:?}");
    assert!(
        mm2s.enables + mm2s.waits <= 2 * n + 2,
        "adaptive MM2S: more than two line operations per wait: {mm2s:?}"
    );
    // S2MM ends a write-back after MM2S: a short spin, or the same two.
    let s2mm = adaptive[1];
    assert!(
        s2mm.enables + s2mm.waits <= 2 * n + 2,
        "adaptive S2MM: more than two line operations per wait: {s2mm:?}"
    );
    // The interrupt mode, for comparison: it re-arms after each completion.
    assert!(
        irq[0].enables + irq[0].waits >= 3 * n,
        "the interrupt mode's MM2S made fewer operations than expected: {:?}",
        irq[0]
    );
    assert!(
        adaptive[0].enables + adaptive[0].waits + adaptive[1].enables + adaptive[1].waits
            < irq[0].enables + irq[0].waits + irq[1].enables + irq[1].waits,
        "adaptive {adaptive:?} is not cheaper on the lines than irq {irq:?}"
    );
}

/// A transfer the spin collects raises no interrupt at all: the driver
/// enables the channel's interrupt only when it stops spinning. Given a
/// spin far longer than the transfer (the limit raised to a second), no
/// line is touched.
#[test]
fn a_spun_adaptive_wait_touches_no_line() {
    let r = rig(Clock::Unlimited, false);
    let e = &r.engines[0];
    e.set_link(Link {
        bytes_per_s: None,
        latency: std::time::Duration::from_millis(500),
        spin_limit: std::time::Duration::from_secs(1),
    });
    let len = 512;
    let mut tx = e.pool().alloc::<u8>(len).unwrap();
    let mut rx = e.pool().alloc::<u8>(len).unwrap();
    let before = ops(e);
    for seq in 0..20 {
        pattern(seq, tx.as_mut_slice());
        e.two_way(&tx, len, &mut rx, Completion::Adaptive).unwrap();
        assert_eq!(rx.as_slice(), tx.as_slice());
    }
    let after = ops(e);
    for ch in 0..2 {
        assert_eq!(
            after[ch].since(before[ch]),
            LineOps::default(),
            "channel {ch}: a spun wait used the line"
        );
    }
}

/// The spin is what the link needs: latency plus bytes at the rate, within
/// the limit; past the limit, none (sleep at once); a long transfer's last
/// stretch is spun.
#[test]
fn the_spin_follows_the_link() {
    use std::time::{Duration, Instant};
    let link = Link {
        bytes_per_s: Some(1e9),
        latency: Duration::from_micros(2),
        spin_limit: Duration::from_micros(20),
    };
    assert_eq!(link.spin(4000), Duration::from_micros(6));
    assert_eq!(link.spin(64 << 10), Duration::ZERO);
    let long_ago = Instant::now() - Duration::from_micros(60);
    // 64 KiB at 1 GB/s: 67.5 us after a start 60 us ago is 7.5 us away.
    assert!(link.spin_until(long_ago, 64 << 10) > Instant::now());
    let just_now = Instant::now();
    assert!(link.spin_until(just_now, 1 << 20) <= Instant::now());
    // An unknown rate spins the latency only.
    let unknown = Link {
        bytes_per_s: None,
        ..link
    };
    assert_eq!(unknown.spin(1 << 30), Duration::from_micros(2));
}
