//! The engine belongs to the server: each attack a hostile client can make
//! through PYNQ.remote's MMIO and buffer requests (the messages as they come
//! off the wire, several connections, races driven by a busy device) to aim
//! an AXI DMA at another client's memory, or to take an engine from the
//! client using it, is tried here and must fail.

use std::time::{Duration, Instant};

use dmaflow::platform::MemoryModel;
use dmaflow_remote::proto::buffer::remote_buffer_server::RemoteBuffer;
use dmaflow_remote::proto::buffer::*;
use dmaflow_remote::proto::mmio::mmio_server::Mmio;
use dmaflow_remote::proto::mmio::{GetMmioRequest, ReadRequest, WriteRequest};
use dmaflow_remote::proto::remote_device::WriteFileRequest;
use dmaflow_remote::proto::remote_device::remote_device_server::RemoteDevice;
use dmaflow_remote::{Connection, Service, Target};
use tonic::Request;

/// DMA memory of the test boards.
const DDR: usize = 16 << 20;
/// The loopback designs' engine.
const DMA: u64 = 0x4040_0000;
/// Channel register blocks.
const MM2S: u64 = 0x00;
const S2MM: u64 = 0x30;
/// Registers, relative to a channel.
const DMACR: u64 = 0x00;
const DMASR: u64 = 0x04;
const CURDESC: u64 = 0x08;
const TAILDESC: u64 = 0x10;
const ADDR: u64 = 0x18;
const LENGTH: u64 = 0x28;
/// DMASR bits.
const HALTED: u32 = 1;
const IDLE: u32 = 2;
/// Descriptor CONTROL: TXSOF | TXEOF.
const SOF_EOF: u32 = 3 << 26;
/// Descriptor STATUS: Cmplt.
const CMPLT: u32 = 1 << 31;

fn service() -> Service {
    Service::new(
        Target::Emulated {
            hwh: None,
            model: MemoryModel::Coherent,
        },
        DDR,
    )
    .unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A request on connection `c`.
fn on<T>(c: u64, msg: T) -> Request<T> {
    let mut r = Request::new(msg);
    r.extensions_mut().insert(Connection(c));
    r
}

/// A client-streaming request of `msgs` on connection `c`, framed as gRPC
/// frames them on the wire.
fn stream_on<T: prost::Message + Default + Send + 'static>(
    c: u64,
    msgs: Vec<T>,
) -> Request<tonic::Streaming<T>> {
    use tonic::codec::Codec;
    let mut wire = Vec::new();
    for m in msgs {
        let b = m.encode_to_vec();
        wire.push(0);
        wire.extend_from_slice(&(b.len() as u32).to_be_bytes());
        wire.extend_from_slice(&b);
    }
    let body = http_body_util::Full::new(bytes::Bytes::from(wire));
    let mut codec = tonic::codec::ProstCodec::<T, T>::default();
    on(
        c,
        tonic::Streaming::new_request(codec.decoder(), body, None, None),
    )
}

/// A client of the server: one connection.
#[derive(Clone)]
struct Client {
    s: Service,
    c: u64,
}

impl Client {
    /// A buffer of `n` bytes: (id, bus address).
    async fn buffer(&self, n: usize) -> (String, u64) {
        let r = RemoteBuffer::allocate(
            &self.s,
            on(
                self.c,
                AllocateRequest {
                    size: n as i32,
                    dtype: "<u4".into(),
                    cacheable: true,
                },
            ),
        )
        .await
        .unwrap()
        .into_inner();
        let id = r.buffer_id.unwrap_or_else(|| panic!("{:?}", r.msg));
        let a = RemoteBuffer::physical_address(
            &self.s,
            on(
                self.c,
                AddressRequest {
                    buffer_id: id.clone(),
                },
            ),
        )
        .await
        .unwrap()
        .into_inner()
        .address
        .unwrap();
        (id, a)
    }

