//! `dmaflow serve` (a PYNQ.remote server over the emulated board or a real
//! one) and `dmaflow overlay export` (the `.bit`/`.hwh` pair PYNQ loads for an
//! emulated design).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use dmaflow::platform::MemoryModel;
use dmaflow_remote::{EMULATED_DDR_BYTES, Limits, Options, Server, Target};

/// Arguments of `dmaflow serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. PYNQ's client connects to port 7967 of the
    /// address in PYNQ_REMOTE_DEVICES; any address but loopback lets every
    /// machine that reaches it drive the board.
    #[arg(long, default_value = dmaflow_remote::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Emulate this design (a Vivado hardware handoff) instead of dmaflow's
    /// own: each AXI DMA at its address with its own parameters, streams
    /// looped back; other IP as plain memory. Loaded whatever bitstream PYNQ
    /// downloads.
    #[arg(long, value_name = "FILE")]
    pub hwh: Option<PathBuf>,
    /// Serve a real board (UIO and u-dma-buf under ROOT, `/` on the board)
    /// instead of the emulated one.
    #[arg(long, value_name = "ROOT")]
    pub board: Option<PathBuf>,
    /// The u-dma-buf buffers come from, with --board.
    #[arg(long, default_value = "udmabuf0")]
    pub udmabuf: String,
    /// The emulated board's CPU caches.
    #[arg(long, default_value = "coherent", value_parser = crate::choice(&[
        ("coherent", "Coherent with the device: `flush()`/`invalidate()` change nothing", MemoryModel::Coherent),
        ("noncoherent", "Apart from DRAM: a missing `flush()`/`invalidate()` shows as stale data", MemoryModel::NonCoherent),
    ]))]
    pub memory: MemoryModel,
    /// Connections served at once; more are closed as soon as accepted.
    #[arg(long, default_value_t = dmaflow_remote::DEFAULT_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds a new connection may take to open HTTP/2 before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = dmaflow_remote::DEFAULT_HANDSHAKE.as_secs_f64())]
    pub handshake_timeout: f64,
    /// DMA memory one client may hold in buffers (bytes; K, M, G suffixes
    /// for KiB, MiB, GiB).
    #[arg(long, value_name = "BYTES", default_value = "128M", value_parser = bytes)]
    pub client_dma_memory: usize,
    /// DMA memory all clients together may hold (default: all the board's).
    #[arg(long, value_name = "BYTES", value_parser = bytes)]
    pub max_dma_memory: Option<usize>,
    /// Data one client may have in flight: uploads not yet finished, reads
    /// not yet taken.
    #[arg(long, value_name = "BYTES", default_value = "80M", value_parser = bytes)]
    pub client_in_flight: usize,
    /// Data all clients together may have in flight.
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = bytes)]
    pub max_in_flight: usize,
}

/// A byte count: digits, then K, M or G for KiB, MiB or GiB.
fn bytes(s: &str) -> Result<usize, String> {
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 10),
        Some((i, 'M' | 'm')) => (&s[..i], 20),
        Some((i, 'G' | 'g')) => (&s[..i], 30),
        _ => (s, 0),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?} is not a byte count (digits, then K, M or G)"))
}

/// `dmaflow overlay ...`.
#[derive(Debug, Subcommand)]
pub enum OverlayCommand {
    /// Write DESIGN.bit and DESIGN.hwh for an emulated design (loopback,
    /// loopback-sg, fir, bgsub) into DIR: `Overlay("DIR/DESIGN.bit")` in
    /// PYNQ loads it from a `dmaflow serve` board.
    Export {
        /// The emulated design.
        design: String,
        /// Where to write the pair.
        dir: PathBuf,
    },
}

/// Runs `dmaflow serve` until the process is stopped.
pub fn run(args: ServeArgs) -> ExitCode {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    let served = rt
        .map_err(crate::status(1))
        .and_then(|rt| rt.block_on(serve(args)));
    crate::finish("serve", served, |()| {})
}

/// Binds the server (status 2 where it cannot), says what it serves, and
/// serves.
async fn serve(args: ServeArgs) -> Result<(), (u8, String)> {
    let (target, what) = match args.board {
        Some(root) => {
            let (memory, hwh) = (args.udmabuf, args.hwh);
            (Target::Board { root, memory, hwh }, "board")
        }
        None => {
            let (hwh, model) = (args.hwh, args.memory);
            (Target::Emulated { hwh, model }, "emulated board")
        }
    };
    if args.max_connections == 0 {
        return Err((2, "--max-connections 0: at least one".into()));
    }
    if !(args.handshake_timeout > 0.0 && args.handshake_timeout < 1e6) {
        return Err((
            2,
            format!(
                "--handshake-timeout {}: seconds above 0",
                args.handshake_timeout
            ),
        ));
    }
    let limits = Limits {
        connections: args.max_connections,
        handshake: std::time::Duration::from_secs_f64(args.handshake_timeout),
        client_dma: args.client_dma_memory,
        total_dma: args.max_dma_memory.unwrap_or(usize::MAX),
        client_in_flight: args.client_in_flight,
        total_in_flight: args.max_in_flight,
    };
    let options = Options {
        listen: args.listen,
        target,
        ddr_bytes: EMULATED_DDR_BYTES,
        limits,
    };
    let server = Server::bind(options).await.map_err(crate::status(2))?;
    let design = server.service().design();
    let addr = server.local_addr().unwrap_or(args.listen);
    println!(
        "dmaflow serve: PYNQ.remote on {addr}, {what}, design {:?} ({} IP)",
        design.name,
        design.ips.len()
    );
    for ip in &design.ips {
        let mode = ip.dma.map_or(String::new(), |d| {
            let (sg, width) = (d.params.include_sg, d.params.sg_length_width);
            let how = if sg { "scatter-gather" } else { "direct" };
            format!(" AXI DMA, {how}, {width}-bit length")
        });
        let (name, base, range) = (&ip.name, ip.base, ip.range);
        println!("  {name} at {base:#x} ({range:#x} bytes){mode}");
    }
    for n in server.service().notes() {
        println!("  note: {n}");
    }
    if !addr.ip().is_loopback() {
        println!(
            "  warning: {addr} is not loopback: whoever reaches it drives the board (no authentication)"
        );
    }
    println!(
        "  PYNQ: PYNQ_REMOTE_DEVICES={} (port {} is PYNQ's)",
        addr.ip(),
        addr.port()
    );
    let served = server.serve(std::future::pending()).await;
    served.map_err(crate::status(1))
}

/// Runs `dmaflow overlay ...`.
pub fn overlay(cmd: OverlayCommand) -> ExitCode {
    let OverlayCommand::Export { design, dir } = cmd;
    let done = dmaflow_remote::hwh::export(&design, &dir).map_err(|e| match e {
        dmaflow_remote::Error::UnknownDesign(_) => (2, e.to_string()),
        _ => (1, e.to_string()),
    });
    crate::finish("overlay export", done, |()| {
        println!("{}/{design}.bit and {design}.hwh written", dir.display());
    })
}
