//! A program that uses only safe dmaflow APIs never has the device write into
//! memory it can reach, whatever times out, fails or is dropped.
//!
//! Each scenario arms a stall in the emulated fabric (the transfer in progress
//! takes longer than the driver waits; PG021 halts and resets only once it ends,
//! and it writes its data when it does), lets the API under test fail, then takes
//! fresh buffers from the same pool, fills them with a pattern, waits until the
//! stalled transfer has ended and checks the pattern. With a short stall the
//! driver confirms the engine halted before it gives the buffers back (the fresh
//! ones lie where the old ones were); with a long one it cannot, and the buffers
//! are lost to the engine (the fresh ones lie elsewhere). Either way the engine
//! then works again with no reset by hand.

mod common;
use common::Poke;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmaflow::axi::{self, AxiDma, Channel, Config, Wait};
use dmaflow::dma::{Completion, Engine, Error, Lane, PacketRing, Partition, Proxy};
use dmaflow::mem::{CachePolicy, DmaBuf, DmaPool};
use dmaflow::platform::sim::{DEFAULT_DDR_BASE, SimBoard, SimIrq, SimRegisters};
use dmaflow::platform::{MemoryModel, RegisterSpace};
use dmaflow::sim::{Clock, Fabric, Faults, Loopback, StreamProcessor};

type SimEngine = Engine<SimRegisters, SimIrq>;

const TIMEOUT: Duration = Duration::from_millis(100);
/// Ends while the driver waits for Halted (it waits up to 2 x TIMEOUT, then
/// resets for up to another TIMEOUT).
const SHORT: Duration = Duration::from_millis(150);
/// Outlasts everything the driver waits (3 x TIMEOUT).
const LONG: Duration = Duration::from_millis(550);
const MODES: [Completion; 3] = [Completion::Poll, Completion::Yield, Completion::Irq];
const PATTERN: u8 = 0x5A;

/// Returns every packet on each of two streams (a coprocessor with two engines).
struct TwoLoopbacks;

impl StreamProcessor for TwoLoopbacks {
    fn streams(&self) -> usize {
        2
    }
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        for (o, i) in outputs.iter_mut().zip(inputs) {
            o.extend_from_slice(i);
        }
    }
}

/// Returns every packet twice over: longer than what was sent.
struct Doubler;

impl StreamProcessor for Doubler {
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        outputs[0].extend_from_slice(inputs[0]);
        outputs[0].extend_from_slice(inputs[0]);
    }
}

struct Rig {
    engines: Vec<SimEngine>,
    pool: DmaPool,
    fabric: Fabric,
    board: SimBoard,
}

/// Both boards: coherent with no cache maintenance, and non-coherent with
/// explicit maintenance.
const MODELS: [MemoryModel; 2] = [MemoryModel::Coherent, MemoryModel::NonCoherent];

fn rig(sg: bool, processor: Box<dyn StreamProcessor>, model: MemoryModel) -> Rig {
    let n = processor.streams();
    let board = SimBoard::with_model(n, 8 << 20, DEFAULT_DDR_BASE, 2 * n, model).unwrap();
    board.set_random_eviction(Some(common::EVICTION_SEED));
    let fabric = Fabric::with_processor(&board, Clock::Unlimited, sg, processor).unwrap();
    fabric
        .set_length_width(Config::default().length_width)
        .unwrap();
    let policy = match model {
        MemoryModel::Coherent => CachePolicy::Coherent,
        MemoryModel::NonCoherent => CachePolicy::Explicit,
    };
    let pool = DmaPool::new(Arc::new(board.memory().unwrap()), policy).unwrap();
    let cfg = Config {
        timeout: TIMEOUT,
        ..Config::default()
    };
    let engines = (0..n)
        .map(|i| {
            let dma = AxiDma::new(board.registers(i).unwrap(), cfg).unwrap();
            let (a, b) = (board.irq(2 * i).unwrap(), board.irq(2 * i + 1).unwrap());
            Engine::new(dma, a, b, pool.clone())
        })
        .collect();
    Rig {
        engines,
        pool,
        fabric,
        board,
    }
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
}