    /// Writes `data` at byte `at` of buffer `id` and flushes it.
    async fn put(&self, id: &str, at: usize, data: &[u8]) {
        // In chunks of 1 MiB, as PYNQ's client sends them.
        let msgs = data
            .chunks(1 << 20)
            .enumerate()
            .map(|(i, c)| {
                let from = at + (i << 20);
                BufferWriteRequest {
                    buffer_id: id.into(),
                    data: c.to_vec(),
                    start: from as i32,
                    end: (from + c.len()) as i32,
                }
            })
            .collect();
        let r = RemoteBuffer::write(&self.s, stream_on(self.c, msgs))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.msg, None);
        let r = RemoteBuffer::flush(
            &self.s,
            on(
                self.c,
                FlushRequest {
                    buffer_id: id.into(),
                },
            ),
        )
        .await
        .unwrap()
        .into_inner();
        assert_eq!(r.msg, None);
    }

    /// Buffer `id` as the device left it.
    async fn get(&self, id: &str) -> Vec<u8> {
        RemoteBuffer::invalidate(
            &self.s,
            on(
                self.c,
                InvalidateRequest {
                    buffer_id: id.into(),
                },
            ),
        )
        .await
        .unwrap();
        let mut stream = RemoteBuffer::read(
            &self.s,
            on(
                self.c,
                BufferReadRequest {
                    buffer_id: id.into(),
                    start: 0,
                    end: 0,
                },
            ),
        )
        .await
        .unwrap()
        .into_inner();
        let mut out = Vec::new();
        while let Some(m) = tokio_stream::StreamExt::next(&mut stream).await {
            let m = m.unwrap();
            assert_eq!(m.msg, None);
            out.extend(m.data.unwrap());
        }
        out
    }

    async fn free(&self, id: &str) {
        let r = RemoteBuffer::freebuffer(
            &self.s,
            on(
                self.c,
                FreeBufferRequest {
                    buffer_id: id.into(),
                },
            ),
        )
        .await
        .unwrap()
        .into_inner();
        assert_eq!(r.msg, None);
    }

    /// The engine's register window.
    async fn window(&self) -> String {
        Mmio::get_mmio(
            &self.s,
            on(
                self.c,
                GetMmioRequest {
                    base_addr: DMA,
                    length: 0x1_0000,
                },
            ),
        )
        .await
        .unwrap()
        .into_inner()
        .mmio_id
        .unwrap()
    }

    /// Writes a register: `Err` with the refusal.
    async fn set(&self, offset: u64, value: u32) -> Result<(), String> {
        let w = self.window().await;
        let r = Mmio::write(
            &self.s,
            on(
                self.c,
                WriteRequest {
                    mmio_id: w,
                    offset,
                    data: value.to_le_bytes().to_vec(),
                },
            ),
        )
        .await
        .unwrap()
        .into_inner();
        if r.status {
            Ok(())
        } else {
            Err(r.msg.unwrap_or_default())
        }
    }

    /// Writes registers in turn, each accepted.
    async fn program(&self, writes: &[(u64, u64)]) {
        for &(offset, value) in writes {
            let r = self.set(offset, value as u32).await;
            assert!(r.is_ok(), "{offset:#x} <- {value:#x}: {r:?}");
        }
    }

    async fn reg(&self, offset: u64) -> u32 {
        let w = self.window().await;
        Mmio::read(
            &self.s,
            on(
                self.c,
                ReadRequest {
                    mmio_id: w,
                    length: 4,
                    offset,
                    word_order: "little".into(),
                },
            ),
        )
        .await
        .unwrap()
        .into_inner()
        .data
        .unwrap()
    }

    /// Waits (5 s at most) until DMASR of channel `ch` has one of `bits`.
    async fn wait(&self, ch: u64, bits: u32) -> u32 {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let sr = self.reg(ch + DMASR).await;
            if sr & bits != 0 {
                return sr;
            }
            assert!(Instant::now() < end, "DMASR {sr:#x} never {bits:#x}");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
}

fn client(s: &Service, c: u64) -> Client {
    Client { s: s.clone(), c }
}

/// Loads the scatter-gather design, as a client's download does.
async fn load_sg(s: &Service) {
    for (path, data) in [
        ("/lib/firmware/loopback-sg.bin", vec![0u8; 64]),
        (
            "/sys/class/fpga_manager/fpga0/firmware",
            b"loopback-sg.bin".to_vec(),
        ),
    ] {
        let m = WriteFileRequest {
            file_path: path.into(),
            data,
        };
        RemoteDevice::writefile(s, stream_on(0, vec![m]))
            .await
            .unwrap();
    }
    assert!(s.design().dmas().next().unwrap().1.params.include_sg);
}

