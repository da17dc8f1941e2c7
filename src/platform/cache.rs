//! CPU cache maintenance by virtual address, from user space, where the CPU allows
//! it: no system call per operation (paper 004's point: cache control through the
//! kernel is what costs). Where it does not (ARMv7 keeps these operations for the
//! kernel), the functions say so and the caller falls back to its platform's own
//! mechanism (u-dma-buf's sysfs sync).

/// Which cache operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Write dirty lines back to memory (before the device reads).
    Clean,
    /// Write back and drop lines, so the next CPU read fetches what the device
    /// wrote (before the device writes, and before the CPU reads).
    CleanInvalidate,
}

/// Whether [`maintain`] works on this CPU from user space.
pub fn available() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
}

/// Applies `op` to every cache line that overlaps `base..base + len`, then waits
/// for the operations to complete. Returns `false`, doing nothing, where the CPU
/// does not allow it from user space ([`available`]).
///
/// Only the addresses are used: lines are named by address and no byte is read or
/// written, so any range is sound to pass; one outside the process's mappings
/// faults like any access would.
pub fn maintain(op: Op, base: *const u8, len: usize) -> bool {
    if len == 0 {
        return available();
    }
    arch::maintain(op, base as usize, len)
}

#[cfg(target_arch = "x86_64")]
mod arch {
    use super::Op;
    use std::sync::OnceLock;

    /// x86-64 has one operation for both: `clflushopt` (or `clflush` on CPUs
    /// without it) writes back and evicts the line; `sfence` orders them.
    pub(super) fn maintain(_op: Op, start: usize, len: usize) -> bool {
        static HAS_CLFLUSHOPT: OnceLock<bool> = OnceLock::new();
        // `__cpuid_count` has no preconditions on x86-64 (CPUID is always present);
        // leaf 7, EBX bit 23 is CLFLUSHOPT.
        let opt = *HAS_CLFLUSHOPT
            .get_or_init(|| std::arch::x86_64::__cpuid_count(7, 0).ebx & (1 << 23) != 0);
        let end = start + len;
        let mut p = start & !63;
        while p < end {
            if opt {
                // SAFETY: clflushopt exists on this CPU (checked above); it changes
                // no memory contents, only where they are cached.
                unsafe {
                    std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
                };
            } else {
                // SAFETY: as above; clflush is part of SSE2, present on every x86-64.
                unsafe { std::arch::x86_64::_mm_clflush(p as *const u8) };
            }
            p += 64;
        }
        // SAFETY: a store fence has no preconditions; it orders the flushes above.
        unsafe { std::arch::x86_64::_mm_sfence() };
        true
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    use super::Op;

    /// Smallest data cache line, from CTR_EL0.DminLine (log2 of words).
    fn line() -> usize {
        let ctr: u64;
        // SAFETY: reading CTR_EL0 has no side effects; Linux lets EL0 read it
        // (SCTLR_EL1.UCT, or by emulating the trap).
        unsafe { core::arch::asm!("mrs {0}, ctr_el0", out(reg) ctr, options(nomem, nostack)) };
        4 << ((ctr >> 16) & 0xF)
    }

    /// `dc cvac` (clean to the point of coherency) or `dc civac` (clean and
    /// invalidate) per line, then `dsb sy`. Linux sets SCTLR_EL1.UCI, which lets
    /// EL0 run both. There is no EL0 invalidate without clean (`dc ivac`); that is
    /// sound for DMA because the driver cleans and invalidates a receive buffer
    /// before the device writes it, so no dirty line is left to write back over
    /// the device's data.
    pub(super) fn maintain(op: Op, start: usize, len: usize) -> bool {
        let step = line();
        let end = start + len;
        let mut p = start & !(step - 1);
        while p < end {
            match op {
                // SAFETY: cache maintenance by address changes no memory contents;
                // an address outside the process's mappings faults as an access
                // would.
                Op::Clean => unsafe {
                    core::arch::asm!("dc cvac, {0}", in(reg) p, options(nostack, preserves_flags))
                },
                // SAFETY: as above.
                Op::CleanInvalidate => unsafe {
                    core::arch::asm!("dc civac, {0}", in(reg) p, options(nostack, preserves_flags))
                },
            }
            p += step;
        }
        // SAFETY: a barrier has no operands; it waits for the operations above.
        unsafe { core::arch::asm!("dsb sy", options(nostack, preserves_flags)) };
        true
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    use super::Op;

    /// ARMv7 and others: cache maintenance by address is privileged.
    pub(super) fn maintain(_op: Op, _start: usize, _len: usize) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_leaves_the_bytes_as_they_were() {
        let v: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let want = v.clone();
        for op in [Op::Clean, Op::CleanInvalidate] {
            assert_eq!(maintain(op, v.as_ptr(), v.len()), available());
            // A range that starts and ends inside lines.
            assert_eq!(maintain(op, v[3..].as_ptr(), 130), available());
        }
        assert_eq!(v, want);
    }
}
