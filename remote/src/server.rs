//! The network side: a gRPC server on one address (loopback unless told
//! otherwise), every message bounded, each TCP connection numbered so that
//! buffers stay with the client that allocated them and are freed, the
//! device stopped from writing them first, when that client goes.
//!
//! The accept loop never ends while the server serves: connections past
//! [`Limits::connections`] are closed as soon as they are accepted, one that
//! has not opened HTTP/2 within [`Limits::handshake`] is closed, and a failed
//! accept (out of file descriptors, say) is reported on stderr and retried
//! after a pause.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Sleep;
use tonic::transport::server::Connected;

use crate::Error;
use crate::caps::Limits;
use crate::proto::{buffer, gpio, mmio, remote_device};
use crate::service::{Connection, Service};

/// PYNQ.remote's port, on loopback.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7967";
/// Largest message a client may send: PYNQ's client sends buffers and files
/// in 2 MiB chunks.
const MAX_REQUEST: usize = (2 << 20) + 4096;
/// Largest message the server sends (buffers and files go in 2 MiB chunks).
const MAX_REPLY: usize = (2 << 20) + 4096;

/// HTTP/2 flow-control window of a stream.
const WINDOW: u32 = 8 << 20;

/// How to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// The board.
    pub target: crate::Target,
    /// DMA memory of the emulated board, in bytes.
    pub ddr_bytes: usize,
    /// What a client, and all of them, can make the server hold.
    pub limits: Limits,
}

/// HTTP/2's client preface, the first bytes a client sends.
const PREFACE_BYTES: usize = 24;
/// Pause after an accept that failed for want of resources (file
/// descriptors, memory) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Least time between two reports of refused connections or failed accepts.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// A TCP connection that says when it is gone, holds one connection slot
/// while it lives, and fails its reads once the handshake deadline passes
/// without HTTP/2's preface.
struct Tracked {
    stream: TcpStream,
    id: u64,
    gone: mpsc::UnboundedSender<u64>,
    _slot: OwnedSemaphorePermit,
    /// Until the preface is in: the deadline, and its bytes read so far.
    handshake: Option<(Pin<Box<Sleep>>, usize)>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let _ = self.gone.send(self.id);
    }
}

impl Connected for Tracked {
    type ConnectInfo = Connection;
    fn connect_info(&self) -> Connection {
        Connection(self.id)
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some((deadline, _)) = &mut self.handshake
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no HTTP/2 preface before the handshake deadline",
            )));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some((_, got))) = (&read, &mut self.handshake) {
            *got += buf.filled().len() - before;
            if *got >= PREFACE_BYTES {
                self.handshake = None;
            }
        }
        read
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A server bound to its address, ready to serve.
pub struct Server {
    listener: TcpListener,
    service: Service,
    limits: Limits,
}

impl Server {
    /// Builds the board and binds `options.listen` (inside a tokio runtime).
    pub async fn bind(options: Options) -> Result<Self, Error> {
        let service = Service::with_limits(options.target, options.ddr_bytes, options.limits)?;
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|e| Error::Listen {
                addr: options.listen,
                source: e,
            })?;
        Ok(Server {
            listener,
            service,
            limits: options.limits,
        })
    }

    /// The address bound (the port chosen, where 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The services (the board they serve).
    pub fn service(&self) -> &Service {
        &self.service
    }

    /// Serves until `stop` resolves.
    pub async fn serve(self, stop: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let (gone_tx, mut gone_rx) = mpsc::unbounded_channel::<u64>();
        let svc = self.service.clone();
        // A connection's buffers go when it does (in a thread of the
        // blocking pool: halting an engine waits for it).
        tokio::spawn(async move {
            while let Some(id) = gone_rx.recv().await {
                let svc = svc.clone();
                let _ = tokio::task::spawn_blocking(move || svc.disconnect(Connection(id))).await;
            }
        });
        let (conn_tx, conn_rx) = mpsc::channel::<std::io::Result<Tracked>>(1);
        tokio::spawn(accept_loop(self.listener, self.limits, gone_tx, conn_tx));
        let incoming = tokio_stream::wrappers::ReceiverStream::new(conn_rx);
        let s = self.service;
        tonic::transport::Server::builder()
            // Windows that hold a whole chunk of a buffer's bytes, so a
            // 2 MiB chunk does not wait on window updates.
            .initial_stream_window_size(Some(WINDOW))
            .initial_connection_window_size(Some(2 * WINDOW))
            .add_service(
                remote_device::remote_device_server::RemoteDeviceServer::new(s.clone())
                    .max_decoding_message_size(MAX_REQUEST)
                    .max_encoding_message_size(MAX_REPLY),
            )
            .add_service(
                mmio::mmio_server::MmioServer::new(s.clone())
                    .max_decoding_message_size(MAX_REQUEST)
                    .max_encoding_message_size(MAX_REPLY),
            )
            .add_service(
                buffer::remote_buffer_server::RemoteBufferServer::new(s.clone())
                    .max_decoding_message_size(MAX_REQUEST)
                    .max_encoding_message_size(MAX_REPLY),
            )
            .add_service(
                gpio::gpio_server::GpioServer::new(s)
                    .max_decoding_message_size(MAX_REQUEST)
                    .max_encoding_message_size(MAX_REPLY),
            )
            .serve_with_incoming_shutdown(incoming, stop)
            .await?;
        Ok(())
    }
}

/// Accepts connections until the server stops (`conns` closed), numbering
/// them and giving each a slot of [`Limits::connections`]: one accepted
/// with every slot held is closed at once. An accept that fails is
/// reported and retried, after [`ACCEPT_BACKOFF`] where it failed for want
/// of resources.
async fn accept_loop(
    listener: TcpListener,
    limits: Limits,
    gone: mpsc::UnboundedSender<u64>,
    conns: mpsc::Sender<std::io::Result<Tracked>>,
) {
    let slots = Arc::new(Semaphore::new(limits.connections));
    let mut next = 1u64;
    let mut report = Report::default();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = conns.closed() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                let pause = starved(&e);
                report.note(|n| {
                    let what = if pause { ", pausing" } else { "" };
                    eprintln!("dmaflow serve: {n} failed accept(s) ({e}){what}; still serving")
                });
                if pause {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream);
            report.note(|n| {
                eprintln!(
                    "dmaflow serve: {n} connection(s) refused: {} served at once \
                     (--max-connections)",
                    limits.connections
                )
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let tracked = Tracked {
            stream,
            id: next,
            gone: gone.clone(),
            _slot: slot,
            handshake: Some((Box::pin(tokio::time::sleep(limits.handshake)), 0)),
        };
        next += 1;
        if conns.send(Ok(tracked)).await.is_err() {
            return;
        }
    }
}

/// Whether an accept failed for want of resources (the next one would fail
/// the same way at once): file descriptors, memory, buffers.
fn starved(e: &std::io::Error) -> bool {
    const STARVED: [i32; 4] = [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM];
    e.raw_os_error().is_some_and(|n| STARVED.contains(&n))
}

/// Reports of repeated events, at most one per [`REPORT_EVERY`], each
/// counting the events since the last.
#[derive(Default)]
struct Report {
    last: Option<Instant>,
    count: u64,
}

impl Report {
    /// Counts one event; reports the count through `say` when it is time.
    fn note(&mut self, say: impl FnOnce(u64)) {
        self.count += 1;
        if self.last.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
            say(self.count);
            self.count = 0;
            self.last = Some(Instant::now());
        }
    }
}
