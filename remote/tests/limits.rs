//! The server's caps and parameter checks against a hostile client speaking
//! raw gRPC over its own connections: each cap refused with an error naming
//! its option, negative offsets and unknown MMIO windows refused on writes
//! as on reads, and an emulated stream packet without end past its bound
//! reported as an engine error instead of growing memory.

mod grpc;

use std::time::{Duration, Instant};

use dmaflow::axi::regs::*;
use dmaflow_remote::Limits;
use dmaflow_remote::proto::buffer::*;
use dmaflow_remote::proto::mmio::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use dmaflow_remote::proto::remote_device::{WriteFileRequest, WriteFileResponse};
use grpc::{Client, frame, replies, runtime, serve};

const MIB: usize = 1 << 20;
/// The loopback designs' engine.
const DMA: u64 = 0x4040_0000;

async fn alloc(c: &mut Client, size: usize) -> AllocateResponse {
    let q = AllocateRequest {
        size: size as i32,
        dtype: "<u4".into(),
        cacheable: true,
    };
    c.unary("/buffer.RemoteBuffer/allocate", &q).await.unwrap()
}

async fn address(c: &mut Client, id: &str) -> u64 {
    let q = AddressRequest {
        buffer_id: id.into(),
    };
    let r: AddressResponse = c
        .unary("/buffer.RemoteBuffer/physical_address", &q)
        .await
        .unwrap();
    r.address.unwrap()
}

async fn put(c: &mut Client, id: &str, at: usize, data: &[u8]) -> Option<String> {
    let q = BufferWriteRequest {
        buffer_id: id.into(),
        data: data.to_vec(),
        start: at as i32,
        end: (at + data.len()) as i32,
    };
    let r: BufferWriteResponse = c.unary("/buffer.RemoteBuffer/write", &q).await.unwrap();
    r.msg
}

async fn mmio_write(c: &mut Client, id: &str, offset: u64, v: u32) -> WriteResponse {
    let q = WriteRequest {
        mmio_id: id.into(),
        offset,
        data: v.to_le_bytes().to_vec(),
    };
    c.unary("/mmio.Mmio/write", &q).await.unwrap()
}

async fn mmio_read(c: &mut Client, id: &str, offset: u64) -> ReadResponse {
    let q = ReadRequest {
        mmio_id: id.into(),
        length: 4,
        offset,
        word_order: "little".into(),
    };
    c.unary("/mmio.Mmio/read", &q).await.unwrap()
}

/// A file write of `chunks` chunks of `size` bytes each.
fn upload(path: &str, chunks: usize, size: usize) -> Vec<WriteFileRequest> {
    (0..chunks)
        .map(|_| WriteFileRequest {
            file_path: path.into(),
            data: vec![0x5a; size],
        })
        .collect()
}

#[test]
fn each_cap_is_refused_with_an_error_naming_its_option() {
    let rt = runtime();
    let limits = Limits {
        client_dma: MIB,
        total_dma: 3 * MIB / 2,
        client_in_flight: 4 * MIB,
        total_in_flight: 6 * MIB,
        ..Limits::default()
    };
    let (addr, _server) = serve(&rt, 16 * MIB, limits);
    grpc::within(&rt, async {
        let mut a = Client::connect(addr).await.unwrap();
        let mut b = Client::connect(addr).await.unwrap();
        // DMA memory: one client's, then everyone's.
        assert!(alloc(&mut a, MIB).await.buffer_id.is_some());
        let refused = alloc(&mut a, 4096).await.msg.unwrap();
        assert!(refused.contains("--client-dma-memory"), "{refused}");
        assert!(alloc(&mut b, MIB / 4).await.buffer_id.is_some());
        let refused = alloc(&mut b, MIB / 2).await.msg.unwrap();
        assert!(refused.contains("--max-dma-memory"), "{refused}");
        assert!(alloc(&mut b, MIB / 4).await.buffer_id.is_some());

        // Data in flight: one client's upload past its cap.
        let path = "/lib/firmware/big.bin";
        let r = a
            .call::<_, WriteFileResponse>(
                "/remote_device.RemoteDevice/writefile",
                &upload(path, 5, MIB),
            )
            .await;
        let refused = r.unwrap_err();
        assert!(refused.contains("--client-in-flight"), "{refused}");
        // Within the cap, it is stored.
        let r = a
            .call::<_, WriteFileResponse>(
                "/remote_device.RemoteDevice/writefile",
                &upload(path, 3, MIB),
            )
            .await;
        assert!(r.is_ok(), "{r:?}");

        // Everyone's: two unfinished uploads, each within its client's cap,
        // together past the cap on all: the later is refused.
        let (mut tx_a, resp_a) = a
            .open("/remote_device.RemoteDevice/writefile")
            .await
            .unwrap();
        let (mut tx_b, resp_b) = b
            .open("/remote_device.RemoteDevice/writefile")
            .await
            .unwrap();
        for m in upload("/lib/firmware/a.bin", 4, MIB) {
            tx_a.send_data(frame(&m), false).unwrap();
        }
        for m in upload("/lib/firmware/b.bin", 4, MIB) {
            tx_b.send_data(frame(&m), false).unwrap();
        }
        let first = tokio::select! {
            r = replies::<WriteFileResponse>(resp_a) => r,
            r = replies::<WriteFileResponse>(resp_b) => r,
        };
        let refused = first.unwrap_err();
        assert!(refused.contains("--max-in-flight"), "{refused}");
    });
}

