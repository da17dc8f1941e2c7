//! The AXI DMA register map and bit fields (Xilinx PG021). Nothing else in dmaflow
//! spells a register offset or bit as a number.

/// Offset of the MM2S channel's registers.
pub const MM2S: usize = 0x00;
/// Offset of the S2MM channel's registers.
pub const S2MM: usize = 0x30;

/// Channel control register (relative to the channel).
pub const DMACR: usize = 0x00;
/// Channel status register.
pub const DMASR: usize = 0x04;
/// Current descriptor pointer (SG), low and high word.
pub const CURDESC: usize = 0x08;
/// Current descriptor pointer, high word.
pub const CURDESC_MSB: usize = 0x0C;
/// Tail descriptor pointer (SG); writing it starts fetching.
pub const TAILDESC: usize = 0x10;
/// Tail descriptor pointer, high word.
pub const TAILDESC_MSB: usize = 0x14;
/// Source (MM2S SA) or destination (S2MM DA) address, low word.
pub const ADDR: usize = 0x18;
/// Address, high word.
pub const ADDR_MSB: usize = 0x1C;
/// Transfer length in bytes; a non-zero write starts a direct-mode transfer. For
/// S2MM it reads back the bytes actually received.
pub const LENGTH: usize = 0x28;
/// Scatter-gather user and cache control (SG_CTL), one register for both
/// channels, at its own offset (not relative to a channel).
pub const SG_CTL: usize = 0x2C;

/// DMACR: run/stop.
pub const DMACR_RS: u32 = 1 << 0;
/// DMACR: reserved bit 1, which always reads 1.
pub const DMACR_RESERVED_ONE: u32 = 1 << 1;
/// DMACR after a reset: IRQThreshold 1, reserved bit 1 (PG021: 0x0001_0002).
pub const DMACR_RESET_VALUE: u32 = (1 << DMACR_IRQ_THRESHOLD_SHIFT) | DMACR_RESERVED_ONE;
/// DMACR: soft reset (self-clearing; resets both channels).
pub const DMACR_RESET: u32 = 1 << 2;
/// DMACR: keyhole read (MM2S) or write (S2MM): the same address every beat.
pub const DMACR_KEYHOLE: u32 = 1 << 3;
/// DMACR: cyclic BD mode.
pub const DMACR_CYCLIC: u32 = 1 << 4;
/// DMACR: interrupt on complete enable.
pub const DMACR_IOC_IRQ_EN: u32 = 1 << 12;
/// DMACR: interrupt on delay timer enable.
pub const DMACR_DLY_IRQ_EN: u32 = 1 << 13;
/// DMACR: interrupt on error enable.
pub const DMACR_ERR_IRQ_EN: u32 = 1 << 14;
/// DMACR: interrupt threshold field shift (bits 23:16).
pub const DMACR_IRQ_THRESHOLD_SHIFT: u32 = 16;
/// DMACR: interrupt threshold field mask.
pub const DMACR_IRQ_THRESHOLD_MASK: u32 = 0xFF << 16;
/// DMACR: interrupt delay field shift (bits 31:24).
pub const DMACR_IRQ_DELAY_SHIFT: u32 = 24;
/// DMACR: interrupt delay field mask.
pub const DMACR_IRQ_DELAY_MASK: u32 = 0xFF << DMACR_IRQ_DELAY_SHIFT;

/// DMASR: channel halted.
pub const DMASR_HALTED: u32 = 1 << 0;
/// DMASR: channel idle.
pub const DMASR_IDLE: u32 = 1 << 1;
/// DMASR: scatter-gather engine included.
pub const DMASR_SG_INCLD: u32 = 1 << 3;
/// DMASR: DMA internal error.
pub const DMASR_DMA_INT_ERR: u32 = 1 << 4;
/// DMASR: DMA slave error.
pub const DMASR_DMA_SLV_ERR: u32 = 1 << 5;
/// DMASR: DMA decode error.
pub const DMASR_DMA_DEC_ERR: u32 = 1 << 6;
/// DMASR: SG internal error.
pub const DMASR_SG_INT_ERR: u32 = 1 << 8;
/// DMASR: SG slave error.
pub const DMASR_SG_SLV_ERR: u32 = 1 << 9;
/// DMASR: SG decode error.
pub const DMASR_SG_DEC_ERR: u32 = 1 << 10;
/// DMASR: interrupt on complete (write 1 to clear).
pub const DMASR_IOC_IRQ: u32 = 1 << 12;
/// DMASR: interrupt on delay (write 1 to clear).
pub const DMASR_DLY_IRQ: u32 = 1 << 13;
/// DMASR: interrupt on error (write 1 to clear).
pub const DMASR_ERR_IRQ: u32 = 1 << 14;
/// DMASR: the interrupt threshold count still to go (bits 23:16).
pub const DMASR_IRQ_THRESHOLD_STS_MASK: u32 = 0xFF << 16;
/// DMASR: the interrupt delay count (bits 31:24).
pub const DMASR_IRQ_DELAY_STS_MASK: u32 = 0xFF << 24;
/// DMASR: every error bit.
pub const DMASR_ERR_MASK: u32 = 0x770;
/// DMASR: the write-1-to-clear interrupt bits.
pub const DMASR_IRQ_MASK: u32 = DMASR_IOC_IRQ | DMASR_DLY_IRQ | DMASR_ERR_IRQ;

/// SG descriptor alignment.
pub const DESC_ALIGN: u64 = 0x40;
/// Descriptor: next descriptor pointer.
pub const DESC_NXTDESC: u64 = 0x00;
/// Descriptor: next descriptor pointer, high word.
pub const DESC_NXTDESC_MSB: u64 = 0x04;
/// Descriptor: buffer address.
pub const DESC_BUFFER_ADDRESS: u64 = 0x08;
/// Descriptor: buffer address, high word.
pub const DESC_BUFFER_ADDRESS_MSB: u64 = 0x0C;
/// Descriptor: control word (length, TXSOF, TXEOF).
pub const DESC_CONTROL: u64 = 0x18;
/// Descriptor: status word (bytes transferred, RXSOF, RXEOF, errors, Cmplt).
pub const DESC_STATUS: u64 = 0x1C;
/// Descriptor: first of the five application words APP0..APP4.
pub const DESC_APP0: u64 = 0x20;
/// Descriptor control/status: length field mask (bits 25:0).
pub const DESC_LENGTH_MASK: u32 = (1 << 26) - 1;
/// Descriptor control: end of frame.
pub const DESC_CTRL_TXEOF: u32 = 1 << 26;
/// Descriptor control: start of frame.
pub const DESC_CTRL_TXSOF: u32 = 1 << 27;
/// Descriptor status: end of frame received.
pub const DESC_STS_RXEOF: u32 = 1 << 26;
/// Descriptor status: start of frame received.
pub const DESC_STS_RXSOF: u32 = 1 << 27;
/// Descriptor status: internal error.
pub const DESC_STS_INT_ERR: u32 = 1 << 28;
/// Descriptor status: slave error.
pub const DESC_STS_SLV_ERR: u32 = 1 << 29;
/// Descriptor status: decode error.
pub const DESC_STS_DEC_ERR: u32 = 1 << 30;
/// Descriptor status: completed.
pub const DESC_STS_CMPLT: u32 = 1 << 31;
/// Every error bit of a descriptor's status (DMAIntErr, DMASlvErr, DMADecErr).
pub const DESC_STS_ERR_MASK: u32 = DESC_STS_INT_ERR | DESC_STS_SLV_ERR | DESC_STS_DEC_ERR;
