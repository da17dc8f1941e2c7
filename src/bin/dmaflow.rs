//! The `dmaflow` command-line tool.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use dmaflow::bench;
use dmaflow::dsp::fir;

/// Move streams of data between programs and accelerators, and measure how fast.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the experiments and print their tables.
    ///
    /// JSON rows (--json), one document per experiment:
    ///   ring: impl (dmaflow|rtrb|ringbuf|vmcircbuffer|crossbeam|memcpy),
    ///         case (stream|window|window-copy), batch_bytes,
    ///         gbytes_per_s (10^9 B/s, median)
    ///   fir:  fft_len, overlap_pct, mode (zerocopy|copy|bare), taps,
    ///         mflops (median; 10 N log2 N + 6 N flops per block)
    ///   loopback: completion (poll|yield|irq|proxy), path (zerocopy|copy), bytes,
    ///         median_us (median time of one two-way transfer, unlimited clock)
    #[command(verbatim_doc_comment)]
    Bench {
        /// Which experiment.
        #[arg(value_enum, default_value_t = Experiment::All)]
        experiment: Experiment,
        /// Shorter runs with fewer repetitions.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of tables (no progress output).
        #[arg(long)]
        json: bool,
        /// Directory for plots.
        #[arg(long, default_value = "report")]
        out: PathBuf,
    },
    /// List what is present: UIO devices and u-dma-bufs, and the emulated fabric.
    Info {
        /// Root of the sysfs and /dev tree to look in.
        #[arg(long, default_value = "/")]
        root: PathBuf,
    },
    /// Filter a file of little-endian f32 samples with an FIR filter (overlap-save,
    /// zero-copy, run as a process network: file source -> FIR -> file sink).
    /// Output equals scipy.signal.lfilter(taps, 1.0, x).
    Fir {
        /// File of little-endian f32 filter taps.
        #[arg(long)]
        taps: PathBuf,
        /// File of little-endian f32 input samples.
        #[arg(long)]
        input: PathBuf,
        /// File to write the filtered samples to (only on success).
        #[arg(long)]
        output: PathBuf,
        /// FFT length (a power of two, at least the number of taps).
        #[arg(long = "fft")]
        fft: Option<usize>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Experiment {
    /// Every experiment below.
    All,
    /// Mirrored queue vs other queues, and the sliding-window reader.
    Ring,
    /// Overlap-save FIR filter, zero-copy vs manual copy (paper 001).
    Fir,
    /// Two-way loopback transfers on the emulated fabric (paper 002).
    Loopback,
    /// A stream of packets through a ring of DMA buffers (paper 004).
    Transfer,
}

/// Progress on stderr, unless JSON is asked for.
fn progress(json: bool) -> impl FnMut(&str) {
    move |msg| {
        if !json {
            eprint!("\r\x1b[2K{msg}");
        }
    }
}

fn clear_progress(json: bool) {
    if !json {
        eprint!("\r\x1b[2K");
    }
}

fn run_ring(quick: bool, json: bool) -> Result<(), dmaflow::Error> {
    let cfg = if quick {
        bench::ring::Config::quick()
    } else {
        bench::ring::Config::full()
    };
    let rows = bench::ring::run(&cfg, progress(json))?;
    clear_progress(json);
    if json {
        println!("{}", bench::ring::json(&rows));
    } else {
        println!(
            "ring: {} per measurement, median of {} runs, queue {}",
            bench::bytes_label(cfg.total_bytes),
            cfg.runs,
            bench::bytes_label(cfg.queue_bytes)
        );
        print!("{}", bench::ring::render(&rows));
        print!("{}", bench::ring::summary(&rows));
    }
    Ok(())
}

fn run_fir(quick: bool, json: bool, out: &Path) -> Result<(), dmaflow::Error> {
    let cfg = if quick {
        bench::fir::Config::quick()
    } else {
        bench::fir::Config::full()
    };
    if !json && !quick {
        eprintln!(
            "fir: the full run streams 64 MiB per point and takes several minutes (--quick: under one)"
        );
    }
    let rows = bench::fir::run(&cfg, progress(json))?;
    clear_progress(json);
    std::fs::create_dir_all(out).map_err(|source| bench::Error::Io {
        path: out.display().to_string(),
        source,
    })?;
    let svg = out.join("fir.svg");
    bench::fir::plot(&rows, &svg).map_err(bench::Error::from)?;
    if json {
        println!("{}", bench::fir::json(&rows));
    } else {
        println!(
            "fir: {} samples per point, median of {} runs; MFLOPS = (10 N log2 N + 6 N) per block / time \
             (N log2 N counts complex-FFT flops, as paper 001 does)",
            cfg.samples, cfg.runs
        );
        print!("{}", bench::fir::render(&rows));
        println!("plot: {}", svg.display());
    }
    Ok(())
}

fn run_loopback(quick: bool, json: bool) -> Result<(), dmaflow::Error> {
    let cfg = if quick {
        bench::loopback::Config::quick()
    } else {
        bench::loopback::Config::full()
    };
    let rows = bench::loopback::run(&cfg, progress(json))?;
    clear_progress(json);
    if json {
        println!("{}", bench::loopback::json(&rows));
    } else {
        println!(
            "loopback: two-way transfers on the emulated fabric, unlimited clock, median per transfer"
        );
        print!("{}", bench::loopback::render(&rows));
    }
    Ok(())
}

fn run_transfer(quick: bool, json: bool) -> Result<(), dmaflow::Error> {
    let cfg = if quick {
        bench::transfer::Config::quick()
    } else {
        bench::transfer::Config::full()
    };
    let rows = bench::transfer::run(&cfg, progress(json))?;
    clear_progress(json);
    if json {
        println!("{}", bench::transfer::json(&rows));
    } else {
        println!(
            "transfer: packets through a ring of {} DMA buffers (scatter-gather, polling), median of {} runs",
            cfg.slots, cfg.runs
        );
        print!("{}", bench::transfer::render(&rows));
        print!("{}", bench::transfer::summary(&rows));
    }
    Ok(())
}

fn run_fir_file(taps: &Path, input: &Path, output: &Path, fft: Option<usize>) -> ExitCode {
    match fir::filter_file(taps, input, output, fft, fir::Mode::ZeroCopy) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dmaflow fir: {e}");
            ExitCode::from(if e.is_bad_input() { 2 } else { 1 })
        }
    }
}

