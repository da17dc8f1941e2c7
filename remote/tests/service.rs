//! The request handlers against bad input: each bad id, address, offset,
//! length and path is an error in the reply, the service keeps serving,
//! buffers stay with the connection that allocated them, and a client gone
//! mid-transfer leaves no engine able to write its memory. Then random
//! request sequences (proptest) against the same invariants.

use dmaflow::platform::MemoryModel;
use dmaflow_remote::proto::buffer::remote_buffer_server::RemoteBuffer;
use dmaflow_remote::proto::buffer::*;
use dmaflow_remote::proto::mmio::mmio_server::Mmio;
use dmaflow_remote::proto::mmio::{GetMmioRequest, ReadRequest, WriteRequest};
use dmaflow_remote::proto::remote_device::remote_device_server::RemoteDevice;
use dmaflow_remote::proto::remote_device::*;
use dmaflow_remote::{Connection, Service, Target};
use proptest::prelude::*;
use tonic::Request;

/// DMA memory of the test boards.
const DDR: usize = 16 << 20;
/// The loopback design's engine.
const DMA: u64 = 0x4040_0000;

fn service() -> Service {
    service_with(MemoryModel::Coherent)
}

fn service_with(model: MemoryModel) -> Service {
    Service::new(Target::Emulated { hwh: None, model }, DDR).unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
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

async fn alloc(s: &Service, c: u64, size: i32) -> AllocateResponse {
    RemoteBuffer::allocate(
        s,
        on(
            c,
            AllocateRequest {
                size,
                dtype: "<u4".into(),
                cacheable: true,
            },
        ),
    )
    .await
    .unwrap()
    .into_inner()
}

/// The first reply of a buffer read.
async fn read_buf(s: &Service, c: u64, id: &str, start: i32, end: i32) -> BufferReadResponse {
    let mut stream = RemoteBuffer::read(
        s,
        on(
            c,
            BufferReadRequest {
                buffer_id: id.into(),
                start,
                end,
            },
        ),
    )
    .await
    .unwrap()
    .into_inner();
    tokio_stream::StreamExt::next(&mut stream)
        .await
        .unwrap()
        .unwrap()
}

async fn mmio_read(
    s: &Service,
    id: &str,
    offset: u64,
    length: u64,
) -> dmaflow_remote::proto::mmio::ReadResponse {
    Mmio::read(
        s,
        Request::new(ReadRequest {
            mmio_id: id.into(),
            length,
            offset,
            word_order: "little".into(),
        }),
    )
    .await
    .unwrap()
    .into_inner()
}

/// The register at `offset` of window `id` as connection `c` reads it.
async fn mmio_read_on(s: &Service, c: u64, id: &str, offset: u64) -> u32 {
    Mmio::read(
        s,
        on(
            c,
            ReadRequest {
                mmio_id: id.into(),
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

async fn mmio_write(
    s: &Service,
    id: &str,
    offset: u64,
    value: u32,
) -> dmaflow_remote::proto::mmio::WriteResponse {
    mmio_write_on(s, 0, id, offset, value).await
}

/// A register write by connection `c`.
async fn mmio_write_on(
    s: &Service,
    c: u64,
    id: &str,
    offset: u64,
    value: u32,
) -> dmaflow_remote::proto::mmio::WriteResponse {
    Mmio::write(
        s,
        on(
            c,
            WriteRequest {
                mmio_id: id.into(),
                offset,
                data: value.to_le_bytes().to_vec(),
            },
        ),
    )
    .await
    .unwrap()
    .into_inner()
}

async fn window(
    s: &Service,
    base: u64,
    length: u64,
) -> dmaflow_remote::proto::mmio::GetMmioResponse {
    Mmio::get_mmio(
        s,
        Request::new(GetMmioRequest {
            base_addr: base,
            length,
        }),
    )
    .await
    .unwrap()
    .into_inner()
}

#[test]
fn bad_buffer_requests_are_errors_in_the_reply() {
    rt().block_on(async {
        let s = service();
        for size in [0, -1, i32::MIN, i32::MAX] {
            assert!(alloc(&s, 1, size).await.msg.is_some(), "size {size}");
        }
        let a = alloc(&s, 1, 100).await;
        assert_eq!(a.msg, None);
        let id = a.buffer_id.unwrap();
        // Unknown ids, and another connection's buffer.
        for (c, bad) in [(1, "999999"), (1, "x"), (1, ""), (2, id.as_str())] {
            let r = read_buf(&s, c, bad, 0, 0).await;
            assert!(r.msg.unwrap().contains("no buffer"), "{c} {bad:?}");
            let f = RemoteBuffer::flush(
                &s,
                on(
                    c,
                    FlushRequest {
                        buffer_id: bad.into(),
                    },
                ),
            )
            .await
            .unwrap()
            .into_inner();
            assert!(f.msg.is_some());
            let p = RemoteBuffer::physical_address(
                &s,
                on(
                    c,
                    AddressRequest {
                        buffer_id: bad.into(),
                    },
                ),
            )
            .await
            .unwrap()
            .into_inner();
            assert_eq!(p.address, None);
        }
        // Reads past the buffer.
        for (start, end) in [(0, 101), (50, 10), (101, 102)] {
            let r = read_buf(&s, 1, &id, start, end).await;
            assert!(
                r.msg.is_some_and(|m| m.contains("outside")),
                "{start}..{end}"
            );
        }
        // Negative offsets are refused, not clamped.
        for (start, end) in [(-5, 200), (-4, 8), (0, -1)] {
            let r = read_buf(&s, 1, &id, start, end).await;
            assert!(
                r.msg.is_some_and(|m| m.contains("never negative")),
                "{start}..{end}"
            );
        }
        // A whole read is the buffer's 100 bytes, zeroed.
        let r = read_buf(&s, 1, &id, 0, 0).await;
        assert_eq!(r.data.unwrap(), vec![0; 100]);
        // Freed once; the second free is an error.
        let free = |c| {
            RemoteBuffer::freebuffer(
                &s,
                on(
                    c,
                    FreeBufferRequest {
                        buffer_id: id.clone(),
                    },
                ),
            )
        };
        assert!(free(2).await.unwrap().into_inner().msg.is_some());
        assert_eq!(free(1).await.unwrap().into_inner().msg, None);
        assert!(free(1).await.unwrap().into_inner().msg.is_some());
        assert_eq!(s.buffers(), 0);
    });
}

#[test]
fn bad_register_and_file_requests_are_errors_in_the_reply() {
    rt().block_on(async {
        let s = service();
        for (base, len) in [
            (0, 4),
            (DMA - 4, 8),
            (DMA, 0x1_0004),
            (u64::MAX - 2, 8),
            (DMA, 0),
        ] {
            let w = window(&s, base, len).await;
            assert!(
                !w.status && w.msg.is_some() && w.mmio_id.is_none(),
                "{base:#x}+{len}"
            );
        }
        let w = window(&s, DMA, 0x1_0000).await;
        let id = w.mmio_id.unwrap();
        for (offset, length) in [
            (0x1_0000, 4),
            (2, 4),
            (0xFFFC, 8),
            (0, 3),
            (u64::MAX - 3, 4),
        ] {
            let r = mmio_read(&s, &id, offset, length).await;
            assert!(!r.status && r.msg.is_some(), "{offset:#x} {length}");
        }
        for bad in ["", "zz", "40400000", "0:4", "40400000:ffffffffffffffff"] {
            let r = mmio_read(&s, bad, 0, 4).await;
            assert!(!r.status, "{bad:?}");
        }
        let r = Mmio::write(
            &s,
            Request::new(WriteRequest {
                mmio_id: id.clone(),
                offset: 0,
                data: vec![1, 2, 3],
            }),
        )
        .await
        .unwrap()
        .into_inner();
        assert!(!r.status);
        assert!(!mmio_write(&s, &id, 0x1_0000, 1).await.status);
        // Files outside the set.
        for path in [
            "/etc/passwd",
            "/lib/firmware/../x",
            "/lib/firmware/",
            "/proc/self/mem",
            "",
        ] {
            let e = RemoteDevice::existsfile(
                &s,
                Request::new(ExistsFileRequest {
                    file_path: path.into(),
                }),
            )
            .await
            .unwrap()
            .into_inner();
            assert!(!e.exists, "{path:?}");
            let r = RemoteDevice::readfile(
                &s,
                Request::new(ReadFileRequest {
                    file_path: path.into(),
                }),
            )
            .await;
            assert_eq!(r.err().unwrap().code(), tonic::Code::NotFound, "{path:?}");
        }
        let a = RemoteDevice::set_bitstream_attrs(
            &s,
            Request::new(SetBitstreamAttrsRequest {
                binfile_name: "../../x.bin".into(),
                partial: false,
            }),
        )
        .await
        .unwrap()
        .into_inner();
        assert!(!a.status);
        // Still serving: the architecture, and the engine's registers.
        let v = RemoteDevice::readfile(
            &s,
            Request::new(ReadFileRequest {
                file_path: "/proc/version".into(),
            }),
        )
        .await
        .unwrap();
        let mut v = v.into_inner();
        let first = tokio_stream::StreamExt::next(&mut v)
            .await
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(&first.data).contains("aarch64"));
        let sr = mmio_read(&s, &id, 0x04, 4).await;
        assert!(
            sr.status && sr.data.unwrap() & 1 == 1,
            "MM2S halted after reset"
        );
    });
}

#[test]
fn a_client_gone_mid_transfer_leaves_no_engine_writing_its_memory() {
    rt().block_on(async {
        let s = service();
        let id = alloc(&s, 7, 4096).await.buffer_id.unwrap();
        let addr = RemoteBuffer::physical_address(
            &s,
            on(
                7,
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
        let w = window(&s, DMA, 0x1_0000).await.mmio_id.unwrap();
        // S2MM into the buffer, nothing sent: the channel waits for data.
        assert!(mmio_write_on(&s, 7, &w, 0x30, 1).await.status);
        assert!(mmio_write_on(&s, 7, &w, 0x48, addr as u32).await.status);
        assert!(mmio_write_on(&s, 7, &w, 0x58, 4096).await.status);
        let sr = mmio_read(&s, &w, 0x34, 4).await.data.unwrap();
        assert_eq!(sr & 0b11, 0, "S2MM running and busy: {sr:#x}");
        s.disconnect(Connection(7));
        assert_eq!(s.buffers(), 0);
        let sr = mmio_read(&s, &w, 0x34, 4).await.data.unwrap();
        assert_eq!(
            sr & 1,
            1,
            "S2MM halted before the buffer went back: {sr:#x}"
        );
        // Another connection's buffers are not touched by the first's end.
        let mine = alloc(&s, 8, 64).await.buffer_id.unwrap();
        s.disconnect(Connection(9));
        assert_eq!(read_buf(&s, 8, &mine, 0, 0).await.msg, None);
    });
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

/// Writes `data` into buffer `id` of connection `c` at byte `at` (the
/// CPU's view): the reply's error, if any.
async fn write_only(s: &Service, c: u64, id: &str, at: usize, data: &[u8]) -> Option<String> {
    let m = BufferWriteRequest {
        buffer_id: id.into(),
        data: data.to_vec(),
        start: at as i32,
        end: (at + data.len()) as i32,
    };
    RemoteBuffer::write(s, stream_on(c, vec![m]))
        .await
        .unwrap()
        .into_inner()
        .msg
}

/// Writes `data` into buffer `id` of connection `c` at byte `at`, and
/// flushes it for the device.
/// Client `c`'s buffer `id` as the device left it: invalidated, then read whole.
async fn read_back(s: &Service, c: u64, id: &str) -> Vec<u8> {
    RemoteBuffer::invalidate(
        s,
        on(
            c,
            InvalidateRequest {
                buffer_id: id.into(),
            },
        ),
    )
    .await
    .unwrap();
    read_buf(s, c, id, 0, 0).await.data.unwrap()
}

async fn put(s: &Service, c: u64, id: &str, at: usize, data: &[u8]) {
    assert_eq!(write_only(s, c, id, at, data).await, None);
    let r = RemoteBuffer::flush(
        s,
        on(
            c,
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

/// The bus address of buffer `id` of connection `c`.
async fn address(s: &Service, c: u64, id: &str) -> u64 {
    RemoteBuffer::physical_address(
        s,
        on(
            c,
            AddressRequest {
                buffer_id: id.into(),
            },
        ),
    )
    .await
    .unwrap()
    .into_inner()
    .address
    .unwrap()
}

/// A buffer of `n` bytes for connection `c`: (id, bus address).
async fn buffer(s: &Service, c: u64, n: i32) -> (String, u64) {
    let id = alloc(s, c, n).await.buffer_id.unwrap();
    let a = address(s, c, &id).await;
    (id, a)
}

/// Waits (5 s at most) for DMASR at `sr` to read Idle.
async fn wait_idle(s: &Service, w: &str, sr: u64) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let v = mmio_read(s, w, sr, 4).await.data.unwrap();
        if v & 2 != 0 {
            return;
        }
        assert!(std::time::Instant::now() < end, "DMASR {v:#x} never Idle");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// 4 KiB of a pattern that zeroed memory is not.
fn pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i % 251) as u8 + 1).collect()
}

#[test]
fn an_engine_aimed_by_hand_at_another_clients_buffer_is_not_started() {
    rt().block_on(async {
        let s = service();
        let (victim, va) = buffer(&s, 1, 4096).await;
        let (src, sa) = buffer(&s, 2, 4096).await;
        let (dst, da) = buffer(&s, 2, 4096).await;
        put(&s, 2, &src, 0, &pattern()).await;
        let w = window(&s, DMA, 0x1_0000).await.mmio_id.unwrap();
        assert!(mmio_write_on(&s, 2, &w, 0x00, 1).await.status);
        assert!(mmio_write_on(&s, 2, &w, 0x30, 1).await.status);
        // S2MM into the other client's buffer, MM2S out of it, and one byte
        // past its own: each refused, naming the range, the channel idle.
        for (ch, addr, len) in [(0x30, va, 4096), (0x00, va, 16), (0x30, da, 4097)] {
            assert!(
                mmio_write_on(&s, 2, &w, ch + 0x18, addr as u32)
                    .await
                    .status
            );
            let before = mmio_read(&s, &w, ch + 4, 4).await.data.unwrap();
            let r = mmio_write_on(&s, 2, &w, ch + 0x28, len).await;
            let msg = r.msg.unwrap_or_default();
            let name = if ch == 0 { "MM2S" } else { "S2MM" };
            assert!(!r.status, "{name} {addr:#x}");
            assert!(
                msg.contains(&format!("{name} of axi_dma_0 not started"))
                    && msg.contains(&format!("{addr:#x}..{:#x}", addr + u64::from(len))),
                "{msg}"
            );
            let sr = mmio_read(&s, &w, ch + 4, 4).await.data.unwrap();
            assert_eq!(sr, before, "{name} as it was");
        }
        // Its own buffers: the data comes back; the other's stays untouched.
        direct_loopback(&s, 2, &w, sa, da).await;
        assert_eq!(read_buf(&s, 2, &dst, 0, 0).await.data.unwrap(), pattern());
        assert_eq!(
            read_buf(&s, 1, &victim, 0, 0).await.data.unwrap(),
            vec![0; 4096]
        );
    });
}

/// A PG021 descriptor: 16 words, `len` bytes at `buf`, followed by `next`.
fn descriptor(next: u64, buf: u64, control: u32) -> Vec<u8> {
    let mut w = [0u32; 16];
    w[0] = next as u32;
    w[1] = (next >> 32) as u32;
    w[2] = buf as u32;
    w[3] = (buf >> 32) as u32;
    w[6] = control;
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn a_descriptor_chain_reaching_another_clients_buffer_is_not_started() {
    rt().block_on(async {
        let s = service();
        load_sg(&s).await;
        let dma = s.design().dmas().next().unwrap().0.base;
        assert!(s.design().dmas().next().unwrap().1.params.include_sg);
        let w = window(&s, dma, 0x1_0000).await.mmio_id.unwrap();
        let (victim, va) = buffer(&s, 1, 4096).await;
        let (descs, d) = buffer(&s, 2, 128).await;
        let (src, sa) = buffer(&s, 2, 4096).await;
        let (dst, da) = buffer(&s, 2, 4096).await;
        put(&s, 2, &src, 0, &pattern()).await;
        let s2mm = d + 0x40;
        assert!(mmio_write_on(&s, 2, &w, 0x38, s2mm as u32).await.status);
        assert!(mmio_write_on(&s, 2, &w, 0x30, 1).await.status);
        // A descriptor naming the other client's buffer; a chain that loops
        // without reaching its tail: each refused, naming what. (The tail's
        // NXTDESC is where the channel resumes: it is walked, and checked,
        // at the next start.)
        for (desc, tail, says) in [
            (
                descriptor(s2mm, va, 4096),
                s2mm,
                format!("buffer {va:#x}..{:#x}", va + 4096),
            ),
            (
                descriptor(s2mm, da, 4096),
                s2mm + 0x40,
                format!("does not reach TAILDESC {:#x}", s2mm + 0x40),
            ),
        ] {
            put(&s, 2, &descs, 0x40, &desc).await;
            let before = mmio_read(&s, &w, 0x34, 4).await.data.unwrap();
            let r = mmio_write_on(&s, 2, &w, 0x40, tail as u32).await;
            let msg = r.msg.unwrap_or_default();
            assert!(
                !r.status && msg.contains("S2MM of axi_dma_0 not started"),
                "{msg}"
            );
            assert!(msg.contains(&says), "{msg} lacks {says}");
            let sr = mmio_read(&s, &w, 0x34, 4).await.data.unwrap();
            assert_eq!(sr, before, "S2MM as it was");
        }
        // Its own: the data comes back, the other's buffer untouched.
        sg_loopback(&s, 2, &w, (&descs, d), sa, da).await;
        assert_eq!(read_buf(&s, 2, &dst, 0, 0).await.data.unwrap(), pattern());
        assert_eq!(
            read_buf(&s, 1, &victim, 0, 0).await.data.unwrap(),
            vec![0; 4096]
        );
    });
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

#[test]
fn the_descriptors_an_engine_fetches_are_the_ones_checked() {
    rt().block_on(async {
        let s = service_with(MemoryModel::NonCoherent);
        load_sg(&s).await;
        let w = window(&s, DMA, 0x1_0000).await.mmio_id.unwrap();
        let (victim, va) = buffer(&s, 1, 4096).await;
        let (descs, d) = buffer(&s, 2, 64).await;
        let (mm2s, m) = buffer(&s, 2, 64).await;
        let (src, sa) = buffer(&s, 2, 4096).await;
        let (dst, da) = buffer(&s, 2, 4096).await;
        put(&s, 2, &src, 0, &pattern()).await;
        assert!(mmio_write_on(&s, 2, &w, 0x38, d as u32).await.status);
        assert!(mmio_write_on(&s, 2, &w, 0x30, 1).await.status);
        // Memory names the other client's buffer, the CPU's unflushed copy
        // its own: what is checked is flushed, so the engine fetches that.
        put(&s, 2, &descs, 0, &descriptor(d, va, 4096)).await;
        let own = descriptor(d, da, 4096);
        assert_eq!(write_only(&s, 2, &descs, 0, &own).await, None);
        assert!(mmio_write_on(&s, 2, &w, 0x40, d as u32).await.status);
        assert_eq!(mmio_read(&s, &w, 0x34, 4).await.data.unwrap() & 3, 0);
        // While S2MM runs, its descriptors may be rewritten and flushed: the
        // engine walks the server's copy.
        put(&s, 2, &descs, 0, &descriptor(d, va, 4096)).await;
        // The data lands in the client's own buffer, not the other's.
        put(&s, 2, &mm2s, 0, &descriptor(m, sa, 4096 | 3 << 26)).await;
        for (offset, value) in [(0x08, m as u32), (0x00, 1), (0x10, m as u32)] {
            assert!(mmio_write_on(&s, 2, &w, offset, value).await.status);
        }
        wait_idle(&s, &w, 0x34).await;
        for (c, id, want) in [(2, &dst, pattern()), (1, &victim, vec![0; 4096])] {
            assert_eq!(read_back(&s, c, id).await, want, "{id}");
        }
        // Posted again, then freed: the channel that walks them is stopped.
        put(&s, 2, &descs, 0, &own).await;
        assert!(mmio_write_on(&s, 2, &w, 0x40, d as u32).await.status);
        let r = RemoteBuffer::freebuffer(&s, on(2, FreeBufferRequest { buffer_id: descs }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.msg, None);
        assert_eq!(mmio_read(&s, &w, 0x30, 4).await.data.unwrap() & 1, 0);
    });
}

#[test]
fn a_freed_buffer_stops_only_the_chain_that_reaches_it() {
    rt().block_on(async {
        let s = service();
        load_sg(&s).await;
        let w = window(&s, DMA, 0x1_0000).await.mmio_id.unwrap();
        let (descs, d) = buffer(&s, 2, 64).await;
        let (dst, da) = buffer(&s, 2, 4096).await;
        put(&s, 2, &descs, 0, &descriptor(d, da, 4096)).await;
        for (offset, value) in [(0x38, d as u32), (0x30, 1), (0x40, d as u32)] {
            assert!(mmio_write_on(&s, 2, &w, offset, value).await.status);
        }
        let running = |s: &Service| {
            let s = s.clone();
            let w = w.clone();
            async move {
                let cr = mmio_read(&s, &w, 0x30, 4).await.data.unwrap();
                let sr = mmio_read(&s, &w, 0x34, 4).await.data.unwrap();
                cr & 1 == 1 && sr & 3 == 0
            }
        };
        assert!(running(&s).await, "S2MM waits for data");
        // Another client's buffer goes: the chain runs on.
        let (other, _) = buffer(&s, 1, 4096).await;
        let free = |c: u64, id: String| {
            RemoteBuffer::freebuffer(&s, on(c, FreeBufferRequest { buffer_id: id }))
        };
        assert_eq!(free(1, other).await.unwrap().into_inner().msg, None);
        assert!(running(&s).await, "S2MM still waits for data");
        // The buffer the chain writes goes: the channel is stopped first.
        assert_eq!(free(2, dst).await.unwrap().into_inner().msg, None);
        assert_eq!(mmio_read(&s, &w, 0x30, 4).await.data.unwrap() & 1, 0);
    });
}

/// Connection `c` sends 4 KiB from `sa` to `da` through the direct-mode
/// engine at window `w` (channels started here), and waits for S2MM.
async fn direct_loopback(s: &Service, c: u64, w: &str, sa: u64, da: u64) {
    for (offset, value) in [
        (0x30, 1),
        (0x48, da as u32),
        (0x58, 4096),
        (0x00, 1),
        (0x18, sa as u32),
        (0x28, 4096),
    ] {
        let r = mmio_write_on(s, c, w, offset, value).await;
        assert!(r.status, "{offset:#x}: {:?}", r.msg);
    }
    wait_idle(s, w, 0x34).await;
}

/// Connection `c` sends 4 KiB from `sa` to `da` through the scatter-gather
/// engine at window `w`, one descriptor per channel in the 128-byte buffer
/// `descs` (id, bus address), and waits for S2MM.
async fn sg_loopback(s: &Service, c: u64, w: &str, descs: (&str, u64), sa: u64, da: u64) {
    let (id, d) = descs;
    put(s, c, id, 0x40, &descriptor(d + 0x40, da, 4096)).await;
    put(s, c, id, 0, &descriptor(d, sa, 4096 | 3 << 26)).await;
    for (offset, value) in [
        (0x38, d as u32 + 0x40),
        (0x30, 1),
        (0x40, d as u32 + 0x40),
        (0x08, d as u32),
        (0x00, 1),
        (0x10, d as u32),
    ] {
        let r = mmio_write_on(s, c, w, offset, value).await;
        assert!(r.status, "{offset:#x}: {:?}", r.msg);
    }
    wait_idle(s, w, 0x34).await;
}

/// An AXI DMA module of a `.hwh` as Vivado writes it (the parameters PYNQ
/// reads, lower case).
fn dma_module(name: &str, sg: bool, length_width: u32) -> String {
    let params = [
        ("c_include_sg", u32::from(sg)),
        ("c_sg_length_width", length_width),
        ("c_include_mm2s", 1),
        ("c_include_s2mm", 1),
        ("c_m_axi_mm2s_data_width", 32),
        ("c_m_axi_s2mm_data_width", 32),
        ("c_m_axis_mm2s_tdata_width", 32),
        ("c_s_axis_s2mm_tdata_width", 32),
    ]
    .iter()
    .map(|(k, v)| format!(r#"<PARAMETER NAME="{k}" VALUE="{v}"/>"#))
    .collect::<String>();
    format!(
        r#"<MODULE INSTANCE="{name}" MODTYPE="axi_dma" VLNV="xilinx.com:ip:axi_dma:7.1"><PARAMETERS>{params}</PARAMETERS></MODULE>"#
    )
}

/// A memory-map entry of the PS for `name` at `base` (64 KiB).
fn memrange(name: &str, base: u64) -> String {
    format!(
        r#"<MEMRANGE INSTANCE="{name}" BASEVALUE="{base:#x}" HIGHVALUE="{:#x}" MEMTYPE="REGISTER" MASTERBUSINTERFACE="M_AXI_HPM0_FPD"/>"#,
        base + 0xFFFF
    )
}

#[test]
fn each_dma_of_a_users_design_runs_as_declared() {
    // Two AXI DMAs in a .hwh written here: a direct one at 0xA0000000 with
    // a 23-bit length register, a scatter-gather one at 0xA0010000.
    let (direct, sg) = (0xA000_0000u64, 0xA001_0000u64);
    let hwh = format!(
        r#"<?xml version="1.0"?><EDKSYSTEM><SYSTEMINFO NAME="two"/><MODULES>
<MODULE INSTANCE="zynq_ultra_ps_e_0" MODTYPE="zynq_ultra_ps_e"><MEMORYMAP>{}{}</MEMORYMAP></MODULE>
{}{}</MODULES></EDKSYSTEM>"#,
        memrange("axi_dma_0", direct),
        memrange("axi_dma_1", sg),
        dma_module("axi_dma_0", false, 23),
        dma_module("axi_dma_1", true, 26),
    );
    let path = std::env::temp_dir().join(format!("dmaflow-two-dmas-{}.hwh", std::process::id()));
    std::fs::write(&path, hwh).unwrap();
    let s = Service::new(
        Target::Emulated {
            hwh: Some(path.clone()),
            model: MemoryModel::NonCoherent,
        },
        DDR,
    );
    std::fs::remove_file(&path).unwrap();
    let s = s.unwrap();
    assert!(s.notes().is_empty(), "both emulated: {:?}", s.notes());
    rt().block_on(async {
        let w0 = window(&s, direct, 0x1_0000).await.mmio_id.unwrap();
        let w1 = window(&s, sg, 0x1_0000).await.mmio_id.unwrap();
        // DMASR.SGIncld says how each engine was built.
        for (w, incl) in [(&w0, 0), (&w1, 1 << 3)] {
            let sr = mmio_read(&s, w, 0x04, 4).await.data.unwrap();
            assert_eq!(sr & (1 << 3), incl, "{w}: DMASR {sr:#x}");
        }
        // The direct engine keeps 23 bits of LENGTH.
        let (_, a) = buffer(&s, 1, 64).await;
        assert!(mmio_write_on(&s, 1, &w0, 0x48, a as u32).await.status);
        assert!(mmio_write_on(&s, 1, &w0, 0x58, (1 << 23) | 64).await.status);
        assert_eq!(mmio_read_on(&s, 1, &w0, 0x58).await, 64);
        // Each loops its own data back, from one DDR.
        let (src, sa) = buffer(&s, 1, 4096).await;
        let (d0, da0) = buffer(&s, 1, 4096).await;
        let (d1, da1) = buffer(&s, 1, 4096).await;
        let (descs, d) = buffer(&s, 1, 128).await;
        put(&s, 1, &src, 0, &pattern()).await;
        // S2MM of the direct engine waits for the 64 bytes started above.
        let r = mmio_write_on(&s, 1, &w0, 0x30, 4).await;
        assert!(r.status, "reset: {:?}", r.msg);
        direct_loopback(&s, 1, &w0, sa, da0).await;
        sg_loopback(&s, 1, &w1, (&descs, d), sa, da1).await;
        for id in [&d0, &d1] {
            assert_eq!(read_back(&s, 1, id).await, pattern(), "{id}");
        }
    });
}

/// One request of the fuzz test.
#[derive(Debug, Clone)]
enum Op {
    Alloc(u64, i32),
    Read(u64, usize, i32, i32),
    Free(u64, usize),
    Flush(u64, usize),
    Address(u64, usize),
    Window(u64, u64),
    RegRead(usize, u64, u64),
    RegWrite(usize, u64, u32),
    File(String),
    Attrs(String),
    Clock(i32, i32, i32),
}

fn op() -> impl Strategy<Value = Op> {
    let base = prop_oneof![
        Just(DMA),
        Just(0xFF5E_0000u64),
        Just(0xFD61_5000u64),
        any::<u64>(),
        (0u64..0x2_0000).prop_map(|o| DMA - 0x1_0000 + o),
    ];
    prop_oneof![
        (0u64..3, -8i32..70_000).prop_map(|(c, n)| Op::Alloc(c, n)),
        (0u64..3, 0usize..6, -4i32..70_000, -4i32..70_000)
            .prop_map(|(c, i, a, b)| Op::Read(c, i, a, b)),
        (0u64..3, 0usize..6).prop_map(|(c, i)| Op::Free(c, i)),
        (0u64..3, 0usize..6).prop_map(|(c, i)| Op::Flush(c, i)),
        (0u64..3, 0usize..6).prop_map(|(c, i)| Op::Address(c, i)),
        (base, prop_oneof![Just(4u64), Just(0x1_0000), any::<u64>()])
            .prop_map(|(b, l)| Op::Window(b, l)),
        (0usize..4, 0u64..0x1_0010, 0u64..10).prop_map(|(w, o, l)| Op::RegRead(w, o, l)),
        // Control, status and addresses of both channels, and beyond.
        (
            0usize..4,
            prop_oneof![
                Just(0u64),
                Just(4),
                Just(0x30),
                Just(0x34),
                Just(0x18),
                Just(0x48),
                0u64..0x1_0010
            ],
            any::<u32>()
        )
            .prop_map(|(w, o, v)| Op::RegWrite(w, o, v)),
        prop_oneof![
            Just("/proc/version".to_string()),
            Just("/sys/class/fpga_manager/fpga0/state".to_string()),
            "[/a-z.]{0,30}",
        ]
        .prop_map(Op::File),
        "[a-z./]{0,12}".prop_map(Op::Attrs),
        (-2i32..6, -2i32..70, -2i32..70).prop_map(|(i, a, b)| Op::Clock(i, a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Whatever requests come, in whatever order: every one is answered
    /// (no panic), a buffer is reachable only from its connection, and the
    /// service still answers a plain request afterwards.
    #[test]
    fn random_requests_never_break_the_service(ops in proptest::collection::vec(op(), 1..24)) {
        rt().block_on(async {
            let s = service();
            // Buffers by connection: (id, bytes).
            let mut ids: Vec<(u64, String, usize)> = Vec::new();
            let mut windows: Vec<(String, u64)> = vec![("40400000:10000".into(), 0x1_0000)];
            for op in ops {
                match op {
                    Op::Alloc(c, n) => {
                        let a = alloc(&s, c, n).await;
                        if let Some(id) = a.buffer_id {
                            assert!(n > 0);
                            ids.push((c, id, n as usize));
                        }
                    }
                    Op::Read(c, i, a, b) => {
                        if let Some((owner, id, n)) = ids.get(i).cloned() {
                            let r = read_buf(&s, c, &id, a, b).await;
                            if c != owner {
                                assert!(r.msg.is_some());
                            } else if r.msg.is_none() {
                                let want = if a > 0 || b > 0 { (b - a.max(0)) as usize } else { n };
                                assert_eq!(r.data.unwrap_or_default().len(), want.min(1 << 20));
                            }
                        }
                    }
                    Op::Free(c, i) => {
                        if i < ids.len() {
                            let (owner, id, _) = ids[i].clone();
                            let r = RemoteBuffer::freebuffer(&s, on(c, FreeBufferRequest { buffer_id: id })).await.unwrap().into_inner();
                            assert_eq!(r.msg.is_none(), c == owner);
                            if c == owner {
                                ids.remove(i);
                            }
                        }
                    }
                    Op::Flush(c, i) => {
                        if let Some((owner, id, _)) = ids.get(i).cloned() {
                            let r = RemoteBuffer::flush(&s, on(c, FlushRequest { buffer_id: id })).await.unwrap().into_inner();
                            assert_eq!(r.msg.is_none(), c == owner);
                        }
                    }
                    Op::Address(c, i) => {
                        if let Some((owner, id, _)) = ids.get(i).cloned() {
                            let r = RemoteBuffer::physical_address(&s, on(c, AddressRequest { buffer_id: id })).await.unwrap().into_inner();
                            assert_eq!(r.address.is_some(), c == owner);
                        }
                    }
                    Op::Window(b, l) => {
                        let w = window(&s, b, l).await;
                        if let Some(id) = w.mmio_id {
                            windows.push((id, l));
                        }
                    }
                    Op::RegRead(w, o, l) => {
                        if let Some((id, len)) = windows.get(w).cloned() {
                            let r = mmio_read(&s, &id, o, l).await;
                            let fits = o % 4 == 0 && [1, 2, 4].contains(&l) && o + l <= len;
                            assert_eq!(r.status, fits, "{id} +{o:#x} {l}: {:?}", r.msg);
                        }
                    }
                    Op::RegWrite(w, o, v) => {
                        if let Some((id, _)) = windows.get(w).cloned() {
                            let _ = mmio_write(&s, &id, o, v).await;
                        }
                    }
                    Op::File(p) => {
                        let _ = RemoteDevice::readfile(&s, Request::new(ReadFileRequest { file_path: p.clone() })).await;
                        let _ = RemoteDevice::existsfile(&s, Request::new(ExistsFileRequest { file_path: p })).await.unwrap();
                    }
                    Op::Attrs(n) => {
                        let _ = RemoteDevice::set_bitstream_attrs(&s, Request::new(SetBitstreamAttrsRequest { binfile_name: n, partial: false })).await.unwrap();
                    }
                    Op::Clock(i, a, b) => {
                        let r = RemoteDevice::set_pl_clk(&s, Request::new(SetPlClkRequest { i, div0: a, div1: b, clk_mhz: 0 })).await.unwrap().into_inner();
                        assert_eq!(r.status, (0..4).contains(&i) && (1..64).contains(&a) && (1..64).contains(&b));
                    }
                }
            }
            let e = RemoteDevice::existsfile(&s, Request::new(ExistsFileRequest { file_path: "/proc/version".into() })).await.unwrap().into_inner();
            assert!(e.exists);
            for c in 0..3 {
                s.disconnect(Connection(c));
            }
            assert_eq!(s.buffers(), 0);
        });
    }
}
