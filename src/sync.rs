//! Synchronisation primitives behind one shim, so that the `loom` model checker can
//! swap in its own versions (build with `RUSTFLAGS="--cfg dmaflow_loom"`).

#[cfg(dmaflow_loom)]
pub(crate) use loom::{
    hint::spin_loop,
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence},
    },
    thread::yield_now,
};

#[cfg(not(dmaflow_loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::{
        Arc, Condvar, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence},
    },
    thread::yield_now,
};

/// Locks a mutex, ignoring poisoning: every mutex here guards data that a panicking
/// holder cannot leave half-updated (plain assignments only).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(dmaflow_loom)]
    {
        m.lock().unwrap()
    }
    #[cfg(not(dmaflow_loom))]
    {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Waits on a condition variable, ignoring poisoning like [`lock`].
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    #[cfg(dmaflow_loom)]
    {
        cv.wait(g).unwrap()
    }
    #[cfg(not(dmaflow_loom))]
    {
        cv.wait(g)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