/// A PG021 descriptor: `len` bytes at `buf` (CONTROL `control`), then `next`.
fn descriptor(next: u64, buf: u64, control: u32) -> Vec<u8> {
    let mut w = [0u32; 16];
    w[0] = next as u32;
    w[1] = (next >> 32) as u32;
    w[2] = buf as u32;
    w[3] = (buf >> 32) as u32;
    w[6] = control;
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `n` bytes of a pattern that zeroed memory is not (`seed` tells two apart).
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ seed | 1).collect()
}

/// S2MM's data lands in its descriptors: the attacker's S2MM chain writes its
/// first 64 bytes over its own next descriptor, and its MM2S sends a forged
/// descriptor there, naming the victim's buffer. The engine fetches the
/// server's copy, never the forged one.
#[test]
fn an_s2mm_descriptor_over_the_clients_next_descriptor_reaches_nothing_else() {
    rt().block_on(async {
        let s = service();
        load_sg(&s).await;
        let (a, v) = (client(&s, 2), client(&s, 1));
        let (victim, va) = v.buffer(4096).await;
        let (descs, d) = a.buffer(3 * 64).await;
        let (src, sa) = a.buffer(64 + 4096).await;
        let (dst, da) = a.buffer(4096).await;
        let (d0, d1, m0) = (d, d + 0x40, d + 0x80);
        // S2MM: d0 takes 64 bytes into d1; d1 takes 4 KiB into dst.
        a.put(&descs, 0x00, &descriptor(d1, d1, 64)).await;
        a.put(&descs, 0x40, &descriptor(d0, da, 4096)).await;
        // MM2S: one packet, a descriptor naming the victim, then 4 KiB.
        let mut packet = descriptor(d0, va, 4096);
        packet.extend(pattern(4096, 0));
        a.put(&src, 0, &packet).await;
        a.put(&descs, 0x80, &descriptor(m0, sa, (64 + 4096) | SOF_EOF))
            .await;
        a.program(&[
            (S2MM + CURDESC, d0),
            (S2MM + DMACR, 1),
            (S2MM + TAILDESC, d1),
            (MM2S + CURDESC, m0),
            (MM2S + DMACR, 1),
            (MM2S + TAILDESC, m0),
        ])
        .await;
        a.wait(S2MM, IDLE | HALTED).await;
        assert_eq!(v.get(&victim).await, vec![0; 4096], "the victim's buffer");
        assert_eq!(a.get(&dst).await, pattern(4096, 0), "the data's own buffer");
        // PYNQ's driver reads each descriptor's status as a board leaves it.
        let words = a.get(&descs).await;
        let status =
            |at: usize| u32::from_le_bytes(words[at + 0x1C..at + 0x20].try_into().unwrap());
        assert_eq!(status(0x80), CMPLT | (64 + 4096), "MM2S's status");
        assert_eq!(status(0x40) & CMPLT, CMPLT, "S2MM's status");
        assert_eq!(status(0x40) & 0x3FF_FFFF, 4096);
    });
}