fn filled(pool: &DmaPool, len: usize, seed: u8) -> DmaBuf<u8> {
    let mut b = pool.alloc::<u8>(len).unwrap();
    b.as_mut_slice().copy_from_slice(&data(len, seed));
    b
}

/// A stall armed in the fabric, and what is needed to check after it.
struct Stall {
    stall: Duration,
    armed: Instant,
    lost_before: usize,
    /// Where the buffers of the transfer under test lie (the pool's first fit).
    first: u64,
}

impl Stall {
    /// Arms a stall of `stall`; the transfer under test takes its buffers from
    /// bus address `first` up.
    fn arm(r: &Rig, stall: Duration, first: u64) -> Self {
        let s = Stall {
            stall,
            armed: Instant::now(),
            lost_before: r.pool.lost_bytes(),
            first,
        };
        r.fabric.inject(Faults {
            stall: Some(stall),
            ..Faults::default()
        });
        s
    }

    /// After the transfer under test failed and gave its buffers back: with a
    /// short stall nothing is lost and the next buffer lies where the transfer's
    /// did, with a long one the buffers are lost; either way a fresh buffer filled
    /// with a pattern keeps it after the stalled transfer has ended.
    fn check(self, r: &Rig, what: &str) {
        let lost = r.pool.lost_bytes() - self.lost_before;
        let mut fresh = r.pool.alloc::<u8>(1 << 20).unwrap();
        fresh.as_mut_slice().fill(PATTERN);
        if self.stall == SHORT {
            assert_eq!(lost, 0, "{what}: the engine halted, nothing is lost");
            assert_eq!(
                fresh.bus_addr(),
                self.first,
                "{what}: the fresh buffer lies where the transfer's did"
            );
        } else {
            assert!(
                lost > 0,
                "{what}: the engine could not halt, its buffers are lost"
            );
        }
        // The stalled transfer ends (and writes, wherever it still may).
        let over = self.armed + self.stall + Duration::from_millis(100);
        std::thread::sleep(over.saturating_duration_since(Instant::now()));
        assert!(
            fresh.as_slice().iter().all(|&b| b == PATTERN),
            "{what}: the device wrote into memory handed out again"
        );
    }
}

fn expect_timeout(e: Error, what: &str) {
    let timed_out = matches!(e, Error::Axi(axi::Error::Timeout { .. }));
    assert!(timed_out, "{what}: expected a timeout, got {e}");
}

/// Runs `fail` with a stall of `stall` armed, expecting it to time out; checks
/// that memory handed out again is left alone ([`Stall::check`]) and that
/// `work` succeeds afterwards with no reset by hand.
fn scenario(
    what: &str,
    r: &Rig,
    stall: Duration,
    fail: impl FnOnce() -> Result<(), Error>,
    work: impl FnOnce() -> Result<(), Error>,
) {
    let armed = Stall::arm(r, stall, next_addr(&r.pool));
    expect_timeout(fail().expect_err(what), what);
    armed.check(r, what);
    work().unwrap_or_else(|e| panic!("{what}: after the failure: {e}"));
    // The driver's recovery breaks no rule of the protocol.
    assert_eq!(r.fabric.violations(), Vec::new(), "{what}");
}

/// Where the pool's next buffer goes (first fit): where a transfer's buffers go.
fn next_addr(pool: &DmaPool) -> u64 {
    pool.alloc::<u8>(1).unwrap().bus_addr()
}

fn both_stalls(mut each: impl FnMut(Duration)) {
    for stall in [SHORT, LONG] {
        each(stall);
    }
}

/// A two-way transfer through `e` that checks what comes back.
fn round_trip(e: &SimEngine, c: Completion) -> Result<(), Error> {
    let tx = filled(e.pool(), 3000, 1);
    let mut rx = e.pool().alloc::<u8>(3000)?;
    let n = e.two_way(&tx, 3000, &mut rx, c)?;
    assert_eq!(&rx.as_slice()[..n], tx.as_slice());
    Ok(())
}

