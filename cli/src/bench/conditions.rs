//! What each experiment's numbers are, in four lines: what is timed, what
//! the comparison point is, which figures are the model's (a number the
//! emulator's configuration guarantees is never a target), and where the
//! conditions differ from the paper the experiment follows, and why. The
//! report prints them under each experiment's heading.

/// The four lines of one experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conditions {
    /// What is timed, from where to where.
    pub timed: &'static str,
    /// What it is compared with.
    pub against: &'static str,
    /// Which figures are the model's, not dmaflow's.
    pub model: &'static str,
    /// Where this run's conditions differ from the paper's, and why.
    pub paper: &'static str,
}

impl Conditions {
    /// The lines as text, one per line, each with its label.
    pub fn lines(&self) -> String {
        format!(
            "timed: {}\ncompared with: {}\nthe model's: {}\nagainst the paper: {}\n",
            self.timed, self.against, self.model, self.paper
        )
    }
}

/// The conditions every DMA experiment shares.
const USER_X86: &str = "a user-space driver on an x86-64 VM with two cores (the papers ran \
    bare metal or a Linux kernel driver on a Zynq-7000's Cortex-A9), and a coherent emulated \
    board unless --memory noncoherent";

/// The conditions of `experiment`, if it has any to state.
pub fn of(experiment: &str) -> Option<Conditions> {
    Some(match experiment {
        "ring" => Conditions {
            timed: "from the first worker thread's start to the last one's end, each \
                    instant read on its own thread",
            against: "rtrb, ringbuf, vmcircbuffer (lock-free) and crossbeam-channel on equal \
                      terms, and a no-queue bound (the same work, no hand-over)",
            model: "none: every figure is the queues' own",
            paper: "paper 001 measured its queue inside an FFT filter, not alone; threads are \
                    pinned to this VM's two cores",
        },
        "readers" => Conditions {
            timed: "from the first thread's start to the last thread's end",
            against: "vmcircbuffer's lock-free SPMC buffer here, and GNU Radio 4's published \
                      bm_Buffer figures (another CPU, not measured here)",
            model: "none",
            paper: "GNU Radio 4 ran on a many-core desktop; here five threads share two cores",
        },
        "fir" => Conditions {
            timed: "one thread's loop over the whole signal (bare, bare-copy), or the graph's \
                    run from start to its last node's end (zerocopy, copy); against GNU Radio \
                    both sides alike: filter and FFT plans made before, queues or buffers \
                    made, threads started, run and joined inside",
            against: "the manual copy of the overlap (paper 001's standard method), \
                      interleaved pair by pair; GNU Radio's fft_filter_fff at each side's \
                      default FFT length and at the other's, outputs checked against one f64 \
                      reference",
            model: "none: MFLOPS is the paper's nominal count over measured time",
            paper: "paper 001 ran one thread on a PowerPC 970 and an Opteron; this x86 core has \
                    1 MiB of L2, so the copy is cheaper next to the transforms",
        },
        "sched" => Conditions {
            timed: "each runtime's run of its assembled flowgraph to the end (dmaflow \
                    Graph::run with its threads or workers started inside, FutureSDR \
                    Runtime::run, GNU Radio top_block.run), with the process's CPU time over \
                    the same span",
            against: "FutureSDR 0.8.0 (its default runtime and blocks with 64 KiB buffers, \
                      and a CopyRand block drawing from the same generator as dmaflow's random \
                      copies; built in its own directory) and GNU Radio 3.10 from Python \
                      (copy and fir_filter_fff, fft_filter_fff as a second row; its default \
                      64 KiB buffers), runtimes taking turns round by round, every sink's \
                      count checked",
            model: "none: every figure is the runtimes' own",
            paper: "FutureSDR's perf/null_rand and perf/fir shape (random copies of up to 128 \
                    items per call as there, and plain copies; here on a VM's two cores, there \
                    many)",
        },
        "transfer" => Conditions {
            timed: "the stream of packets from the first send to the last packet received, on \
                    the driver's thread",
            against: "the modelled link (share of the modelled link) and the copying path",
            model: "the link rate, PG021's latencies and model_us: a stream at 100 % of the \
                    link is what the emulator's clock allows, the overhead beside it is dmaflow's",
            paper: USER_X86,
        },
        "twoway" => Conditions {
            timed: "each two-way transfer from the call to its return (median of 1000 per \
                    size); issue: programming every engine, timed on its own",
            against: "the modelled device time (paper 000's ideal 95.37 MiB/s) and each driver \
                      against polling",
            model: "model_us and the ideal throughput; the emulated coprocessor streams \
                    cut-through",
            paper: USER_X86,
        },
        "loopback" => Conditions {
            timed: "each two-way transfer from the call to its return; TX and RX from their own \
                    starts; the modes in turns, five rounds per size",
            against: "the modelled device (model_us) and polling's CPU",
            model: "model_us: PG021's latencies and the HP port's clock; overhead_us also holds \
                    the emulator's own work, which the bare rows (the thinnest driver on the same \
                    fabric) measure: over_bare_us is dmaflow's",
            paper: USER_X86,
        },
        "bgsub" => Conditions {
            timed: "each frame from the call to the mask in the caller's buffer, software and \
                    fabric in turns frame by frame",
            against: "the software implementation on this CPU and the modelled fabric's bound",
            model: "model_us (two 100 MB/s streams side by side); the emulated core computes on \
                    this host",
            paper: USER_X86,
        },
        "cnn" => Conditions {
            timed: "each layer's transfers and each frame from the first send to the last \
                    answer",
            against: "the completion modes, and the modelled link",
            model: "model_us: the link and the core's compute, modelled as NullHop's 128 MACs \
                    per cycle at an assumed 100 MHz; TX us/byte restates 1 / the link rate",
            paper: USER_X86,
        },
        "contention" => Conditions {
            timed: "the application's passes over a fixed time beside back-to-back transfers, \
                    against its passes alone just before",
            against: "the application alone on the same core",
            model: "model_us",
            paper: "this measures the Linux scheduler sharing one core between the driver and \
                    the application, not the papers' memory-bandwidth contention (that is \
                    `memory`)",
        },
        "memory" => Conditions {
            timed: "back-to-back two-way transfers over a fixed time on the driver's thread; \
                    the application's units of work over the same time, and alone just before",
            against: "the same transfers beside a cache-resident filter (the same sharing of \
                      the core, no memory traffic) and beside nothing; the triad alone",
            model: "model MB/s at the port's clock; the unlimited rows are this machine's own \
                    memory (the emulated device copies through it)",
            paper: "papers 002 and 004 contend on a Zynq's DDR controller and the ACP; here a \
                    VM's DRAM and shared last-level cache, and on two cores the application \
                    shares the driver's core (the filter rows carry that sharing)",
        },
        "pipeline" => Conditions {
            timed: "the graph's run from start to its last node's end",
            against: "a copying pipeline on the same footing (FIR: the same scatter-gather \
                      engine and windows in flight, through a packet ring's standard I/O; \
                      bgsub: one frame at a time in both, as its background requires) and the \
                      modelled link; copied bytes counted where the library copies",
            model: "link_share and model_mb_per_s are the modelled link's; core_mb_per_s is the \
                    emulated core's own compute on this host",
            paper: USER_X86,
        },
        "faults" => Conditions {
            timed: "nothing: every figure is a count (transfers, faults injected, recovered, \
                    late writes)",
            against: "what every safe API must guarantee: nothing delivered wrong, no late \
                      write, no hang",
            model: "the injected faults",
            paper: "no paper measures this",
        },
        "net" => Conditions {
            timed: "the receiver from its first data to its last (GNU Radio's receiver: its \
                    sink's count looked at every 0.5 ms); CPU the receiving process's",
            against: "bare PUSH/PULL of the same libzmq (the ceiling), and GNU Radio's \
                      push_sink -> pull_source, lean (what each point does is in its row), at \
                      GNU Radio's own message size, with both crossed edges",
            model: "none",
            paper: "gr-zeromq over loopback TCP on one two-core machine, every process sharing \
                    the two cores",
        },
        "gpu" => Conditions {
            timed: "each point's transfers from the first call to the last return on the \
                    waiting thread (wall), each copy by the device's own events queued \
                    behind a holding kernel as the ceiling's are (h2d, d2h; in extra \
                    transfers) and as the host submits them (h2d/d2h submitted: a small \
                    copy's submission inside), process CPU time (the waiter and the \
                    driver's threads included)",
            against: "the copy engines' ceiling measured in the same run (copies queued \
                      behind a kernel holding the stream, as nvbandwidth does), and the CPU \
                      references of every kernel",
            model: "none: a GPU is real hardware, every figure is measured",
            paper: "the papers' questions on a PCIe GPU instead of a Zynq's AXI DMA: copy \
                    engines for MM2S and S2MM, pinned memory for the DMA buffers",
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_says_what_its_numbers_are() {
        for e in super::super::report::ORDER {
            let c = of(e).unwrap_or_else(|| panic!("{e} says nothing"));
            let text = c.lines();
            assert_eq!(text.lines().count(), 4, "{e}");
            assert!(
                text.contains("timed: ") && text.contains("the model's: "),
                "{e}"
            );
        }
        assert!(of("nothing").is_none());
    }
}