/// An idle scatter-gather channel resumes from the descriptor after its last
/// tail. The attacker rewrites that descriptor while the channel is idle,
/// points CURDESC (ignored by an idle channel) at a harmless one and posts a
/// tail: `dir` S2MM writes into the victim's buffer, MM2S reads it out.
fn an_idle_channels_resume_point_is_checked(mm2s_leaks: bool) {
    rt().block_on(async {
        let s = service();
        load_sg(&s).await;
        let (a, v) = (client(&s, 2), client(&s, 1));
        let (victim, va) = v.buffer(4096).await;
        v.put(&victim, 0, &pattern(4096, 0x40)).await;
        let (descs, d) = a.buffer(6 * 64).await;
        let (src, sa) = a.buffer(4096).await;
        let (dst, da) = a.buffer(4096).await;
        a.put(&src, 0, &pattern(4096, 0)).await;
        // Channel `ch` walks c0 (resume point: c1); the other channel o0.
        let (ch, other) = if mm2s_leaks {
            (MM2S, S2MM)
        } else {
            (S2MM, MM2S)
        };
        let (c0, c1, c2, o0, o1) = (d, d + 0x40, d + 0x80, d + 0xC0, d + 0x100);
        let own = if mm2s_leaks { sa } else { da };
        let theirs = if mm2s_leaks { da } else { sa };
        let ctl = |n: u32| if mm2s_leaks { n | SOF_EOF } else { n };
        let octl = |n: u32| if mm2s_leaks { n } else { n | SOF_EOF };
        a.put(&descs, 0x00, &descriptor(c1, own, ctl(4096))).await;
        a.put(&descs, 0xC0, &descriptor(o1, theirs, octl(4096)))
            .await;
        a.put(&descs, 0x100, &descriptor(o1, theirs, octl(4096)))
            .await;
        a.program(&[
            (ch + CURDESC, c0),
            (other + CURDESC, o0),
            (S2MM + DMACR, 1),
            (MM2S + DMACR, 1),
            (S2MM + TAILDESC, if mm2s_leaks { o0 } else { c0 }),
            (MM2S + TAILDESC, if mm2s_leaks { c0 } else { o0 }),
        ])
        .await;
        a.wait(S2MM, IDLE).await;
        a.wait(MM2S, IDLE).await;
        assert_eq!(a.get(&dst).await, pattern(4096, 0));
        // Idle: the resume point c1 now names the victim's buffer; c0 and
        // c2 are harmless (c0 now leads to c2, and CURDESC names c2).
        a.put(&descs, 0x00, &descriptor(c2, own, ctl(4096))).await;
        a.put(&descs, 0x40, &descriptor(c2, va, ctl(4096))).await;
        a.put(&descs, 0x80, &descriptor(c2, own, ctl(4096))).await;
        a.put(&dst, 0, &[0; 4096]).await;
        a.program(&[(ch + CURDESC, c2)]).await;
        // The other channel goes on (its resume point o1, unchanged).
        a.program(&[(other + TAILDESC, o1)]).await;
        let r = a.set(ch + TAILDESC, c2 as u32).await;
        let e = r.expect_err("a chain through the victim's buffer is refused");
        assert!(
            e.contains(&format!("buffer {va:#x}..{:#x} is outside", va + 4096)),
            "{e}"
        );
        // Repaired, the chain runs from the resume point, over the client's
        // own memory only.
        a.put(&descs, 0x40, &descriptor(c2, own, ctl(4096))).await;
        a.program(&[(ch + TAILDESC, c1)]).await;
        a.wait(S2MM, IDLE).await;
        a.wait(MM2S, IDLE).await;
        assert_eq!(a.get(&dst).await, pattern(4096, 0), "not the victim's data");
        assert_eq!(
            v.get(&victim).await,
            pattern(4096, 0x40),
            "the victim's buffer"
        );
    });
}

#[test]
fn an_idle_s2mm_resume_point_rewritten_writes_no_other_clients_buffer() {
    an_idle_channels_resume_point_is_checked(false);
}

#[test]
fn an_idle_mm2s_resume_point_rewritten_reads_no_other_clients_buffer() {
    an_idle_channels_resume_point_is_checked(true);
}

/// Direct mode: the attacker starts S2MM into its own buffer while the
/// device is busy with a long MM2S transfer, then rewrites the destination
/// address: the engine writes where the server programmed it.
#[test]
fn a_direct_mode_address_rewritten_after_length_redirects_nothing() {
    rt().block_on(async {
        let s = service();
        let (a, v) = (client(&s, 2), client(&s, 1));
        const BIG: usize = 4 << 20;
        let (victim, va) = v.buffer(BIG).await;
        let (src, sa) = a.buffer(BIG).await;
        let (dst, da) = a.buffer(BIG).await;
        a.put(&src, 0, &pattern(BIG, 0)).await;
        a.program(&[(S2MM + DMACR, 1), (MM2S + DMACR, 1), (MM2S + ADDR, sa)])
            .await;
        for _ in 0..3 {
            // MM2S busies the device; S2MM's start and the rewrite race it.
            a.program(&[
                (MM2S + LENGTH, BIG as u64),
                (S2MM + ADDR, da),
                (S2MM + LENGTH, BIG as u64),
                (S2MM + ADDR, va),
            ])
            .await;
            // The view keeps the client's write; the engine, the checked one.
            assert_eq!(a.reg(S2MM + ADDR).await, va as u32);
            a.wait(S2MM, IDLE).await;
            a.wait(MM2S, IDLE).await;
        }
        assert!(
            v.get(&victim).await.iter().all(|&b| b == 0),
            "the victim's buffer"
        );
        assert_eq!(a.get(&dst).await, pattern(BIG, 0));
    });
}