#[test]
fn two_way_after_a_timeout() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let e = &r.engines[0];
        for c in MODES {
            both_stalls(|stall| {
                scenario(
                    &format!("two_way {c:?} {stall:?}"),
                    &r,
                    stall,
                    || round_trip(e, c),
                    || round_trip(e, c),
                )
            });
        }
    }
}

#[test]
fn write_read_after_a_timeout() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let e = &r.engines[0];
        let copy = |c| {
            let d = data(5000, 3);
            let mut out = vec![0u8; 5000];
            let n = e.write_read(&d, &mut out, c)?;
            assert_eq!(&out[..n], &d[..]);
            Ok(())
        };
        for c in MODES {
            both_stalls(|stall| {
                scenario(
                    &format!("write_read {c:?} {stall:?}"),
                    &r,
                    stall,
                    || copy(c),
                    || copy(c),
                )
            });
        }
    }
}

#[test]
fn send_message_after_a_timeout() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let e = &r.engines[0];
        let message = |c| {
            let d = data(20_000, 5);
            let mut out = vec![0u8; 20_000];
            let n = e.send_message(&d, &mut out, Partition::Blocks(4096), 2, c)?;
            assert_eq!(&out[..n], &d[..]);
            Ok(())
        };
        for c in MODES {
            both_stalls(|stall| {
                scenario(
                    &format!("send_message {c:?} {stall:?}"),
                    &r,
                    stall,
                    || message(c),
                    || message(c),
                )
            });
        }
    }
}

#[test]
fn owned_transfers_after_a_timeout_and_dropped_early() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let e = &r.engines[0];
        let owned = |c| -> Result<(), Error> {
            let tx = filled(e.pool(), 2000, 9);
            let rx = e.pool().alloc::<u8>(2000)?;
            let done = e
                .begin(tx, 2000, rx, 2000, c)
                .map_err(|f| f.error)?
                .wait()
                .map_err(|f| {
                    // The buffers come back only when the engine was halted.
                    assert_eq!(f.buffers.is_some(), !e.dma().is_failed());
                    f.error
                })?;
            assert_eq!(done.received, 2000);
            assert_eq!(done.rx.as_slice(), done.tx.as_slice());
            Ok(())
        };
        for c in MODES {
            both_stalls(|stall| {
                scenario(
                    &format!("begin/wait {c:?} {stall:?}"),
                    &r,
                    stall,
                    || owned(c),
                    || owned(c),
                )
            });
        }
        // A transfer dropped while the device is stalled in it: the drop halts the
        // engine first (short stall) or leaves the buffers lost to it (long stall).
        for stall in [SHORT, LONG] {
            let what = format!("dropped in flight, {stall:?}");
            let armed = Stall::arm(&r, stall, next_addr(&r.pool));
            let tx = filled(e.pool(), 2000, 4);
            let rx = e.pool().alloc::<u8>(2000).unwrap();
            let flight = e.begin(tx, 2000, rx, 2000, Completion::Irq).unwrap();
            // Dropped once the device is stalled inside the transfer.
            while r.fabric.pending_faults().stall.is_some() {
                assert!(
                    armed.armed.elapsed() < Duration::from_secs(1),
                    "the stall never began"
                );
                std::thread::yield_now();
            }
            drop(flight);
            armed.check(&r, &what);
            owned(Completion::Poll).unwrap();
        }
    }
}

#[test]
fn proxy_after_a_timeout() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let Rig {
            mut engines,
            pool,
            fabric,
            board,
        } = r;
        let proxy = Proxy::start(engines.remove(0)).unwrap();
        let r = Rig {
            engines,
            pool,
            fabric,
            board,
        };
        let call = || {
            let d = data(4000, 7);
            assert_eq!(proxy.transfer(d.clone(), 4000)?, d);
            Ok(())
        };
        both_stalls(|stall| scenario(&format!("proxy {stall:?}"), &r, stall, call, call));
    }
}

