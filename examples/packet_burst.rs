//! The 64 B row of `dmaflow bench transfer`'s bursts alone, for `perf`: a
//! stream of PACKETS packets of BYTES bytes through a [`PacketRing`] of 256
//! buffers on the emulated fabric (coherent, unlimited clock, loopback),
//! sent and received by the burst with polling completion; prints the rate,
//! the driver thread's CPU per packet, and the emulated device thread's.
//!
//! ```text
//! cargo run --release --example packet_burst -- [BYTES] [PACKETS]
//! perf record -F 4999 -e cpu-clock -g target/release/examples/packet_burst 64 2000000
//! ```

use std::time::Instant;

use dmaflow::dma::{Completion, PacketRing};
use dmaflow::mem::CachePolicy;
use dmaflow::platform::MemoryModel;
use dmaflow::platform::cpu::thread_cpu_time;
use dmaflow::rig::Rig;
use dmaflow::sim::{Clock, Loopback};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let bytes: usize = args.get(1).map_or(Ok(64), |a| a.parse())?;
    let packets: u64 = args.get(2).map_or(Ok(1_000_000), |a| a.parse())?;
    let rig = Rig::with_model(
        64 << 20,
        Clock::Unlimited,
        true,
        CachePolicy::Coherent,
        MemoryModel::Coherent,
        Box::new(Loopback),
    )?;
    let _placed = rig.dedicate_core()?;
    let engine = &rig.engines[0];
    let mut ring = PacketRing::new(engine, 256, bytes, 16, Completion::Poll)?;
    let slots = ring.slots() as u64;
    let (mut sent, mut received) = (0u64, 0u64);
    let (device0, cpu0, t0) = (
        rig.fabric.device_cpu_time()?,
        thread_cpu_time(),
        Instant::now(),
    );
    while received < packets {
        let room = (packets - sent).min(slots - (sent - received)) as usize;
        if room > 0 {
            let from = sent;
            sent += ring.send_burst_with(room, bytes, |i, p| {
                p[..8].copy_from_slice(&(from + i as u64).to_le_bytes());
            })? as u64;
        }
        let mut seq = received;
        ring.recv_burst_with((sent - received) as usize, |p| {
            assert_eq!(p[..8], seq.to_le_bytes());
            seq += 1;
        })?;
        received = seq;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = (thread_cpu_time() - cpu0).as_secs_f64();
    let device = (rig.fabric.device_cpu_time()? - device0).as_secs_f64();
    let n = packets as f64;
    println!(
        "{bytes} B: {:.2} M packets/s; CPU per packet: driver thread {:.3} us, \
         device thread {:.3} us",
        n / wall / 1e6,
        cpu / n * 1e6,
        device / n * 1e6
    );
    Ok(())
}
