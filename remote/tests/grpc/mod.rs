//! A raw gRPC client over HTTP/2 (the `h2` crate), as a hostile client would
//! speak to the server: any message, any stream left open, any connection
//! dropped mid-call; and a server on a port of its own, under given caps.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use dmaflow::platform::MemoryModel;
use dmaflow_remote::{Limits, Options, Server, Target};
use h2::SendStream;
use h2::client::{ResponseFuture, SendRequest};
use prost::Message;
use tokio::net::TcpStream;

/// Every wait of these tests ends within this.
pub const WAIT: Duration = Duration::from_secs(20);

/// A server on loopback (a port of its own) over an emulated board of `ddr`
/// bytes under `limits`, served on `rt` until the runtime goes: its
/// address and the task serving it (finished only if the server stopped).
pub fn serve(
    rt: &tokio::runtime::Runtime,
    ddr: usize,
    limits: Limits,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let options = Options {
        listen: "127.0.0.1:0".parse().unwrap(),
        target: Target::Emulated {
            hwh: None,
            model: MemoryModel::Coherent,
        },
        ddr_bytes: ddr,
        limits,
    };
    let server = rt.block_on(Server::bind(options)).unwrap();
    let addr = server.local_addr().unwrap();
    let task = rt.spawn(async move {
        let _ = server.serve(std::future::pending()).await;
    });
    (addr, task)
}

/// Runs `f` on `rt`, failing the test if it takes longer than [`WAIT`].
pub fn within<F: std::future::Future>(rt: &tokio::runtime::Runtime, f: F) -> F::Output {
    rt.block_on(async { tokio::time::timeout(WAIT, f).await })
        .expect("the test's requests took longer than its timeout")
}

/// A runtime for a server and its clients.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// One HTTP/2 connection to the server.
pub struct Client {
    send: SendRequest<Bytes>,
    conn: tokio::task::JoinHandle<()>,
}

/// What a call came back with: the replies, or the gRPC status's message.
pub type Reply<A> = Result<Vec<A>, String>;

/// One message in gRPC's framing: uncompressed, its length, its bytes.
pub fn frame<M: Message>(m: &M) -> Bytes {
    let body = m.encode_to_vec();
    let mut b = BytesMut::with_capacity(5 + body.len());
    b.put_u8(0);
    b.put_u32(body.len() as u32);
    b.put_slice(&body);
    b.freeze()
}

impl Client {
    /// Connects and opens HTTP/2.
    pub async fn connect(addr: SocketAddr) -> Result<Self, String> {
        Self::connect_with_window(addr, 8 << 20).await
    }

    /// Connects and opens HTTP/2, each reply stream taking `window` bytes
    /// before the client says it has read them.
    pub async fn connect_with_window(addr: SocketAddr, window: u32) -> Result<Self, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(window)
            .initial_connection_window_size(16 << 20)
            .handshake(tcp)
            .await
            .map_err(|e| e.to_string())?;
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Client { send, conn })
    }

    /// Opens a call of method `path` ("/package.Service/method").
    pub async fn open(
        &mut self,
        path: &str,
    ) -> Result<(SendStream<Bytes>, ResponseFuture), String> {
        let mut send = self.send.clone().ready().await.map_err(|e| e.to_string())?;
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://dmaflow{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (resp, tx) = send.send_request(req, false).map_err(|e| e.to_string())?;
        Ok((tx, resp))
    }

    /// Calls `path` with `msgs` (a stream of requests, ended), and collects
    /// the replies.
    pub async fn call<Q: Message, A: Message + Default>(
        &mut self,
        path: &str,
        msgs: &[Q],
    ) -> Reply<A> {
        let (mut tx, resp) = self.open(path).await?;
        for m in msgs {
            tx.send_data(frame(m), false).map_err(|e| e.to_string())?;
        }
        tx.send_data(Bytes::new(), true)
            .map_err(|e| e.to_string())?;
        replies(resp).await
    }

    /// A call of one request and one reply.
    pub async fn unary<Q: Message, A: Message + Default>(
        &mut self,
        path: &str,
        q: &Q,
    ) -> Result<A, String> {
        let mut all = self.call::<Q, A>(path, std::slice::from_ref(q)).await?;
        if all.len() != 1 {
            return Err(format!("{} replies to a unary call", all.len()));
        }
        Ok(all.remove(0))
    }

    /// Closes the connection at once, whatever calls are open.
    pub fn drop_now(self) {
        self.conn.abort();
    }
}

/// The replies of a call, or its gRPC status's message where it is not OK.
pub async fn replies<A: Message + Default>(resp: ResponseFuture) -> Reply<A> {
    let resp = resp.await.map_err(|e| e.to_string())?;
    let (parts, mut body) = resp.into_parts();
    let mut wire = BytesMut::new();
    while let Some(d) = body.data().await {
        let d = d.map_err(|e| e.to_string())?;
        let _ = body.flow_control().release_capacity(d.len());
        wire.extend_from_slice(&d);
    }
    let trailers = body.trailers().await.map_err(|e| e.to_string())?;
    let headers = trailers.as_ref().unwrap_or(&parts.headers);
    let status = headers
        .get("grpc-status")
        .or(parts.headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    if status != "0" {
        let msg = headers
            .get("grpc-message")
            .or(parts.headers.get("grpc-message"))
            .map(|v| percent_decode(v.to_str().unwrap_or("")))
            .unwrap_or_default();
        return Err(format!("status {status}: {msg}"));
    }
    let mut out = Vec::new();
    let mut wire = wire.freeze();
    while wire.remaining() >= 5 {
        let _flag = wire.get_u8();
        let n = wire.get_u32() as usize;
        if wire.remaining() < n {
            return Err("a reply cut short".into());
        }
        out.push(A::decode(wire.split_to(n)).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// gRPC's percent-encoding of a status message, undone.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
