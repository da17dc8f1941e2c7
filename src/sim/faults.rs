//! Faults the emulated fabric can be told to inject, for tests.

use std::time::Duration;

/// Faults to inject, for tests.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Set these DMASR error bits on the next completion of this channel (0 = MM2S).
    pub force_error: Option<(usize, u32)>,
    /// Write these error bits (the descriptor STATUS bits DMAIntErr,
    /// DMASlvErr, DMADecErr) into the next descriptor this channel completes
    /// (0 = MM2S), and halt the channel with the matching DMASR error, as the
    /// IP does when a transfer fails on the AXI bus.
    pub descriptor_error: Option<(usize, u32)>,
    /// Complete but raise no interrupt, once.
    pub drop_irq: bool,
    /// The next transfer stays in progress this much longer: the device thread
    /// stops for this long with the transfer under way, then completes it (writing
    /// its data) before it honours a halt or reset asked for meanwhile.
    pub stall: Option<Duration>,
}
