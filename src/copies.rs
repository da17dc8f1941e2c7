//! Payload bytes the library copies with the CPU, counted per thread: every
//! copy of a stream's data that dmaflow makes on a caller's behalf (into a
//! queue with `write`, into and out of DMA buffers in standard I/O, a packet
//! ring's `send` and `recv`, the background-subtraction coprocessor's frames
//! and masks, an accelerator node closing a gap) goes through `copy` or
//! `count`, so that what a pipeline copies is measured rather than worked
//! out. Copies a caller makes itself into a slice it was lent (`reserve`,
//! `send_with`) are the caller's and are not counted.

use std::cell::Cell;

thread_local! {
    static COPIED: Cell<u64> = const { Cell::new(0) };
}

/// Payload bytes the library has copied on the calling thread since the
/// thread started. Take it before and after a piece of work: the difference
/// is what that work copied.
pub fn on_this_thread() -> u64 {
    COPIED.with(Cell::get)
}

/// Counts `bytes` copied on this thread by a copy made in place (one that
/// [`copy`] cannot express, such as a move within a slice).
pub(crate) fn count(bytes: usize) {
    COPIED.with(|c| c.set(c.get().wrapping_add(bytes as u64)));
}

/// Copies `src` into `dst` (of the same length), counted.
pub(crate) fn copy<T: Copy>(dst: &mut [T], src: &[T]) {
    dst.copy_from_slice(src);
    count(std::mem::size_of_val(src));
}

/// Copies `items` into a queue end in pieces of at most `capacity` items:
/// `reserve(q, n)` lends `n` free slots, `commit(q, n)` publishes them.
pub(crate) fn write_in_pieces<Q, T: Copy, E>(
    q: &mut Q,
    mut items: &[T],
    capacity: usize,
    reserve: fn(&mut Q, usize) -> Result<&mut [T], E>,
    commit: fn(&mut Q, usize) -> Result<(), E>,
) -> Result<(), E> {
    while !items.is_empty() {
        let n = items.len().min(capacity.max(1));
        copy(reserve(q, n)?, &items[..n]);
        commit(q, n)?;
        items = &items[n..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_counted_in_bytes_on_their_own_thread() {
        let before = on_this_thread();
        let mut dst = [0u32; 8];
        copy(&mut dst, &[7u32; 8]);
        assert_eq!(dst, [7; 8]);
        assert_eq!(on_this_thread() - before, 32);
        let other = std::thread::spawn(|| {
            copy(&mut [0u8; 5], &[1u8; 5]);
            on_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!(other, 5);
        assert_eq!(on_this_thread() - before, 32, "another thread's copies");
    }
}