#[test]
fn two_way_together_stops_every_lane() {
    for model in MODELS {
        let r = rig(false, Box::new(TwoLoopbacks), model);
        let together = |c| -> Result<(), Error> {
            let tx: Vec<_> = (0..2).map(|i| filled(&r.pool, 1500, i)).collect();
            let mut rx: Vec<_> = (0..2).map(|_| r.pool.alloc::<u8>(1500).unwrap()).collect();
            let (rx0, rx1) = rx.split_at_mut(1);
            let mut lanes = [
                Lane {
                    engine: &r.engines[0],
                    tx: &tx[0],
                    tx_len: 1500,
                    rx: &mut rx0[0],
                    rx_len: 1500,
                },
                Lane {
                    engine: &r.engines[1],
                    tx: &tx[1],
                    tx_len: 1500,
                    rx: &mut rx1[0],
                    rx_len: 1500,
                },
            ];
            let got = dmaflow::dma::two_way_together(&mut lanes, c)?;
            assert_eq!(got, vec![1500, 1500]);
            for i in 0..2 {
                assert_eq!(rx[i].as_slice(), tx[i].as_slice());
            }
            Ok(())
        };
        for c in MODES {
            both_stalls(|stall| {
                scenario(
                    &format!("two_way_together {c:?} {stall:?}"),
                    &r,
                    stall,
                    || together(c),
                    || together(c),
                );
                // Both engines are halted (or failed and then reset), none still runs.
                for e in &r.engines {
                    assert!(!e.dma().is_failed());
                }
            });
        }
    }
}

#[test]
fn packet_rings_after_a_timeout() {
    for model in MODELS {
        let r = rig(true, Box::new(Loopback), model);
        let e = &r.engines[0];
        for c in MODES {
            both_stalls(|stall| {
                // The ring is set up (its S2MM buffers handed over) before the stall.
                let first = next_addr(&r.pool);
                let mut ring = Some(PacketRing::new(e, 8, 1024, 1, c).unwrap());
                let mut fail = || {
                    let ring = ring.as_mut().expect("ring");
                    ring.send(&data(700, 2))?;
                    let mut out = [0u8; 1024];
                    ring.recv(&mut out)?;
                    Ok(())
                };
                let what = format!("PacketRing {c:?} {stall:?}");
                let armed = Stall::arm(&r, stall, first);
                expect_timeout(fail().expect_err(&what), &what);
                // The ring is stopped; its buffers go back (or not) when it is dropped.
                let stopped = ring.as_mut().unwrap().send(&[1]);
                assert!(matches!(stopped, Err(Error::Stopped)), "{what}");
                drop(ring.take());
                armed.check(&r, &what);
                // A new ring on the same engine works, with no reset by hand.
                let mut ring = PacketRing::new(e, 8, 1024, 1, c).unwrap();
                ring.send(&data(700, 3)).unwrap();
                let mut out = [0u8; 1024];
                let n = ring.recv(&mut out).unwrap();
                assert_eq!(&out[..n], &data(700, 3)[..], "{what}");
            });
        }
    }
}

#[test]
fn an_oversized_packet_is_named_and_the_ring_goes_on() {
    for model in MODELS {
        let r = rig(true, Box::new(Doubler), model);
        let e = &r.engines[0];
        for c in MODES {
            let mut ring = PacketRing::new(e, 8, 256, 1, c).unwrap();
            // 200 bytes come back as 400: two 256-byte buffers' worth.
            ring.send(&data(200, 1)).unwrap();
            let mut out = [0u8; 256];
            match ring.recv(&mut out) {
                Err(Error::PacketTooLong { len, slot }) => assert_eq!((len, slot), (400, 256)),
                other => panic!("{c:?}: expected PacketTooLong, got {other:?}"),
            }
            // Every buffer went back: many more packets pass, through several turns.
            for k in 0..20u8 {
                ring.send(&data(100, k)).unwrap();
                let n = ring.recv(&mut out).unwrap();
                let mut want = data(100, k);
                want.extend_from_slice(&data(100, k));
                assert_eq!(&out[..n], &want[..], "{c:?} packet {k}");
            }
        }
    }
}