#[test]
fn a_buffer_read_past_the_cap_on_data_in_flight_is_refused_and_its_charge_given_back() {
    let rt = runtime();
    let limits = Limits {
        client_in_flight: 3 * MIB,
        ..Limits::default()
    };
    let (addr, _server) = serve(&rt, 16 * MIB, limits);
    grpc::within(&rt, async {
        let mut a = Client::connect_with_window(addr, 64 << 10).await.unwrap();
        let id = alloc(&mut a, 4 * MIB).await.buffer_id.unwrap();
        // A read holds one 2 MiB chunk until the client takes it: a read
        // left untaken, and a second one passes the 3 MiB cap.
        let q = BufferReadRequest {
            buffer_id: id.clone(),
            start: 0,
            end: 0,
        };
        let (mut tx, held) = a.open("/buffer.RemoteBuffer/read").await.unwrap();
        tx.send_data(frame(&q), true).unwrap();
        let held = held.await.unwrap();
        let second: Vec<BufferReadResponse> = a
            .call("/buffer.RemoteBuffer/read", std::slice::from_ref(&q))
            .await
            .unwrap();
        let refused = second[0].msg.clone().unwrap();
        assert!(refused.contains("--client-in-flight"), "{refused}");
        // Taken whole, the first gives its charge back: a read goes through.
        let mut body = held.into_body();
        let mut got = 0;
        while let Some(d) = body.data().await {
            let d = d.unwrap();
            let _ = body.flow_control().release_capacity(d.len());
            got += d.len();
        }
        assert!(got >= 4 * MIB, "{got} bytes of a 4 MiB buffer");
        let again: Vec<BufferReadResponse> =
            a.call("/buffer.RemoteBuffer/read", &[q]).await.unwrap();
        assert!(again[0].msg.is_none(), "{:?}", again[0].msg);
        let bytes: usize = again.iter().map(|r| r.data.as_ref().unwrap().len()).sum();
        assert_eq!(bytes, 4 * MIB);
    });
}

