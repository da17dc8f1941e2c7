//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// A small xorshift generator, so each thread or run draws its own sequence.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n` (0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    /// A number in `[-1, 1)`.
    pub fn f32(&mut self) -> f32 {
        self.below(1 << 24) as f32 / (1u32 << 23) as f32 - 1.0
    }

    /// `n` numbers in `[-1, 1)`.
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

/// How long any one graph in a test may take before it counts as hung.
pub const BOUND: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs `g` on a thread of its own and waits for it at most [`BOUND`]: a
/// graph that hangs fails the test instead of stalling it.
pub fn run_within(g: dmaflow::graph::Graph) -> Result<(), dmaflow::graph::Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(g.run());
    });
    match rx.recv_timeout(BOUND) {
        Ok(r) => r,
        Err(_) => panic!("the graph did not end within {BOUND:?}: it hangs"),
    }
}

/// Adds node `name` to `g`: it reads `input` to the end of the stream; the
/// returned vector holds everything it read once the graph has run.
pub fn collect<T: dmaflow::ring::Pod + Send>(
    g: &mut dmaflow::graph::Graph,
    name: &str,
    mut input: dmaflow::graph::Input<T>,
) -> Result<std::sync::Arc<std::sync::Mutex<Vec<T>>>, dmaflow::graph::Error> {
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = got.clone();
    g.node(name, move || {
        let mut all = Vec::new();
        loop {
            let s = input.peek(1)?;
            if s.is_empty() {
                break;
            }
            all.extend_from_slice(s);
            let k = s.len();
            input.consume(k)?;
        }
        *out.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = all;
        Ok(())
    })?;
    Ok(got)
}

/// An emulated board with 8 MiB of DMA memory of `model` (and its cache
/// policy, random eviction on a non-coherent one), an unlimited clock and
/// scatter-gather engines around `core`.
pub fn sg_rig(
    core: Box<dyn dmaflow::sim::StreamProcessor>,
    model: dmaflow::platform::MemoryModel,
) -> dmaflow::rig::Rig {
    let policy = dmaflow::rig::policy_for(model);
    let rig = dmaflow::rig::Rig::with_model(
        8 << 20,
        dmaflow::sim::Clock::Unlimited,
        true,
        policy,
        model,
        core,
    )
    .unwrap();
    rig.board.set_random_eviction(Some(EVICTION_SEED));
    rig
}

/// The seed of the non-coherent boards' random eviction in the tests: every
/// suite on a non-coherent board runs with dirty lines evicted at random.
pub const EVICTION_SEED: u64 = 0x5EED_CAC4E;

/// Register writes for tests that drive the emulated engine by hand, as a
/// driver written elsewhere would.
pub trait Poke {
    /// Writes register `offset`.
    fn poke(&self, offset: usize, value: u32) -> Result<(), dmaflow::platform::Error>;
}

impl<R: dmaflow::platform::RegisterSpace> Poke for R {
    fn poke(&self, offset: usize, value: u32) -> Result<(), dmaflow::platform::Error> {
        // SAFETY: these tests own every buffer they point the emulated engine
        // at (their own pool's buffers, or addresses where the board has no
        // memory) and do not touch them until the engine is done or reset.
        unsafe { self.write(offset, value) }
    }
}

/// A thread node's body that writes `0..n` in pieces of 1 to 64 items (drawn
/// from `seed`), after sleeping `ms` milliseconds.
pub fn count(
    mut out: dmaflow::graph::Output<u32>,
    n: u32,
    seed: u64,
    ms: u64,
) -> dmaflow::graph::NodeResult {
    std::thread::sleep(std::time::Duration::from_millis(ms));
    let mut rng = Rng(seed);
    let mut k = 0;
    while k < n {
        let m = (1 + rng.below(64) as u32).min(n - k);
        out.write(&(k..k + m).collect::<Vec<_>>())?;
        k += m;
    }
    Ok(())
}

/// Sums an input to its end (a task's or `block_on`'s body).
pub async fn sum_to_end(
    inp: &mut dmaflow::graph::Input<u32>,
) -> Result<u64, dmaflow::graph::Error> {
    let mut sum = 0u64;
    loop {
        let s = inp.peek_async(1).await?;
        if s.is_empty() {
            return Ok(sum);
        }
        sum += s.iter().map(|&x| u64::from(x)).sum::<u64>();
        let n = s.len();
        inp.consume(n)?;
    }
}
