//! Copies between private memory and memory another agent may write at the
//! same time (a device, or a program's other thread writing a buffer the
//! device owns): each byte one of the values it held, never a data race in
//! Rust's sense.

/// Copies `len` bytes from `src` to `dst` with one `rep movsb`: an assembly
/// block the compiler cannot see into, so memory another thread writes
/// meanwhile is read as the hardware reads it (each byte one of the values
/// it held), as fast as `memcpy` on CPUs with fast string moves.
///
/// # Safety
///
/// Both ranges are mapped (`dst` writable) for the call; `dst` may be
/// written by nobody else in Rust's sense (it is ours, or shared memory the
/// device owns).
#[cfg(target_arch = "x86_64")]
unsafe fn move_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's promise on both ranges; the direction flag is
    // clear at every call (the ABI's promise), and `rep movsb` touches no
    // other state than the three registers named.
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rcx") len => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack, preserves_flags)
        );
    }
}

/// Copies `dst.len()` bytes from `src`. The CPU may be writing the same
/// bytes at the same time (a program that writes a buffer the device owns,
/// as PYNQ allows): the device's copy then races with it as hardware does,
/// each byte one of the values it held, and never a data race in Rust's
/// sense (an assembly string move on x86_64; elsewhere relaxed atomic
/// accesses, whole aligned words and single bytes at the ends).
///
/// # Safety
///
/// `src..src + dst.len()` is mapped and stays so for the call.
pub(crate) unsafe fn copy_from_shared(src: *const u8, dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's promise for `src`; `dst` is ours.
        unsafe { move_bytes(src, dst.as_mut_ptr(), dst.len()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: passed on.
    unsafe {
        copy_from_shared_atomic(src, dst)
    };
}

/// [`copy_from_shared`] with relaxed atomic accesses.
///
/// # Safety
///
/// As [`copy_from_shared`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
unsafe fn copy_from_shared_atomic(src: *const u8, dst: &mut [u8]) {
    use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
    let len = dst.len();
    let head = src.align_offset(8).min(len);
    let words = (len - head) / 8;
    for (i, d) in dst[..head].iter_mut().enumerate() {
        // SAFETY: in the mapped range (the caller's promise); any address is
        // aligned for a byte.
        *d = unsafe { AtomicU8::from_ptr(src.add(i).cast_mut()) }.load(Relaxed);
    }
    for w in 0..words {
        let at = head + 8 * w;
        // SAFETY: in the mapped range, and 8-byte aligned (`head` aligned it).
        let v = unsafe { AtomicU64::from_ptr(src.add(at).cast::<u64>().cast_mut()) }.load(Relaxed);
        dst[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
    for (i, d) in dst.iter_mut().enumerate().skip(head + 8 * words) {
        // SAFETY: as for the head.
        *d = unsafe { AtomicU8::from_ptr(src.add(i).cast_mut()) }.load(Relaxed);
    }
}

/// Copies `src` to the shared memory at `dst`, as [`copy_from_shared`]
/// reads.
///
/// # Safety
///
/// `dst..dst + src.len()` is mapped writable and stays so for the call.
pub(crate) unsafe fn copy_to_shared(src: &[u8], dst: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's promise for `dst`; `src` is ours.
        unsafe { move_bytes(src.as_ptr(), dst, src.len()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: passed on.
    unsafe {
        copy_to_shared_atomic(src, dst)
    };
}

/// [`copy_to_shared`] with relaxed atomic accesses.
///
/// # Safety
///
/// As [`copy_to_shared`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
unsafe fn copy_to_shared_atomic(src: &[u8], dst: *mut u8) {
    use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
    let len = src.len();
    let head = dst.align_offset(8).min(len);
    let words = (len - head) / 8;
    for (i, &b) in src[..head].iter().enumerate() {
        // SAFETY: in the mapped range (the caller's promise).
        unsafe { AtomicU8::from_ptr(dst.add(i)) }.store(b, Relaxed);
    }
    for w in 0..words {
        let at = head + 8 * w;
        let mut v = [0u8; 8];
        v.copy_from_slice(&src[at..at + 8]);
        // SAFETY: in the mapped range, and 8-byte aligned.
        unsafe { AtomicU64::from_ptr(dst.add(at).cast::<u64>()) }
            .store(u64::from_ne_bytes(v), Relaxed);
    }
    for (i, &b) in src.iter().enumerate().skip(head + 8 * words) {
        // SAFETY: as for the head.
        unsafe { AtomicU8::from_ptr(dst.add(i)) }.store(b, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_copies_move_every_byte_at_every_alignment() {
        let src: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        for start in 0..9 {
            for len in 0..70 {
                let mut out = vec![0u8; len];
                // SAFETY: within `src`.
                unsafe { copy_from_shared(src.as_ptr().add(start), &mut out) };
                assert_eq!(out, src[start..start + len], "read {start}+{len}");
                let mut dst = vec![0xAAu8; 100];
                // SAFETY: within `dst`.
                unsafe { copy_to_shared(&src[..len], dst.as_mut_ptr().add(start)) };
                assert_eq!(&dst[start..start + len], &src[..len], "write {start}+{len}");
                assert!(dst[..start].iter().all(|&b| b == 0xAA), "nothing before");
                assert!(
                    dst[start + len..].iter().all(|&b| b == 0xAA),
                    "nothing after"
                );
            }
        }
    }
}