#[test]
fn negative_offsets_and_unknown_windows_are_refused_on_writes_as_on_reads() {
    let rt = runtime();
    let (addr, _server) = serve(&rt, 16 * MIB, Limits::default());
    grpc::within(&rt, async {
        let mut c = Client::connect(addr).await.unwrap();
        let id = alloc(&mut c, 64).await.buffer_id.unwrap();
        assert_eq!(put(&mut c, &id, 0, &[7; 64]).await, None);
        // A chunk at a negative offset: refused, nothing written.
        let q = BufferWriteRequest {
            buffer_id: id.clone(),
            data: vec![1; 8],
            start: -8,
            end: 0,
        };
        let r: BufferWriteResponse = c.unary("/buffer.RemoteBuffer/write", &q).await.unwrap();
        assert!(
            r.msg.as_deref().unwrap_or("").contains("negative"),
            "{:?}",
            r.msg
        );
        let q = BufferWriteRequest {
            buffer_id: id.clone(),
            data: vec![1; 8],
            start: 0,
            end: -8,
        };
        let r: BufferWriteResponse = c.unary("/buffer.RemoteBuffer/write", &q).await.unwrap();
        assert!(
            r.msg.as_deref().unwrap_or("").contains("negative"),
            "{:?}",
            r.msg
        );
        // A read from a negative offset: refused, not clamped to 0.
        let q = BufferReadRequest {
            buffer_id: id.clone(),
            start: -4,
            end: 8,
        };
        let r: Vec<BufferReadResponse> = c.call("/buffer.RemoteBuffer/read", &[q]).await.unwrap();
        assert!(r[0].data.is_none(), "{:?}", r[0].data);
        assert!(
            r[0].msg.as_deref().unwrap_or("").contains("negative"),
            "{:?}",
            r[0].msg
        );
        let whole = BufferReadRequest {
            buffer_id: id.clone(),
            start: 0,
            end: 0,
        };
        let r: Vec<BufferReadResponse> =
            c.call("/buffer.RemoteBuffer/read", &[whole]).await.unwrap();
        assert_eq!(r[0].data.as_deref(), Some(&[7u8; 64][..]));

        // An MMIO window id naming no window of the design: refused on a
        // write as on a read, though the word it would reach is a register.
        let real = format!("{DMA:x}:10000");
        let bogus = format!("{DMA:x}:100000000");
        let r = mmio_read(&mut c, &bogus, (S2MM + DMACR) as u64).await;
        assert!(!r.status, "read through {bogus}");
        let before = mmio_read(&mut c, &real, (S2MM + DMACR) as u64).await.data;
        let r = mmio_write(&mut c, &bogus, (S2MM + DMACR) as u64, 0x0001_0000).await;
        assert!(!r.status, "write through {bogus}");
        assert!(
            r.msg.as_deref().unwrap_or("").contains("no MMIO window"),
            "{:?}",
            r.msg
        );
        let after = mmio_read(&mut c, &real, (S2MM + DMACR) as u64).await.data;
        assert_eq!(before, after);
        // Through the real window, the same write goes.
        let r = mmio_write(&mut c, &real, (S2MM + DMACR) as u64, 0x0001_0000).await;
        assert!(r.status, "{:?}", r.msg);
    });
}