#[test]
fn a_dropped_interrupt_is_found_by_the_status_check() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let e = &r.engines[0];
        for _ in 0..3 {
            r.fabric.inject(Faults {
                drop_irq: true,
                ..Faults::default()
            });
            // An interrupt-driven transfer: the interrupt of one of its completions
            // never comes.
            round_trip(e, Completion::Irq).unwrap();
            assert!(
                !r.fabric.pending_faults().drop_irq,
                "the interrupt was really dropped (the fault was consumed)"
            );
        }
    }
}

#[test]
fn starting_a_busy_or_halted_channel_is_an_error() {
    for model in MODELS {
        let r = rig(false, Box::new(Loopback), model);
        let e = &r.engines[0];
        let dma = e.dma();
        let rx = e.pool().alloc::<u8>(64).unwrap();
        let tx = filled(e.pool(), 64, 3);
        // The raw driver leaves cache maintenance to its caller.
        tx.sync_for_device(64).unwrap();
        rx.sync_for_cpu(64).unwrap();
        // SAFETY: `rx` lives until the transfer is collected below.
        unsafe { dma.start(Channel::S2mm, rx.bus_addr(), 64, false) }.unwrap();
        // SAFETY: refused before any register is written.
        let second = unsafe { dma.start(Channel::S2mm, rx.bus_addr(), 64, false) };
        assert!(
            matches!(second, Err(axi::Error::Busy(Channel::S2mm))),
            "{second:?}"
        );
        // SAFETY: `tx` lives until the transfer is collected below.
        unsafe { dma.start(Channel::Mm2s, tx.bus_addr(), 64, false) }.unwrap();
        assert_eq!(dma.wait(Channel::Mm2s, &Wait::Poll).unwrap(), 64);
        assert_eq!(dma.wait(Channel::S2mm, &Wait::Poll).unwrap(), 64);
        rx.sync_for_cpu(64).unwrap();
        assert_eq!(rx.as_slice(), tx.as_slice(), "one transfer, not two merged");

        // Halted behind the driver's back (another program cleared RS): named, and
        // the next transfer works.
        let regs = r.board.registers(0).unwrap();
        regs.poke(dmaflow::axi::regs::MM2S + dmaflow::axi::regs::DMACR, 0)
            .unwrap();
        let err = round_trip(e, Completion::Poll).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Axi(axi::Error::Halted {
                    channel: Channel::Mm2s,
                    ..
                })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("halted"), "{err}");
        round_trip(e, Completion::Poll).unwrap();

        // Halted by an error the channel latches (RS cannot clear it): named, the
        // engine is reset, and the next transfer works.
        r.fabric.inject(Faults {
            force_error: Some((0, dmaflow::axi::regs::DMASR_DMA_SLV_ERR)),
            ..Faults::default()
        });
        let err = round_trip(e, Completion::Poll).unwrap_err();
        assert!(err.to_string().contains("DMASlvErr"), "{err}");
        round_trip(e, Completion::Irq).unwrap();
    }
}

/// An accelerator node's settings for these tests: windows of `n` u32 items.
fn stage_cfg(n: usize) -> dmaflow::accel::stage::StageConfig {
    dmaflow::accel::stage::StageConfig {
        window: n,
        hop: n,
        out_max: n,
        min_window: 1,
        depth: 4,
        completion: Completion::Poll,
    }
}

