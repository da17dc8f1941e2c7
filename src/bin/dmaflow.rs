//! The `dmaflow` command-line tool.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use dmaflow::bench;

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
    ///         case (stream|window|window-copy), batch_bytes, gbytes_per_s (10^9 B/s, median)
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
}

fn run_ring(quick: bool, json: bool) -> Result<(), dmaflow::Error> {
    let cfg = if quick {
        bench::ring::Config::quick()
    } else {
        bench::ring::Config::full()
    };
    let rows = bench::ring::run(&cfg, |msg| {
        if !json {
            eprint!("\r\x1b[2K{msg}");
        }
    })?;
    if json {
        println!("{}", bench::ring::json(&rows));
    } else {
        eprint!("\r\x1b[2K");
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Fir {
        taps,
        input,
        output,
        fft,
    } = &cli.command
    {
        return match dmaflow::dsp::fir::filter_file(
            taps,
            input,
            output,
            *fft,
            dmaflow::dsp::fir::Mode::ZeroCopy,
        ) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("dmaflow fir: {e}");
                ExitCode::from(if e.is_bad_input() { 2 } else { 1 })
            }
        };
    }
    let result = match cli.command {
        Command::Bench {
            experiment,
            quick,
            json,
        } => match experiment {
            Experiment::All | Experiment::Ring => run_ring(quick, json),
        },
        Command::Fir { .. } => Ok(()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dmaflow: {e}");
            ExitCode::FAILURE
        }
    }
}