/// A PG021 descriptor: `control` (length and flags) at `buf`, then `next`.
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
fn a_cyclic_chain_without_end_of_frame_is_an_s2mm_error_not_memory() {
    let rt = runtime();
    let (addr, server) = serve(&rt, 16 * MIB, Limits::default());
    grpc::within(&rt, async {
        let mut c = Client::connect(addr).await.unwrap();
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
            let r = c
                .call::<_, WriteFileResponse>("/remote_device.RemoteDevice/writefile", &[m])
                .await;
            assert!(r.is_ok(), "{r:?}");
        }
        let w = format!("{DMA:x}:10000");
        // One MM2S descriptor of 1 MiB pointing at itself, without TXEOF; an
        // S2MM descriptor of 4 KiB waiting for a packet.
        let descs = alloc(&mut c, 256).await.buffer_id.unwrap();
        let src = alloc(&mut c, MIB).await.buffer_id.unwrap();
        let dst = alloc(&mut c, 4096).await.buffer_id.unwrap();
        let (d, sa, da) = (
            address(&mut c, &descs).await,
            address(&mut c, &src).await,
            address(&mut c, &dst).await,
        );
        let (mm2s_desc, s2mm_desc) = (d, d + 64);
        let mut table = descriptor(mm2s_desc, sa, MIB as u32);
        table.extend(descriptor(s2mm_desc, da, 4096));
        assert_eq!(put(&mut c, &descs, 0, &table).await, None);
        for (ch, desc, cr) in [
            (S2MM, s2mm_desc, DMACR_RS),
            (MM2S, mm2s_desc, DMACR_RS | DMACR_CYCLIC),
        ] {
            let ch = ch as u64;
            for (reg, v) in [(CURDESC, desc as u32), (DMACR, cr), (TAILDESC, desc as u32)] {
                let r = mmio_write(&mut c, &w, ch + reg as u64, v).await;
                assert!(r.status, "{:?}", r.msg);
            }
        }
        // Past 64 MiB of one packet the S2MM side reports DMAIntErr and
        // halts; the server goes on serving.
        let end = Instant::now() + Duration::from_secs(10);
        let sr = loop {
            let sr = mmio_read(&mut c, &w, (S2MM + DMASR) as u64)
                .await
                .data
                .unwrap();
            if sr & DMASR_DMA_INT_ERR != 0 || Instant::now() > end {
                break sr;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_ne!(sr & DMASR_DMA_INT_ERR, 0, "S2MM DMASR {sr:#x}");
        assert_ne!(sr & DMASR_HALTED, 0, "S2MM DMASR {sr:#x}");
        assert_ne!(sr & DMASR_ERR_IRQ, 0, "S2MM DMASR {sr:#x}");
        // Nothing of the overlong packet reached the S2MM buffer.
        let q = BufferReadRequest {
            buffer_id: dst,
            start: 0,
            end: 0,
        };
        let r: Vec<BufferReadResponse> = c.call("/buffer.RemoteBuffer/read", &[q]).await.unwrap();
        assert!(r[0].data.as_ref().unwrap().iter().all(|&b| b == 0));
        // A reset brings the engine back.
        let r = mmio_write(&mut c, &w, DMACR as u64, DMACR_RESET).await;
        assert!(r.status, "{:?}", r.msg);
    });
    assert!(!server.is_finished());
}

/// Loads the emulated design `name`, as PYNQ's client does.
async fn load(c: &mut Client, name: &str) {
    for (path, data) in [
        (format!("/lib/firmware/{name}.bin"), vec![0u8; 64]),
        (
            "/sys/class/fpga_manager/fpga0/firmware".to_string(),
            format!("{name}.bin").into_bytes(),
        ),
    ] {
        let m = WriteFileRequest {
            file_path: path,
            data,
        };
        let r = c
            .call::<_, WriteFileResponse>("/remote_device.RemoteDevice/writefile", &[m])
            .await;
        assert!(r.is_ok(), "{r:?}");
    }
}

#[test]
fn every_design_loaded_shares_the_servers_one_dma_memory() {
    let rt = runtime();
    let (addr, _server) = serve(&rt, 16 * MIB, Limits::default());
    grpc::within(&rt, async {
        let mut c = Client::connect(addr).await.unwrap();
        let kept = alloc(&mut c, 12 * MIB).await.buffer_id.unwrap();
        let pattern: Vec<u8> = (0..4096).map(|i| (i % 253) as u8).collect();
        assert_eq!(put(&mut c, &kept, 0, &pattern).await, None);
        for name in [
            "loopback-sg",
            "fir",
            "bgsub",
            "loopback",
            "loopback-sg",
            "fir",
        ] {
            load(&mut c, name).await;
            // The memory the first buffer holds is not there to be had
            // again: one DDR, whatever is loaded.
            let r = alloc(&mut c, 12 * MIB).await;
            assert!(
                r.buffer_id.is_none(),
                "12 MiB twice from 16 MiB after {name}"
            );
            let small = alloc(&mut c, MIB).await.buffer_id.unwrap();
            let f = FreeBufferRequest { buffer_id: small };
            let _: FreeBufferResponse = c
                .unary("/buffer.RemoteBuffer/freebuffer", &f)
                .await
                .unwrap();
        }
        let q = BufferReadRequest {
            buffer_id: kept,
            start: 0,
            end: 4096,
        };
        let r: Vec<BufferReadResponse> = c.call("/buffer.RemoteBuffer/read", &[q]).await.unwrap();
        assert_eq!(r[0].data.as_deref(), Some(&pattern[..]));
    });
}

#[test]
fn file_reads_are_data_in_flight_until_taken() {
    let rt = runtime();
    let limits = Limits {
        client_in_flight: 6 * MIB,
        ..Limits::default()
    };
    let (addr, _server) = serve(&rt, 16 * MIB, limits);
    grpc::within(&rt, async {
        let mut c = Client::connect_with_window(addr, 64 << 10).await.unwrap();
        let path = "/lib/firmware/four.bin";
        let r = c
            .call::<_, WriteFileResponse>(
                "/remote_device.RemoteDevice/writefile",
                &upload(path, 4, MIB),
            )
            .await;
        assert!(r.is_ok(), "{r:?}");
        let q = dmaflow_remote::proto::remote_device::ReadFileRequest {
            file_path: path.into(),
        };
        // One read left untaken holds 4 MiB; a second passes the 6 MiB cap.
        let (mut tx, held) = c
            .open("/remote_device.RemoteDevice/readfile")
            .await
            .unwrap();
        tx.send_data(frame(&q), true).unwrap();
        let held = held.await.unwrap();
        let second = c
            .call::<_, dmaflow_remote::proto::remote_device::ReadFileResponse>(
                "/remote_device.RemoteDevice/readfile",
                std::slice::from_ref(&q),
            )
            .await;
        let refused = second.unwrap_err();
        assert!(refused.contains("--client-in-flight"), "{refused}");
        drop(held);
    });
}
