//! Another program loading one core, as a shared machine has: a thread that
//! spins until dropped, free to run on any of the given cores, so the
//! scheduler places it as it would another process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::Error;

/// A busy thread; stops when dropped.
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Load {
    /// Starts one spinning thread allowed on `cores` (the scheduler picks).
    pub fn one_core(cores: &[usize]) -> Result<Self, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let cores = cores.to_vec();
        let thread = std::thread::Builder::new()
            .name("dmaflow-load".into())
            .spawn(move || {
                // Best effort: a load the scheduler cannot move is still a load.
                let _ = dmaflow::platform::cpu::pin(None, &cores);
                let mut n = 0u64;
                while !flag.load(Ordering::Relaxed) {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
                n
            })
            .map_err(|source| Error::Io {
                path: "load thread".into(),
                source,
            })?;
        Ok(Load {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_spins_until_dropped() {
        let cores = dmaflow::platform::cpu::allowed_cores(None).unwrap();
        let mut load = Load::one_core(&cores).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        load.stop.store(true, Ordering::Relaxed);
        let spins = load.thread.take().unwrap().join().unwrap();
        assert!(spins > 1000, "{spins}");
    }
}