/// source -> `acc` -> sink, both queues in `r`'s DMA memory: the source writes
/// `0..items`, `acc` gets the two queue ends, the sink keeps what arrives
/// (returned, filled once the graph has run).
fn around_a_node<F>(
    r: &Rig,
    items: u32,
    acc: F,
) -> (dmaflow::graph::Graph, Arc<std::sync::Mutex<Vec<u32>>>)
where
    F: FnOnce(
            dmaflow::graph::Input<u32>,
            dmaflow::graph::Output<u32>,
        ) -> dmaflow::graph::NodeResult
        + Send
        + 'static,
{
    let memory = r.pool.queue_memory().unwrap();
    let mut g = dmaflow::graph::Graph::new();
    let (mut src, ain) = g
        .connect_in::<u32>(("source", "out"), ("acc", "in"), 4096, memory.clone())
        .unwrap();
    let (aout, sink) = g
        .connect_in::<u32>(("acc", "out"), ("sink", "in"), 4096, memory)
        .unwrap();
    g.node("source", move || {
        Ok(src.write(&(0..items).collect::<Vec<u32>>())?)
    })
    .unwrap();
    g.node("acc", move || acc(ain, aout)).unwrap();
    let got = common::collect(&mut g, "sink", sink).unwrap();
    (g, got)
}

/// An accelerator node whose engine times out: with a short stall the engine
/// is halted and the queues stay usable; with a long one (the engine cannot be
/// halted) the output queue the device may still write refuses further use,
/// the memory is lost to the device, and nothing handed out later is written.
#[test]
fn accelerator_nodes_after_a_timeout() {
    use dmaflow::accel::stage;
    for model in MODELS {
        both_stalls(|stall| {
            let mut r = rig(true, Box::new(Loopback), model);
            let engine = r.engines.remove(0);
            let what = format!("stage {model:?} {stall:?}");
            let w = what.clone();
            let (g, _) = around_a_node(&r, 20_000, move |mut ain, mut aout| {
                let e = stage::run(&engine, &stage_cfg(256), &mut ain, &mut aout).unwrap_err();
                assert!(e.to_string().contains("no completion"), "{w}: {e}");
                let next = aout.reserve(1).map(|_| ());
                if stall == LONG {
                    let e = next.expect_err(&w).to_string();
                    assert!(e.contains("lost to a device"), "{w}: {e}");
                } else {
                    next.unwrap_or_else(|e| panic!("{w}: {e}"));
                }
                Err(Box::new(e).into())
            });
            let armed = Stall::arm(&r, stall, 0);
            let e = g.run().unwrap_err().to_string();
            // The graph reports whichever node failed first: the node with its
            // timeout, or (long stall) the sink finding its queue given up.
            assert!(
                e.contains("acc") || (stall == LONG && e.contains("lost to a device")),
                "{what}: {e}"
            );
            let lost = r.pool.lost_bytes();
            if stall == LONG {
                assert!(lost > 0, "{what}: the queues and rings are lost");
            } else {
                assert_eq!(lost, 0, "{what}: the engine halted, nothing is lost");
            }
            // Whatever the stalled engine still writes lands in nothing the
            // program can reach.
            let mut fresh = r.pool.alloc::<u8>(1 << 20).unwrap();
            fresh.as_mut_slice().fill(PATTERN);
            std::thread::sleep(armed.stall + Duration::from_millis(100));
            assert!(
                fresh.as_slice().iter().all(|&b| b == PATTERN),
                "{what}: the device wrote into memory handed out again"
            );
        });
    }
}

/// A descriptor ring dropped with descriptors handed to the engine gives
/// their memory up to it; one dropped after the engine went idle returns it.
#[test]
fn a_descriptor_ring_dropped_in_flight_keeps_its_memory_from_the_pool() {
    let r = rig(true, Box::new(Loopback), MemoryModel::Coherent);
    let dma = r.engines[0].dma();
    let rx = r.pool.alloc::<u8>(4096).unwrap();
    let desc = r.pool.alloc::<u32>(4 * dmaflow::axi::DESC_WORDS).unwrap();
    let mut ring = dma.ring_start(Channel::S2mm, desc, false).unwrap();
    // SAFETY: `rx` is kept (leaked below) until the engine is reset.
    unsafe { ring.push(rx.bus_addr(), 4096, dma.max_len()) }.unwrap();
    dma.ring_flush(&mut ring).unwrap();
    let before = r.pool.lost_bytes();
    drop(ring);
    assert_eq!(
        r.pool.lost_bytes() - before,
        4 * 64,
        "the posted ring's descriptors are the device's"
    );
    std::mem::forget(rx);
    dma.reset().unwrap();
    // A ring with nothing handed over goes back whole.
    let desc = r.pool.alloc::<u32>(4 * dmaflow::axi::DESC_WORDS).unwrap();
    let ring = dma.ring_start(Channel::S2mm, desc, false).unwrap();
    let before = r.pool.lost_bytes();
    drop(ring);
    assert_eq!(r.pool.lost_bytes(), before);
}