/// A transfer that reaches a buffer is stopped before the buffer goes back:
/// the attacker's S2MM waits for data into `x`, its destination register is
/// then pointed elsewhere, and `x` is freed (or the attacker disconnects);
/// the victim is handed `x`'s memory; data then sent must not land there.
fn a_pending_s2mm_job_ends_with_its_buffer(disconnect: bool) {
    rt().block_on(async {
        let s = service();
        let (a, v, b) = (client(&s, 2), client(&s, 1), client(&s, 3));
        let (x, xa) = a.buffer(4096).await;
        let (src, sa) = b.buffer(4096).await;
        b.put(&src, 0, &pattern(4096, 0)).await;
        a.program(&[(S2MM + DMACR, 1), (S2MM + ADDR, xa), (S2MM + LENGTH, 4096)])
            .await;
        assert_eq!(a.reg(S2MM + DMASR).await & (HALTED | IDLE), 0, "S2MM waits");
        // The device picks the job up; then the destination register is
        // pointed at nothing.
        tokio::time::sleep(Duration::from_millis(50)).await;
        a.program(&[(S2MM + ADDR, 0)]).await;
        if disconnect {
            s.disconnect(Connection(a.c));
        } else {
            a.free(&x).await;
        }
        let (mine, ma) = v.buffer(4096).await;
        assert_eq!(ma, xa, "the victim is handed the freed memory");
        // Someone sends a packet through the engine.
        let sender = if disconnect { &b } else { &a };
        let sa = if disconnect {
            sa
        } else {
            let (src, sa) = a.buffer(4096).await;
            a.put(&src, 0, &pattern(4096, 0)).await;
            sa
        };
        sender
            .program(&[(MM2S + DMACR, 1), (MM2S + ADDR, sa), (MM2S + LENGTH, 4096)])
            .await;
        sender.wait(MM2S, IDLE | HALTED).await;
        sender.wait(S2MM, IDLE | HALTED).await;
        assert_eq!(v.get(&mine).await, vec![0; 4096], "the victim's buffer");
    });
}

#[test]
fn a_pending_s2mm_job_ends_when_its_buffer_is_freed() {
    a_pending_s2mm_job_ends_with_its_buffer(false);
}

#[test]
fn a_pending_s2mm_job_ends_when_its_client_disconnects() {
    a_pending_s2mm_job_ends_with_its_buffer(true);
}

/// One client holds an engine at a time: another can neither reset nor halt
/// it, nor start it, and reads nothing of the holder's addresses.
#[test]
fn another_client_can_neither_take_the_engine_nor_read_its_addresses() {
    rt().block_on(async {
        let s = service();
        load_sg(&s).await;
        let (a, b) = (client(&s, 2), client(&s, 3));
        let (descs, d) = a.buffer(64).await;
        let (dst, da) = a.buffer(4096).await;
        a.put(&descs, 0, &descriptor(d, da, 4096)).await;
        a.program(&[(S2MM + CURDESC, d), (S2MM + DMACR, 1), (S2MM + TAILDESC, d)])
            .await;
        assert_eq!(a.reg(S2MM + DMASR).await & (HALTED | IDLE), 0, "S2MM waits");
        // The holder sees where its engine is.
        assert_eq!(a.reg(S2MM + CURDESC).await, d as u32);
        // The other client sees none of it.
        for r in [S2MM + CURDESC, S2MM + TAILDESC, MM2S + CURDESC] {
            assert_eq!(b.reg(r).await, 0, "{r:#x}");
        }
        let (_, bd) = b.buffer(64).await;
        for (r, v) in [
            (MM2S + DMACR, 4),
            (S2MM + DMACR, 0),
            (S2MM + CURDESC, bd),
            (S2MM + TAILDESC, bd),
            (MM2S + DMACR, 1),
        ] {
            let e = b.set(r, v as u32).await.expect_err("refused");
            assert!(
                e.contains("axi_dma_0 is in use by another client (MM2S halted, S2MM running)"),
                "{e}"
            );
        }
        assert_eq!(
            a.reg(S2MM + DMASR).await & (HALTED | IDLE),
            0,
            "S2MM still waits"
        );
        // The holder stops it: the engine is free for the other.
        a.program(&[(S2MM + DMACR, 0)]).await;
        b.program(&[(S2MM + DMACR, 4)]).await;
        assert!(a.get(&dst).await.iter().all(|&x| x == 0));
    });
}
