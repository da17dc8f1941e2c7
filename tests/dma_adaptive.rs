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

/// A wait that sleeps on the line re-arms it at most once and sleeps once;
/// nothing re-arms it after a completion (an enable of a line armed already
/// is no system call). Adaptive completion is made to sleep here by a link
/// that claims to be far faster than the device.
#[test]
fn a_sleeping_wait_makes_at_most_two_line_operations() {
    let r = rig(SLOW, false);
    let e = &r.engines[0];
    e.set_link(Link {
        bytes_per_s: Some(1e12),
        latency: std::time::Duration::from_micros(1),
        spin_limit: std::time::Duration::from_micros(20),
    });
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
    let n = n as u64;
    for c in [Completion::Adaptive, Completion::Irq] {
        let [mm2s, s2mm] = run(c);
        eprintln!("{c:?}: MM2S {mm2s:?}, S2MM {s2mm:?}");
        if c == Completion::Adaptive {
            // One wait per transfer (S2MM's; MM2S is done by then): one
            // re-arm and one sleep per transfer on both lines together. A
            // wait whose thread lost its core for the transfer's 655 us finds
            // it done and sleeps not at all, so on a busy host only most of
            // them sleep; the bound below is what this test is for.
            assert!(
                s2mm.waits >= n / 2,
                "{c:?}: S2MM waits did not sleep: {s2mm:?}"
            );
            let all = mm2s.enables + mm2s.waits + s2mm.enables + s2mm.waits;
            assert!(
                all <= 2 * n + 2,
                "{c:?}: more than two line operations per transfer: {mm2s:?} {s2mm:?}"
            );
            continue;
        }
        // MM2S: 655 us of link, so a wait sleeps (unless it lost its core
        // for that long): one re-arm, one sleep
        // woken by the interrupt (a wake-up on an interrupt left pending from
        // before may add a sleep, never a re-arm).
        assert!(
            mm2s.waits >= n / 2,
            "{c:?}: MM2S waits did not sleep: {mm2s:?}"
        );
        assert!(
            mm2s.enables <= n + 1,
            "{c:?}: MM2S re-armed more than once per wait: {mm2s:?}"
        );
        assert!(
            mm2s.enables + mm2s.waits <= 2 * n + 2,
            "{c:?}: MM2S made more than two line operations per wait: {mm2s:?}"
        );
        // S2MM ends its write-back after MM2S: a short spin (adaptive), or
        // the same two.
        assert!(
            s2mm.enables + s2mm.waits <= 2 * n + 2,
            "{c:?}: S2MM made more than two line operations per wait: {s2mm:?}"
        );
    }
}