/// A successful accelerator node leaves its engine halted (RS clear), not
/// running with CURDESC in descriptor memory that went back to the pool.
#[test]
fn an_accelerator_node_leaves_its_engine_halted() {
    use dmaflow::accel::stage;
    use dmaflow::axi::regs::{DMACR, DMACR_RS, DMASR, DMASR_HALTED, MM2S, S2MM};
    let mut r = rig(true, Box::new(Loopback), MemoryModel::NonCoherent);
    let engine = r.engines.remove(0);
    let (g, got) = around_a_node(&r, 5000, move |mut ain, mut aout| {
        stage::run(&engine, &stage_cfg(300), &mut ain, &mut aout)?;
        Ok(())
    });
    g.run().unwrap();
    assert_eq!(*got.lock().unwrap(), (0..5000).collect::<Vec<u32>>());
    let regs = r.board.registers(0).unwrap();
    for ch in [MM2S, S2MM] {
        assert_eq!(regs.read(ch + DMACR).unwrap() & DMACR_RS, 0, "{ch:#x}");
        assert_ne!(regs.read(ch + DMASR).unwrap() & DMASR_HALTED, 0, "{ch:#x}");
    }
}

/// An owned transfer forgotten (`mem::forget`) keeps its buffers from the
/// pool for good and leaves the channels busy; a reset puts the engine back
/// in service.
#[test]
fn a_forgotten_transfer_is_recovered_by_a_reset() {
    let r = rig(false, Box::new(Loopback), MemoryModel::Coherent);
    let e = &r.engines[0];
    let t = e
        .begin(
            filled(&r.pool, 512, 1),
            512,
            r.pool.alloc(512).unwrap(),
            512,
            Completion::Poll,
        )
        .unwrap();
    std::mem::forget(t);
    let busy = round_trip(e, Completion::Poll).unwrap_err();
    assert!(busy.to_string().contains("already in flight"), "{busy}");
    e.dma().reset().unwrap();
    round_trip(e, Completion::Poll).unwrap();
}

/// A descriptor whose status reports a bus error (written by the emulated IP
/// with the channel halted) is a named error, never data: in a packet ring on
/// either channel, and in an accelerator node; the engine works again after.
#[test]
fn descriptor_error_bits_are_named_errors() {
    use dmaflow::axi::regs::{DESC_STS_DEC_ERR, DESC_STS_SLV_ERR};
    let r = rig(true, Box::new(Loopback), MemoryModel::NonCoherent);
    let e = &r.engines[0];
    for (ch, bits, name) in [
        (0, DESC_STS_SLV_ERR, "DMASlvErr"),
        (1, DESC_STS_DEC_ERR, "DMADecErr"),
    ] {
        let mut ring = PacketRing::new(e, 8, 1024, 1, Completion::Poll).unwrap();
        r.fabric.inject(Faults {
            descriptor_error: Some((ch, bits)),
            ..Faults::default()
        });
        let mut out = [0u8; 1024];
        let got = ring.send(&data(700, 4)).and_then(|()| ring.recv(&mut out));
        let err = got
            .expect_err("an errored descriptor is no data")
            .to_string();
        assert!(
            err.contains("descriptor status reports") && err.contains(name),
            "{err}"
        );
        drop(ring);
        let mut ring = PacketRing::new(e, 8, 1024, 1, Completion::Poll).unwrap();
        ring.send(&data(700, 5)).unwrap();
        let n = ring.recv(&mut out).unwrap();
        assert_eq!(&out[..n], &data(700, 5)[..]);
    }
    // An accelerator node: the graph stops with the descriptor's error.
    let mut r = rig(true, Box::new(Loopback), MemoryModel::Coherent);
    let engine = r.engines.remove(0);
    let (g, _) = around_a_node(&r, 20_000, move |mut ain, mut aout| {
        dmaflow::accel::stage::run(&engine, &stage_cfg(256), &mut ain, &mut aout)?;
        Ok(())
    });
    r.fabric.inject(Faults {
        descriptor_error: Some((1, DESC_STS_SLV_ERR)),
        ..Faults::default()
    });
    let err = g.run().unwrap_err().to_string();
    assert!(err.contains("descriptor status reports DMASlvErr"), "{err}");
    assert_eq!(r.pool.lost_bytes(), 0, "the engine was halted");
}

