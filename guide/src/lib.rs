//! [overview]: crate::overview
//! [queues]: crate::queues
//! [process-networks]: crate::process_networks
//! [board]: crate::board
//! [fabric]: crate::fabric
//! [python]: crate::python
//! [pynq-remote]: crate::pynq_remote
//! [network]: crate::network
//! [tools]: crate::tools
//! [gpu]: crate::gpu
//! [benchmarks]: crate::benchmarks
//! [testing]: crate::testing
//! [layout]: crate::layout
#![doc = include_str!("../../docs/README.md")]

/// One chapter: the module whose documentation is `docs/$file`. The
/// chapters' cross-references are reference links (`[text][fabric]`); the
/// definitions at the bottom of each file point at the `.md` files, and the
/// ones given here first (the first definition wins) point rustdoc at the
/// chapters' modules, so `cargo doc` checks every one.
macro_rules! chapter {
    ($module:ident, $file:literal) => {
        #[doc = "[overview]: crate::overview"]
        #[doc = "[queues]: crate::queues"]
        #[doc = "[process-networks]: crate::process_networks"]
        #[doc = "[board]: crate::board"]
        #[doc = "[fabric]: crate::fabric"]
        #[doc = "[python]: crate::python"]
        #[doc = "[pynq-remote]: crate::pynq_remote"]
        #[doc = "[network]: crate::network"]
        #[doc = "[tools]: crate::tools"]
        #[doc = "[gpu]: crate::gpu"]
        #[doc = "[benchmarks]: crate::benchmarks"]
        #[doc = "[testing]: crate::testing"]
        #[doc = "[layout]: crate::layout"]
        #[doc = ""]
        #[doc = include_str!(concat!("../../docs/", $file))]
        pub mod $module {}
    };
}

chapter!(overview, "overview.md");
chapter!(queues, "queues.md");
chapter!(process_networks, "process-networks.md");
chapter!(board, "board.md");
chapter!(fabric, "fabric.md");
chapter!(python, "python.md");
chapter!(pynq_remote, "pynq-remote.md");
chapter!(network, "network.md");
chapter!(tools, "tools.md");
chapter!(gpu, "gpu.md");
chapter!(benchmarks, "benchmarks.md");
chapter!(testing, "testing.md");
chapter!(layout, "layout.md");

/// The README's Rust examples, compiled and run as doctests (not rendered).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