/// A wait given the link's time naps through it (one timer sleep, no line
/// touched) and spins only at its end: the transfers complete with none of
/// the interrupt's operations and a small share of the CPU.
#[test]
fn a_napped_adaptive_wait_touches_no_line_and_little_cpu() {
    use dmaflow::platform::cpu::thread_cpu_time;
    let r = rig(SLOW, false);
    let e = &r.engines[0];
    // The truth (100 MB/s) plus 10 ms of latency: the device is done well
    // before the nap ends, even on a host busy enough to deschedule it for
    // a few milliseconds (a test run beside a build).
    e.set_link(Link {
        bytes_per_s: Some(100e6),
        latency: std::time::Duration::from_millis(10),
        spin_limit: std::time::Duration::from_micros(20),
    });
    let len = 64 << 10;
    let n = 10;
    let mut tx = e.pool().alloc::<u8>(len).unwrap();
    let mut rx = e.pool().alloc::<u8>(len).unwrap();
    e.two_way(&tx, len, &mut rx, Completion::Adaptive).unwrap();
    let before = ops(e);
    let (t0, c0) = (std::time::Instant::now(), thread_cpu_time());
    for seq in 0..n {
        pattern(seq, tx.as_mut_slice());
        e.two_way(&tx, len, &mut rx, Completion::Adaptive).unwrap();
        assert_eq!(rx.as_slice(), tx.as_slice());
    }
    let (wall, cpu) = (t0.elapsed(), thread_cpu_time() - c0);
    let after = ops(e);
    let used: u64 = (0..2)
        .map(|ch| {
            let d = after[ch].since(before[ch]);
            d.enables + d.waits
        })
        .sum();
    // A device descheduled past the 10 ms may be slept on once or twice.
    assert!(used <= 4, "napped waits used the lines: {used} operations");
    assert!(
        cpu.as_secs_f64() < 0.5 * wall.as_secs_f64(),
        "the waits spun instead of napping: {cpu:?} of CPU in {wall:?}"
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
    // Far from its end: the wait runs to the expected end (napping most of
    // it), 2 + 1048.6 us after the start.
    let just_now = Instant::now();
    assert!(link.spin_until(just_now, 1 << 20) >= just_now + Duration::from_micros(1050));
    // An unknown rate spins the latency only.
    let unknown = Link {
        bytes_per_s: None,
        ..link
    };
    assert_eq!(unknown.spin(1 << 30), Duration::from_micros(2));
}

/// A ring sized by time holds that much of the link: 4 ms at 1200 MB/s is
/// 4.8 MB, 2344 buffers of 2 KiB (2343.75 rounded up); 1 ms of 4 KiB
/// buffers, 293 (292.97 up); never fewer than two; nothing where the rate is
/// unknown or the buffer empty.
#[test]
fn a_ring_sized_by_time_holds_that_much_of_the_link() {
    use std::time::Duration;
    let link = Link {
        bytes_per_s: Some(1.2e9),
        ..Link::default()
    };
    assert_eq!(link.slots_for(Duration::from_millis(4), 2048), Some(2344));
    assert_eq!(link.slots_for(Duration::from_millis(1), 4096), Some(293));
    assert_eq!(link.slots_for(Duration::from_nanos(1), 1 << 20), Some(2));
    assert_eq!(link.slots_for(Duration::from_millis(1), 0), None);
    assert_eq!(
        Link::default().slots_for(Duration::from_millis(1), 64),
        None
    );
}

/// A ring with many packets ahead naps for half of them by the link instead
/// of spinning or sleeping per packet: a stream of 2 KiB packets through a
/// ring of 32 at 100 MB/s (20 us a packet) uses a small share of the CPU and
/// wakes far fewer times than it receives packets.
#[test]
fn a_deep_adaptive_ring_naps_for_a_batch() {
    use dmaflow::platform::cpu::thread_cpu_time;
    let r = rig(SLOW, true);
    let e = &r.engines[0];
    e.set_link(Link {
        bytes_per_s: Some(100e6),
        ..Link::default()
    });
    let (slots, len, total) = (32usize, 2048usize, 640usize);
    let mut ring = PacketRing::new(e, slots, len, 8, Completion::Adaptive).unwrap();
    let before = ops(e);
    let (t0, c0) = (std::time::Instant::now(), thread_cpu_time());
    let (mut sent, mut got, mut passes) = (0usize, 0usize, 0usize);
    while got < total {
        while sent < total && sent - got < slots {
            ring.send_with(len, |p| pattern(sent, p)).unwrap();
            sent += 1;
        }
        passes += 1;
        let mut seq = got;
        let n = ring
            .recv_burst_with(sent - got, |p| {
                let mut want = vec![0u8; len];
                pattern(seq, &mut want);
                assert_eq!(p, &want[..], "packet {seq}");
                seq += 1;
            })
            .unwrap();
        assert_eq!(seq, got + n);
        got += n;
    }
    let (wall, cpu) = (t0.elapsed(), thread_cpu_time() - c0);
    let after = ops(e);
    let waits: u64 = (0..2).map(|ch| after[ch].since(before[ch]).waits).sum();
    assert!(
        passes <= total / 4,
        "{passes} passes for {total} packets: the waits did not batch"
    );
    assert!(
        waits <= passes as u64,
        "{waits} sleeps on the line in {passes} passes"
    );
    assert!(
        cpu.as_secs_f64() < 0.5 * wall.as_secs_f64(),
        "the ring spun instead of napping: {cpu:?} of CPU in {wall:?}"
    );
}

/// The ring counts its stream's stalls: a driver away while the device
/// works through the whole ring finds every receive buffer full (one
/// overrun per drain) and MM2S done with everything (an underrun at each
/// refill after the first).
#[test]
fn a_ring_counts_its_overruns_and_underruns() {
    let r = rig(Clock::Unlimited, true);
    let e = &r.engines[0];
    let mut ring = PacketRing::new(e, 8, 256, 8, Completion::Poll).unwrap();
    let mut out = [0u8; 256];
    for round in 0..3 {
        for seq in 0..8 {
            ring.send_with(256, |p| pattern(seq, p)).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        for _ in 0..8 {
            ring.recv(&mut out).unwrap();
        }
        let s = ring.starved();
        assert_eq!(s.overruns, round + 1, "round {round}: {s:?}");
        assert_eq!(s.underruns, round, "round {round}: {s:?}");
    }
}

/// The driver's nap aim follows where the transfers end: naps that find
/// the transfer done at their first look step the aim earlier, one
/// [`NAP_STEP`] a wait, never past [`NAP_LEAD_MAX`]; naps that find it still
/// running step it later by [`NAP_STEP_LATER`], never past [`NAP_LAG_MAX`]. Both directions are
/// bounded, so a busy host cannot drive the aim away. (Each half runs a few
/// waits past what the bound needs: a test host busy enough to wake a nap
/// milliseconds late may turn a look or two the other way.)
///
/// [`NAP_STEP`]: dmaflow::axi::NAP_STEP
/// [`NAP_LEAD_MAX`]: dmaflow::axi::NAP_LEAD_MAX
/// [`NAP_LAG_MAX`]: dmaflow::axi::NAP_LAG_MAX
/// [`NAP_STEP_LATER`]: dmaflow::axi::NAP_STEP_LATER
#[test]
fn the_nap_aim_steps_toward_where_transfers_end_and_stays_bounded() {
    use dmaflow::axi::{NAP_LAG_MAX, NAP_LEAD_MAX, NAP_STEP, NAP_STEP_LATER, NAP_WAKE};
    let step = NAP_STEP.as_nanos() as i64;
    let later = NAP_STEP_LATER.as_nanos() as i64;
    let spare = 10;
    // Runs `n` adaptive two-way transfers of `len` bytes on `e`, checking the
    // data and that the S2MM aim moves by one step (either way) at most per
    // wait.
    let run = |e: &SimEngine, len: usize, n: i64| {
        let mut tx = e.pool().alloc::<u8>(len).unwrap();
        let mut rx = e.pool().alloc::<u8>(len).unwrap();
        let mut last = e.dma().nap_aim_ns(Channel::S2mm);
        for seq in 0..n as usize {
            pattern(seq, tx.as_mut_slice());
            assert_eq!(
                e.two_way(&tx, len, &mut rx, Completion::Adaptive).unwrap(),
                len
            );
            assert_eq!(rx.as_slice(), tx.as_slice());
            let now = e.dma().nap_aim_ns(Channel::S2mm);
            assert!(
                now == last || now == last - step || (now > last && now <= last + later),
                "wait {seq}: {last} -> {now}"
            );
            last = now;
        }
        last
    };
    // Device far faster than the link claims (4 KiB at 100 MB/s of
    // emulated clock take 41 us; the link says 5 ms): the naps find the
    // transfer done.
    let r = rig(SLOW, false);
    let e = &r.engines[0];
    e.set_link(Link {
        bytes_per_s: None,
        latency: std::time::Duration::from_millis(5),
        spin_limit: std::time::Duration::from_micros(20),
    });
    let start = e.dma().nap_aim_ns(Channel::S2mm);
    assert_eq!(start, -(NAP_WAKE.as_nanos() as i64));
    let lead = NAP_LEAD_MAX.as_nanos() as i64;
    let aim = run(e, 4096, (lead + start) / step + spare);
    assert_eq!(aim, -lead, "naps that found the transfer done");

    // Device far slower than the link claims (1 MiB take 10.5 ms; the link
    // says 200 us): the naps find it still running, and each wait still
    // ends with the transfer (spin, then the interrupt).
    let r = rig(SLOW, false);
    let e = &r.engines[0];
    e.set_link(Link {
        bytes_per_s: None,
        latency: std::time::Duration::from_micros(200),
        spin_limit: std::time::Duration::from_micros(20),
    });
    let lag = NAP_LAG_MAX.as_nanos() as i64;
    let aim = run(e, 1 << 20, (lag - start) / later + 1 + spare);
    assert_eq!(aim, lag, "naps that found the transfer running");
}
