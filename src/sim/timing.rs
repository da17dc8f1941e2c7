//! The fabric's timing model: the stream clock, the AXI DMA's own latencies from
//! PG021's performance section, and the board profiles that set both.
//!
//! PG021 (AXI DMA v7.1, "Latency and Throughput", typical configuration) gives,
//! in clock cycles: MM2S tail-descriptor write to the descriptor read (10), the
//! descriptor read to the data read (28), the data read to the stream's first beat
//! (6); S2MM stream's first beat to the memory write (39). The fabric charges a
//! transfer that starts on an idle channel the whole start-up (44 cycles with
//! scatter-gather, 16 in direct register mode, which has no descriptor to fetch)
//! and every packet the S2MM write latency; back-to-back transfers overlap the
//! start-up with the data in flight, as the IP's descriptor prefetch does, so a
//! steady stream still reaches PG021's 99.76 % of the link.

use std::time::Duration;

/// The stream rate limit of the fabric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    /// No limit: measures pure software overhead (no latencies either).
    Unlimited,
    /// `mhz` million cycles per second, `bytes_per_cycle` bytes per cycle.
    Rate {
        /// Clock frequency in MHz.
        mhz: f64,
        /// Stream width in bytes.
        bytes_per_cycle: f64,
    },
}

/// MM2S start-up with scatter-gather: tail write to descriptor read, descriptor
/// read to data read, data read to first beat (PG021).
pub const MM2S_SG_START_CYCLES: u32 = 10 + 28 + 6;
/// MM2S start-up in direct register mode: the LENGTH write to the data read and
/// the first beat, no descriptor fetch.
pub const MM2S_DIRECT_START_CYCLES: u32 = 10 + 6;
/// S2MM: the stream's first beat to the memory write (PG021).
pub const S2MM_WRITE_CYCLES: u32 = 39;

impl Clock {
    /// Time to stream `bytes`.
    pub fn duration(&self, bytes: usize) -> Duration {
        match *self {
            Clock::Unlimited => Duration::ZERO,
            Clock::Rate {
                mhz,
                bytes_per_cycle,
            } => Duration::from_secs_f64(bytes as f64 / (mhz * 1e6 * bytes_per_cycle)),
        }
    }

    /// Time of `n` cycles of this clock (none when unlimited).
    pub fn cycles(&self, n: u32) -> Duration {
        match *self {
            Clock::Unlimited => Duration::ZERO,
            Clock::Rate { mhz, .. } => Duration::from_secs_f64(f64::from(n) / (mhz * 1e6)),
        }
    }

    /// MM2S start-up on an idle channel, with scatter-gather (`sg`) or not.
    pub fn mm2s_start(&self, sg: bool) -> Duration {
        self.cycles(if sg {
            MM2S_SG_START_CYCLES
        } else {
            MM2S_DIRECT_START_CYCLES
        })
    }

    /// What the modelled device needs for a transfer of `bytes` each way through
    /// a cut-through core (a loopback) started on idle channels: MM2S start-up,
    /// the data on the link, the S2MM write latency. Software's overhead is what a
    /// measured transfer takes beyond this.
    pub fn two_way(&self, bytes: usize, sg: bool) -> Duration {
        self.mm2s_start(sg) + self.duration(bytes) + self.cycles(S2MM_WRITE_CYCLES)
    }

    /// Bytes per second, or `None` when unlimited.
    pub fn bytes_per_s(&self) -> Option<f64> {
        match *self {
            Clock::Unlimited => None,
            Clock::Rate {
                mhz,
                bytes_per_cycle,
            } => Some(mhz * 1e6 * bytes_per_cycle),
        }
    }
}

/// A board the fabric stands in for: the clock and width of the port between
/// the AXI DMA and memory (the latencies follow in cycles of it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// Short name (`zynq7000`, `zynqmp`).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The DMA's memory-side port.
    pub port: Clock,
}

impl Profile {
    /// Zynq-7000 (Cortex-A9): a 64-bit HP port at 150 MHz, 1200 MB/s.
    pub const ZYNQ7000: Profile = Profile {
        name: "zynq7000",
        description: "Zynq-7000: AXI DMA on a 64-bit HP port at 150 MHz (1200 MB/s)",
        port: Clock::Rate {
            mhz: 150.0,
            bytes_per_cycle: 8.0,
        },
    };
    /// Zynq UltraScale+ MPSoC (Cortex-A53): a 128-bit HP port at 250 MHz,
    /// 4000 MB/s.
    pub const ZYNQMP: Profile = Profile {
        name: "zynqmp",
        description: "Zynq UltraScale+ MPSoC: AXI DMA on a 128-bit HP port at 250 MHz (4000 MB/s)",
        port: Clock::Rate {
            mhz: 250.0,
            bytes_per_cycle: 16.0,
        },
    };

    /// Every profile.
    pub const ALL: [Profile; 2] = [Profile::ZYNQ7000, Profile::ZYNQMP];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg021_latencies_in_time_of_the_port_clock() {
        let hp = Profile::ZYNQ7000.port;
        // 44 cycles at 150 MHz.
        assert!((hp.mm2s_start(true).as_secs_f64() - 44.0 / 150e6).abs() < 1e-9);
        assert!(hp.mm2s_start(false) < hp.mm2s_start(true));
        // 64 B at 1200 MB/s is 53.3 ns (8 cycles); with the latencies a 64-byte
        // two-way transfer needs (44 + 8 + 39) cycles = 606.7 ns.
        let ns = hp.two_way(64, true).as_secs_f64() * 1e9;
        assert!((ns - 606.7).abs() < 2.0, "{ns}");
        assert_eq!(Clock::Unlimited.two_way(1 << 20, true), Duration::ZERO);
        assert_eq!(Profile::ZYNQMP.port.bytes_per_s(), Some(4e9));
    }
}
