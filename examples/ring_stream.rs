//! One row of `dmaflow bench ring` alone, for `perf`: a stream of `f32`
//! items in batches of BATCH bytes through a queue of 256 KiB, the writer
//! and the reader pinned to the first two cores allowed, the reader taking
//! whatever is readable, both sides waiting as WAIT says.
//!
//! ```text
//! cargo run --release --example ring_stream -- [BATCH] [MIB] [spin|yield|block]
//! perf record -F 4999 -e cpu-clock target/release/examples/ring_stream 64 256 yield
//! ```

use std::time::Instant;

use dmaflow::platform::cpu::{allowed_cores, pin};
use dmaflow::ring::{Builder, Calibration, Wait};

fn pin_to(i: usize) {
    let cores = allowed_cores(None).unwrap_or_default();
    if let Some(&c) = cores.get(i % cores.len().max(1)) {
        let _ = pin(None, &[c]);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let batch_bytes: usize = args.get(1).map_or(Ok(64), |a| a.parse())?;
    let mib: usize = args.get(2).map_or(Ok(256), |a| a.parse())?;
    let wait = match args.get(3).map_or("yield", String::as_str) {
        "spin" => Wait::Spin,
        "yield" => Wait::Yield,
        "block" => Wait::Block,
        other => return Err(format!("wait {other:?}: spin, yield or block").into()),
    };
    let batch = (batch_bytes / 4).max(1);
    let batches = (mib << 20) / 4 / batch;
    let cal = Calibration::get();
    let (mut w, mut r) = Builder::<f32>::new((256 << 10) / 4).wait(wait).build()?;
    let t0 = Instant::now();
    let sum = std::thread::scope(|s| {
        s.spawn(move || {
            pin_to(0);
            for b in 0..batches {
                let slots = w.reserve(batch).expect("reserve");
                for (k, x) in slots.iter_mut().enumerate() {
                    *x = f32::from_bits((b * batch + k) as u32);
                }
                w.commit(batch).expect("commit");
            }
        });
        s.spawn(move || {
            pin_to(1);
            let (mut sum, mut peeks) = (0u32, 0u64);
            loop {
                let items = r.peek(1).expect("peek");
                if items.is_empty() {
                    break (sum, peeks);
                }
                peeks += 1;
                sum = items.iter().fold(sum, |a, x| a.wrapping_add(x.to_bits()));
                let n = items.len();
                r.consume(n).expect("consume");
            }
        })
        .join()
        .expect("reader")
    });
    let secs = t0.elapsed().as_secs_f64();
    let items = (batches * batch) as u64;
    let expected = (0..items).fold(0u32, |a, k| a.wrapping_add(k as u32));
    if sum.0 != expected {
        return Err(format!("checksum {} != {expected}", sum.0).into());
    }
    println!(
        "{batch_bytes} B batches, {wait:?}: {:.2} GB/s, {:.1} items per peek \
         (yield {:?}, wake-up {:?} as calibrated)",
        (items * 4) as f64 / secs / 1e9,
        items as f64 / sum.1 as f64,
        cal.yield_cost,
        cal.wake_cost,
    );
    Ok(())
}
