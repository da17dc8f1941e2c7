//! The ordering contract between the CPU and a DMA device.
//!
//! A device is another agent on the memory system, and a CPU may reorder its own
//! accesses to normal memory against its accesses to device registers. Every driver
//! in dmaflow keeps two rules, the ones Linux's `dma_wmb()` / `dma_rmb()` state:
//!
//! 1. **Before a doorbell.** Every CPU write to a buffer or descriptor that a
//!    transfer uses (and, on a non-coherent board, its cache clean) is visible to the
//!    device before the register write that hands the work over: direct-mode
//!    `LENGTH`, scatter-gather `TAILDESC`. The driver calls [`dma_wmb`] between them.
//! 2. **After a completion.** Once a completion is observed (DMASR's IOC, or a
//!    descriptor's Cmplt bit) and before the CPU reads what the device wrote (the
//!    data, the rest of the descriptor's status, S2MM's `LENGTH`), the driver calls
//!    [`dma_rmb`].
//!
//! The device side keeps the mirror image: it writes the data before the status
//! that announces it, with release ordering (a real AXI interconnect orders the
//! write responses; the emulated fabric stores status words with `Release`). The
//! driver's [`dma_rmb`] is the acquire that pairs with it, and the device's acquire
//! of a doorbell pairs with [`dma_wmb`].
//!
//! Each barrier is one instruction per architecture (below) plus the language-level
//! fence that makes the pairing hold for the Rust memory model, which is what the
//! emulated device (a thread) relies on.

use std::sync::atomic::{Ordering, fence};

#[cfg(target_arch = "x86_64")]
mod arch {
    //! x86-64: stores are not reordered with older stores and loads are not
    //! reordered with older loads (TSO), and uncached register accesses are not
    //! reordered with cached ones; only the compiler must be stopped, which the
    //! language fences do. Linux's x86 `dma_wmb()`/`dma_rmb()` are compiler
    //! barriers too.

    /// Write barrier: nothing beyond the compiler fence.
    #[inline(always)]
    pub(super) fn wmb() {}

    /// Read barrier: nothing beyond the compiler fence.
    #[inline(always)]
    pub(super) fn rmb() {}
}

#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
mod arch {
    //! AArch64 (Zynq UltraScale+, Cortex-A53) and ARMv7-A (Zynq-7000, Cortex-A9).
    //!
    //! dmaflow's register writes are plain volatile stores, Linux's
    //! `writel_relaxed()`; the barrier before a doorbell is therefore the one
    //! Linux's `writel()` puts in front of its store, not the weaker
    //! `dma_wmb()` between two stores to memory:
    //! - AArch64: `writel()` is `__iowmb()` = `dma_wmb()` = `dmb oshst`, which
    //!   orders normal-memory stores before the Device-memory store.
    //! - ARMv7: `writel()` is `__iowmb()` = `wmb()` = `dsb st` (plus an
    //!   outer-cache sync on systems with a PL310, which only the kernel can
    //!   issue; on Zynq-7000 the u-dma-buf sync that cleans the buffer does the
    //!   outer-cache work in the kernel). A `dmb` orders memory accesses among
    //!   themselves but does not wait for a store to reach a device-visible
    //!   point before the Device-memory store that follows, so ARMv7 uses
    //!   `dsb st`.
    //!
    //! The read barrier after a completion is Linux's `dma_rmb()`: `dmb oshld`
    //! on AArch64; ARMv7 has no load-only barrier, so `dmb osh`.

    /// Before a doorbell: `dmb oshst` (AArch64), `dsb st` (ARMv7).
    #[inline(always)]
    pub(super) fn wmb() {
        #[cfg(target_arch = "aarch64")]
        // SAFETY: a barrier instruction reads and writes no memory and no
        // registers; it only orders the accesses around it.
        unsafe {
            core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
        };
        #[cfg(target_arch = "arm")]
        // SAFETY: as above: a barrier, no memory or register is touched.
        unsafe {
            core::arch::asm!("dsb st", options(nostack, preserves_flags))
        };
    }

    /// `dmb oshld` (AArch64) / `dmb osh` (ARMv7): earlier loads complete before
    /// later loads and stores.
    #[inline(always)]
    pub(super) fn rmb() {
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as in `wmb`.
        unsafe {
            core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
        };
        #[cfg(target_arch = "arm")]
        // SAFETY: as in `wmb`.
        unsafe {
            core::arch::asm!("dmb osh", options(nostack, preserves_flags))
        };
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
mod arch {
    //! Other architectures: the strongest language fence stands in for the
    //! hardware barrier.

    /// Full fence.
    #[inline(always)]
    pub(super) fn wmb() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// Full fence.
    #[inline(always)]
    pub(super) fn rmb() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// Rule 1 of the contract: CPU writes to DMA memory made before this call are
/// visible to the device before any register write made after it (the doorbell).
#[inline]
pub fn dma_wmb() {
    #[cfg(test)]
    count::WMB.with(|c| c.set(c.get() + 1));
    arch::wmb();
    fence(Ordering::Release);
}

/// Rule 2 of the contract: a completion observed before this call (a DMASR or
/// descriptor status read) is ordered before every read of DMA memory after it.
#[inline]
pub fn dma_rmb() {
    #[cfg(test)]
    count::RMB.with(|c| c.set(c.get() + 1));
    fence(Ordering::Acquire);
    arch::rmb();
}

/// Counts of barrier calls on this thread, so tests can check the driver's paths
/// call them (their effect cannot be observed on x86).
#[cfg(test)]
pub(crate) mod count {
    use std::cell::Cell;

    thread_local! {
        pub(crate) static WMB: Cell<u64> = const { Cell::new(0) };
        pub(crate) static RMB: Cell<u64> = const { Cell::new(0) };
    }

    /// (write barriers, read barriers) issued on this thread so far.
    pub(crate) fn get() -> (u64, u64) {
        (WMB.with(Cell::get), RMB.with(Cell::get))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_barriers_of_this_architecture_exist_and_are_counted() {
        let before = count::get();
        // The architecture module's own instructions run (and must not fault).
        arch::wmb();
        arch::rmb();
        dma_wmb();
        dma_rmb();
        dma_rmb();
        let after = count::get();
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 2));
    }
}
