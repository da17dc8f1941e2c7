//! The network side: a gRPC server on one address (loopback unless told
//! otherwise), every message bounded, each TCP connection numbered so that
//! buffers stay with the client that allocated them and are freed, the
//! device stopped from writing them first, when that client goes.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tonic::transport::server::Connected;

use crate::Error;
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
}

/// A TCP connection that says when it is gone.
struct Tracked {
    stream: TcpStream,
    id: u64,
    gone: mpsc::UnboundedSender<u64>,
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
        Pin::new(&mut self.stream).poll_read(cx, buf)
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
}

impl Server {
    /// Builds the board and binds `options.listen` (inside a tokio runtime).
    pub async fn bind(options: Options) -> Result<Self, Error> {
        let service = Service::new(options.target, options.ddr_bytes)?;
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|e| Error::Listen {
                addr: options.listen,
                source: e,
            })?;
        Ok(Server { listener, service })
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
        let next = AtomicU64::new(1);
        let listener = self.listener;
        let incoming = async_stream(listener, next, gone_tx);
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

/// The accepted connections, numbered.
fn async_stream(
    listener: TcpListener,
    next: AtomicU64,
    gone: mpsc::UnboundedSender<u64>,
) -> impl tokio_stream::Stream<Item = std::io::Result<Tracked>> {
    let listener = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio_stream::StreamExt::map(listener, move |s| {
        let stream = s?;
        let _ = stream.set_nodelay(true);
        Ok(Tracked {
            stream,
            id: next.fetch_add(1, Ordering::Relaxed),
            gone: gone.clone(),
        })
    })
}
