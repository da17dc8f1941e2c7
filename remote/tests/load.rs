//! The server under load from hostile clients speaking raw gRPC: a thousand
//! idle connections and an exhausted file-descriptor table leave it serving;
//! sixteen clients uploading, allocating to their caps and vanishing
//! mid-transfer, round after round, leave its memory under a stated bound,
//! nothing charged, and another client's data intact.
//!
//! The tests change the process's open-file limit and measure its resident
//! memory, so they run one at a time (`SERIAL`).

mod grpc;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dmaflow_remote::Limits;
use dmaflow_remote::proto::buffer::*;
use dmaflow_remote::proto::remote_device::{WriteFileRequest, WriteFileResponse};
use grpc::{Client, frame, replies, runtime, serve, within};
use h2::SendStream;

const MIB: usize = 1 << 20;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The open-file limit (soft, hard).
fn nofile() -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    (r.rlim_cur, r.rlim_max)
}

/// Sets the soft open-file limit.
fn set_nofile(soft: u64) {
    let r = libc::rlimit {
        rlim_cur: soft,
        rlim_max: nofile().1,
    };
    // SAFETY: setrlimit reads the struct it is given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
}

/// File descriptors open in this process.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// A call any client makes first: a buffer's allocation (then freed).
async fn served(addr: std::net::SocketAddr) -> Result<(), String> {
    let mut c = Client::connect(addr).await?;
    let q = AllocateRequest {
        size: 4096,
        dtype: "<u4".into(),
        cacheable: true,
    };
    let r: AllocateResponse = c.unary("/buffer.RemoteBuffer/allocate", &q).await?;
    let id = r.buffer_id.ok_or(format!("{:?}", r.msg))?;
    let f = FreeBufferRequest { buffer_id: id };
    let _: FreeBufferResponse = c.unary("/buffer.RemoteBuffer/freebuffer", &f).await?;
    Ok(())
}

/// Retries [`served`] until it succeeds or `within` passes; how long it took.
async fn served_within(addr: std::net::SocketAddr, within: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_secs(2), served(addr)).await {
            Ok(Ok(())) => return Ok(start.elapsed()),
            Ok(Err(e)) if start.elapsed() > within => return Err(e),
            Err(_) if start.elapsed() > within => return Err("timed out".into()),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The server is run with a cap of 64 connections and a handshake deadline
/// of 300 ms, under an open-file limit of what the test holds plus 1 000
/// idle connections plus 200: a server that accepted every connection would
/// run out of descriptors (as today's accept loop does, and then ends).
#[test]
fn idle_connections_and_no_file_descriptors_leave_the_server_serving() {
    let _one = serial();
    let saved = nofile().0;
    let rt = runtime();
    let limits = Limits {
        connections: 64,
        handshake: Duration::from_millis(300),
        ..Limits::default()
    };
    let (addr, server) = serve(&rt, 16 * MIB, limits);
    const IDLE: u64 = 1000;
    set_nofile(open_fds() + IDLE + 200);
    within(&rt, async {
        // A thousand connections that never say a word.
        let mut idle = Vec::new();
        for _ in 0..IDLE {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        // A client is served, once the idle ones past their deadline go.
        let took = served_within(addr, Duration::from_secs(8)).await;
        assert!(took.is_ok(), "with {IDLE} idle connections: {took:?}");
        drop(idle);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!server.is_finished(), "the server stopped");
        served_within(addr, Duration::from_secs(5)).await.unwrap();

        // No descriptor left for the server's accept: the client's socket
        // takes the last one. The server waits and accepts once some are
        // free again.
        set_nofile(open_fds() + 16);
        let mut filler = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            filler.push(f);
        }
        filler.pop();
        let client = tokio::spawn(served_within(addr, Duration::from_secs(8)));
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!server.is_finished(), "the server stopped on EMFILE");
        drop(filler);
        set_nofile(saved);
        let took = client.await.unwrap();
        assert!(took.is_ok(), "after EMFILE: {took:?}");
        assert!(!server.is_finished(), "the server stopped");
    });
    set_nofile(saved);
}