fn run_info(root: &Path) -> ExitCode {
    let inv = dmaflow::platform::uio::inventory(root);
    if inv.uio.is_empty() {
        println!(
            "UIO devices: none under {}",
            root.join("sys/class/uio").display()
        );
    }
    for (index, name, size) in &inv.uio {
        println!("UIO device: /dev/uio{index} ({name}), registers {size:#x} bytes");
    }
    if inv.udmabuf.is_empty() {
        println!(
            "u-dma-buf: none under {}",
            root.join("sys/class/u-dma-buf").display()
        );
    }
    for (name, phys, size) in &inv.udmabuf {
        println!("u-dma-buf: /dev/{name}, {size} bytes at physical {phys:#x}");
    }
    match dmaflow::platform::sim::SimBoard::new(
        1,
        dmaflow::platform::sim::DEFAULT_DDR_BYTES,
        dmaflow::platform::sim::DEFAULT_DDR_BASE,
        2,
    ) {
        Ok(_) => println!(
            "sim: emulated AXI DMA (PG021 register map, loopback stream), {} MiB DDR at {:#x}, 2 interrupt lines",
            dmaflow::platform::sim::DEFAULT_DDR_BYTES >> 20,
            dmaflow::platform::sim::DEFAULT_DDR_BASE
        ),
        Err(e) => println!("sim: unavailable: {e}"),
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Info { root } => run_info(&root),
        Command::Bench {
            experiment,
            quick,
            json,
            out,
        } => {
            let result = match experiment {
                Experiment::Ring => run_ring(quick, json),
                Experiment::Fir => run_fir(quick, json, &out),
                Experiment::Loopback => run_loopback(quick, json),
                Experiment::Transfer => run_transfer(quick, json),
                Experiment::All => run_ring(quick, json)
                    .and_then(|()| run_fir(quick, json, &out))
                    .and_then(|()| run_loopback(quick, json)),
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("dmaflow: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Fir {
            taps,
            input,
            output,
            fft,
        } => run_fir_file(&taps, &input, &output, fft),
    }
}