/// The background-subtraction node on engines that cannot be halted: the
/// error comes back, the mask queue the device may still write refuses
/// further use, and what is handed out afterwards is never written.
#[test]
fn a_bgsub_node_on_engines_that_cannot_halt_gives_its_queues_up() {
    use dmaflow::accel::bgsub::{self, Config as BgConfig};
    use dmaflow::dsp::bgsub::{Params, synthetic_frames};
    use dmaflow::graph::Graph;
    use dmaflow::sim::BgSubCore;
    let p = Params::new(64, 64, 20, true).unwrap();
    let mut r = rig(true, Box::new(BgSubCore::new(p)), MemoryModel::NonCoherent);
    let memory = r.pool.queue_memory().unwrap();
    let e1 = r.engines.remove(1);
    let e0 = r.engines.remove(0);
    let mut g = Graph::new();
    let (mut src, mut bin) = g
        .connect_in::<u8>(("source", "out"), ("bgsub", "in"), 1 << 16, memory.clone())
        .unwrap();
    let (mut bout, mut sink) = g
        .connect_in::<u8>(("bgsub", "out"), ("sink", "in"), 1 << 16, memory)
        .unwrap();
    let frames = synthetic_frames(&p, 6, 3);
    g.node("source", move || Ok(src.write(&frames)?)).unwrap();
    g.node("bgsub", move || {
        let cfg = BgConfig {
            params: p,
            completion: Completion::Poll,
        };
        let e = bgsub::run([&e0, &e1], &cfg, &mut bin, &mut bout).unwrap_err();
        assert!(e.to_string().contains("no completion"), "{e}");
        let next = bout.reserve(1).map(|_| ()).unwrap_err().to_string();
        assert!(next.contains("lost to a device"), "{next}");
        Err(Box::new(e).into())
    })
    .unwrap();
    g.node("sink", move || {
        while !sink.peek(1)?.is_empty() {
            let k = sink.peek(1)?.len();
            sink.consume(k)?;
        }
        Ok(())
    })
    .unwrap();
    let armed = Stall::arm(&r, LONG, 0);
    let e = g.run().unwrap_err().to_string();
    // Whichever failed first: the node, or the sink finding its queue given up.
    assert!(e.contains("bgsub") || e.contains("lost to a device"), "{e}");
    assert!(
        r.pool.lost_bytes() > 0,
        "the engines' memory is lost to them"
    );
    let mut fresh = r.pool.alloc::<u8>(1 << 20).unwrap();
    fresh.as_mut_slice().fill(PATTERN);
    fresh.sync_for_device(1 << 20).unwrap();
    std::thread::sleep(armed.stall + Duration::from_millis(100));
    fresh.sync_for_cpu(1 << 20).unwrap();
    assert!(
        fresh.as_slice().iter().all(|&b| b == PATTERN),
        "the device wrote into memory handed out again"
    );
}