/// Resident memory of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf reads a constant.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// Sends `data` as the stream's flow control allows (so the client holds
/// one chunk, not the whole upload); `false` once the server has closed
/// the stream.
async fn send_paced(tx: &mut SendStream<Bytes>, mut data: Bytes) -> bool {
    while !data.is_empty() {
        tx.reserve_capacity(data.len());
        match std::future::poll_fn(|cx| tx.poll_capacity(cx)).await {
            Some(Ok(0)) => continue,
            Some(Ok(n)) => {
                let part = data.split_to(n.min(data.len()));
                if tx.send_data(part, false).is_err() {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// 16 clients, 4 rounds each: allocate buffers to the cap on DMA memory
/// per client, start a 60 MiB file upload (refused past the cap on data in
/// flight), leave it unfinished and vanish. Stated bound: the server's
/// memory grows by at most its DDR (64 MiB) + the cap on all data in
/// flight (32 MiB) + 96 MiB for HTTP/2's windows and the runtime = 192 MiB,
/// where 16 unfinished 60 MiB uploads held whole would take 960 MiB.
#[test]
fn sixteen_clients_vanishing_mid_upload_leave_memory_bounded_and_data_intact() {
    let _one = serial();
    let rt = runtime();
    const DDR: usize = 64 * MIB;
    const TOTAL_IN_FLIGHT: usize = 32 * MIB;
    let limits = Limits {
        client_dma: 2 * MIB,
        total_dma: 40 * MIB,
        client_in_flight: 4 * MIB,
        total_in_flight: TOTAL_IN_FLIGHT,
        ..Limits::default()
    };
    let (addr, server) = serve(&rt, DDR, limits);
    let bound = DDR + TOTAL_IN_FLIGHT + 96 * MIB;

    // Another client's buffer, full of a pattern.
    let pattern: Vec<u8> = (0..MIB).map(|i| (i * 7 % 251) as u8).collect();
    let (mut keeper, kept) = within(&rt, async {
        let mut k = Client::connect(addr).await.unwrap();
        let q = AllocateRequest {
            size: MIB as i32,
            dtype: "<u4".into(),
            cacheable: true,
        };
        let r: AllocateResponse = k.unary("/buffer.RemoteBuffer/allocate", &q).await.unwrap();
        let id = r.buffer_id.unwrap();
        let w = BufferWriteRequest {
            buffer_id: id.clone(),
            data: pattern.clone(),
            start: 0,
            end: MIB as i32,
        };
        let r: BufferWriteResponse = k.unary("/buffer.RemoteBuffer/write", &w).await.unwrap();
        assert_eq!(r.msg, None);
        (k, id)
    });

    let base = rss();
    let peak = std::sync::Arc::new(AtomicUsize::new(base));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let refusals = within(&rt, async {
        let mut refusals = Vec::new();
        for _round in 0..4 {
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(16));
            let mut clients = Vec::new();
            for n in 0..16 {
                let barrier = barrier.clone();
                clients.push(tokio::spawn(async move {
                    let mut c = Client::connect(addr).await.unwrap();
                    let mut said = Vec::new();
                    for _ in 0..3 {
                        let q = AllocateRequest {
                            size: MIB as i32,
                            dtype: "<u4".into(),
                            cacheable: true,
                        };
                        let r: AllocateResponse =
                            c.unary("/buffer.RemoteBuffer/allocate", &q).await.unwrap();
                        said.extend(r.msg);
                    }
                    let (mut tx, resp) = c
                        .open("/remote_device.RemoteDevice/writefile")
                        .await
                        .unwrap();
                    let answer = tokio::spawn(replies::<WriteFileResponse>(resp));
                    for _ in 0..60 {
                        let m = WriteFileRequest {
                            file_path: format!("/lib/firmware/up{n}.bin"),
                            data: vec![n as u8; MIB],
                        };
                        if !send_paced(&mut tx, frame(&m)).await {
                            break;
                        }
                    }
                    if answer.is_finished() {
                        said.extend(answer.await.unwrap().err());
                    }
                    // Everyone holds what they got, then vanishes mid-upload.
                    barrier.wait().await;
                    c.drop_now();
                    said
                }));
            }
            for c in clients {
                refusals.extend(c.await.unwrap());
            }
        }
        refusals
    });
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let grew = peak.load(Ordering::Relaxed).saturating_sub(base);
    assert!(
        grew <= bound,
        "the server's memory grew by {} MiB (bound {} MiB)",
        grew / MIB,
        bound / MIB
    );
    assert!(
        refusals.iter().any(|r| r.contains("--client-dma-memory")),
        "{refusals:?}"
    );
    assert!(
        refusals.iter().any(|r| r.contains("--client-in-flight")),
        "{refusals:?}"
    );

    within(&rt, async {
        // Nothing stays charged to the clients gone: a new one gets its
        // whole caps.
        let fresh = async {
            let mut c = Client::connect(addr).await.unwrap();
            for _ in 0..2 {
                let q = AllocateRequest {
                    size: MIB as i32,
                    dtype: "<u4".into(),
                    cacheable: true,
                };
                let r: AllocateResponse =
                    c.unary("/buffer.RemoteBuffer/allocate", &q).await.unwrap();
                if let Some(m) = r.msg {
                    return Err(m);
                }
            }
            let up: Vec<WriteFileRequest> = (0..4)
                .map(|_| WriteFileRequest {
                    file_path: "/lib/firmware/last.bin".into(),
                    data: vec![1; MIB],
                })
                .collect();
            c.call::<_, WriteFileResponse>("/remote_device.RemoteDevice/writefile", &up)
                .await
                .map(|_| ())
        };
        // The disconnects are handled off the request path: give them a
        // moment.
        let end = Instant::now() + Duration::from_secs(5);
        let mut last = fresh.await;
        while last.is_err() && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(50)).await;
            last = async {
                let mut c = Client::connect(addr).await.unwrap();
                let q = AllocateRequest {
                    size: 2 * MIB as i32,
                    dtype: "<u4".into(),
                    cacheable: true,
                };
                let r: AllocateResponse =
                    c.unary("/buffer.RemoteBuffer/allocate", &q).await.unwrap();
                r.msg.map_or(Ok(()), Err)
            }
            .await;
        }
        assert!(last.is_ok(), "{last:?}");

        let q = BufferReadRequest {
            buffer_id: kept,
            start: 0,
            end: 0,
        };
        let r: Vec<BufferReadResponse> = keeper
            .call("/buffer.RemoteBuffer/read", &[q])
            .await
            .unwrap();
        let got: Vec<u8> = r.into_iter().flat_map(|m| m.data.unwrap()).collect();
        assert!(got == pattern, "another client's buffer changed");
    });
    assert!(!server.is_finished());
}
