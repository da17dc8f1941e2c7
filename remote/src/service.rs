//! The request handlers of PYNQ.remote's four services, answered as pynq-cpp
//! answers them: over the loaded design's registers, the board's DMA memory,
//! the PS registers and the server's own file set. Every id, address, offset
//! and length a request carries is checked; a bad one is an error in the
//! reply (the message's `msg`, or a gRPC status where the message has none).

// tonic's handlers answer `Result<_, tonic::Status>`, a large error type
// the generated traits fix.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use dmaflow::platform::MemoryModel;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::Error;
use crate::board::{Buffer, Ddr, Loaded, Target};
use crate::caps::{Caps, Charge, Limits};
use crate::design::Design;
use crate::engine::{Engines, Own};
use crate::files::{self, Files};
use crate::gpio::{Gpio, PsGpio, SysfsGpio};
use crate::proto::{buffer as pb, gpio as pg, mmio as pm, remote_device as pd};
use crate::ps::PsRegisters;

/// Bytes of a buffer or file sent in one reply message (PYNQ's client
/// takes messages up to gRPC's default 4 MiB, and sends 2 MiB chunks).
const CHUNK: usize = 2 << 20;
/// Largest window `get_mmio` opens (the largest IP range served).
const MAX_WINDOW: u64 = 1 << 32;
/// Largest buffer one request allocates.
const MAX_BUFFER: usize = 1 << 30;
/// Largest value written to an FPGA manager attribute.
const MAX_ATTRIBUTE: usize = 4096;

/// The connection a request came on: buffers are reachable only from the
/// connection that allocated them. Put in each request's extensions by the
/// server; requests without one are connection 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Connection(pub u64);

/// A stream of replies.
type Replies<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// What the handlers share: the board and the clients' buffers.
struct Shared {
    target: Target,
    /// The user's design (`--hwh`), loaded whatever is downloaded.
    user: Option<Design>,
    /// The emulated board's DMA memory, for every design loaded.
    ddr: Option<Ddr>,
    /// What clients hold, under the server's caps.
    caps: Caps,
    state: Mutex<State>,
    ps: PsRegisters,
    buffers: Mutex<HashMap<u64, Arc<Mutex<Buffer>>>>,
    next_buffer: AtomicU64,
    /// The board's PS GPIO.
    gpio: Gpio,
}

/// The design loaded, its engines and the file set.
struct State {
    loaded: Arc<Loaded>,
    engines: Arc<Engines>,
    files: Files,
}

/// PYNQ.remote's services over one board (cheap to clone: one board
/// shared by every clone).
#[derive(Clone)]
pub struct Service {
    shared: Arc<Shared>,
}

/// Locks a mutex, a poisoned one included (every state stays consistent
/// between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The connection of a request.
fn conn<T>(r: &Request<T>) -> u64 {
    r.extensions().get::<Connection>().map_or(0, |c| c.0)
}

impl Service {
    /// The services over `target`, with `ddr_bytes` of DMA memory on the
    /// emulated board, under the default [`Limits`]. The emulated board
    /// starts with the user's design (`hwh`) or `loopback` loaded.
    pub fn new(target: Target, ddr_bytes: usize) -> Result<Self, Error> {
        Self::with_limits(target, ddr_bytes, Limits::default())
    }

    /// Like [`new`](Self::new), under `limits`.
    pub fn with_limits(target: Target, ddr_bytes: usize, limits: Limits) -> Result<Self, Error> {
        let read_hwh = |p: &std::path::Path| -> Result<Design, Error> {
            let text = std::fs::read_to_string(p).map_err(|e| Error::Io {
                path: p.to_path_buf(),
                source: e,
            })?;
            crate::hwh::parse(&text, p)
        };
        let (user, loaded, ddr) = match &target {
            Target::Emulated { hwh, model } => {
                let user = hwh.as_deref().map(read_hwh).transpose()?;
                let design = match &user {
                    Some(d) => d.clone(),
                    None => Design::builtin("loopback")
                        .ok_or(Error::UnknownDesign("loopback".into()))?,
                };
                let ddr = Ddr::new(*model, ddr_bytes)?;
                (user, Loaded::emulate(design, &ddr)?, Some(ddr))
            }
            Target::Board { root, memory, hwh } => {
                let user = hwh.as_deref().map(read_hwh).transpose()?;
                (user.clone(), Loaded::open(root, memory, user)?, None)
            }
        };
        let gpio = match &target {
            Target::Emulated { .. } => Gpio::Emulated(PsGpio::default()),
            Target::Board { root, .. } => Gpio::Sysfs(SysfsGpio::new(root)),
        };
        let engines = Arc::new(Engines::new(&loaded).map_err(Error::Design)?);
        Ok(Service {
            shared: Arc::new(Shared {
                target,
                user,
                ddr,
                caps: Caps::new(limits),
                state: Mutex::new(State {
                    loaded: Arc::new(loaded),
                    engines,
                    files: Files::default(),
                }),
                ps: PsRegisters::new(),
                buffers: Mutex::new(HashMap::new()),
                next_buffer: AtomicU64::new(1),
                gpio,
            }),
        })
    }

    /// The design loaded now.
    pub fn design(&self) -> Design {
        lock(&self.shared.state).loaded.design.clone()
    }

    /// What the emulator does not model in the design loaded now.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.shared.state).loaded.notes.clone()
    }

    /// Buffers allocated and not yet freed, over every connection.
    pub fn buffers(&self) -> usize {
        lock(&self.shared.buffers).len()
    }

    /// The loaded design.
    fn loaded(&self) -> Arc<Loaded> {
        lock(&self.shared.state).loaded.clone()
    }

    /// The loaded design and its engines.
    fn board(&self) -> (Arc<Loaded>, Arc<Engines>) {
        let st = lock(&self.shared.state);
        (st.loaded.clone(), st.engines.clone())
    }

    /// Frees every buffer of connection `c` (it has gone): engines that could
    /// still write into them are halted first.
    pub fn disconnect(&self, c: Connection) {
        let gone: Vec<Arc<Mutex<Buffer>>> = {
            let mut map = lock(&self.shared.buffers);
            let ids: Vec<u64> = map
                .iter()
                .filter(|(_, b)| lock(b).owner == c.0)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        let (loaded, engines) = self.board();
        if !engines.release(&loaded, c.0, None) {
            for b in &gone {
                lock(b).buf.surrender();
            }
        }
    }

    /// Gives buffers of connection `c` back to their pools once no transfer
    /// can reach them: an engine `c` holds whose transfer in flight reaches
    /// one is halted first (the library's driver); an engine that cannot be
    /// confirmed halted keeps the buffers for good.
    fn release(&self, c: u64, bufs: Vec<Arc<Mutex<Buffer>>>) {
        let (loaded, engines) = self.board();
        for b in bufs {
            let (range, current) = {
                let g = lock(&b);
                (
                    (g.buf.bus_addr(), g.buf.byte_len() as u64),
                    Arc::ptr_eq(&g.loaded, &loaded),
                )
            };
            // A buffer of a design loaded before: its engines were halted
            // when the design was replaced.
            if current && !engines.release(&loaded, c, Some(&[range])) {
                lock(&b).buf.surrender();
            }
        }
    }

    /// Copies what the engines completed back into connection `c`'s
    /// descriptors, before it reads its buffers.
    fn sync_descriptors(&self, c: u64) {
        let (loaded, engines) = self.board();
        engines.sync(c, &|| self.own(c, &loaded));
    }

    /// Buffer `id` of connection `c`.
    fn buffer(&self, c: u64, id: &str) -> Result<Arc<Mutex<Buffer>>, String> {
        let missing =
            || format!("no buffer {id:?} allocated by this client (never allocated, or freed)");
        let n: u64 = id.parse().map_err(|_| missing())?;
        let map = lock(&self.shared.buffers);
        let b = map.get(&n).ok_or_else(missing)?;
        if lock(b).owner != c {
            return Err(missing());
        }
        Ok(b.clone())
    }

    /// The buffers of connection `c` in `loaded`'s memory, by bus address.
    fn own(&self, c: u64, loaded: &Arc<Loaded>) -> Own {
        let bufs: Vec<Arc<Mutex<Buffer>>> = lock(&self.shared.buffers)
            .values()
            .filter(|b| {
                let g = lock(b);
                g.owner == c && Arc::ptr_eq(&g.loaded, loaded)
            })
            .cloned()
            .collect();
        let mut own = Own::default();
        for b in bufs {
            let (addr, len) = {
                let g = lock(&b);
                (g.buf.bus_addr(), g.bytes as u64)
            };
            own.insert(addr, len, b);
        }
        own
    }

    /// Loads the bitstream `name` from `/lib/firmware` onto the board: on
    /// the emulated board the design it names (the user's design with
    /// `--hwh`), reset as a download resets it; on a real board through the
    /// FPGA manager.
    fn program(&self, name: &str) -> Result<(), String> {
        let mut st = lock(&self.shared.state);
        let bin = st
            .files
            .firmware(name)
            .ok_or_else(|| format!("/lib/firmware/{name} does not exist: write it first"))?
            .to_vec();
        match &self.shared.target {
            Target::Emulated { .. } => {
                let design = match &self.shared.user {
                    Some(d) => d.clone(),
                    None => {
                        let named = crate::hwh::bin_design(&bin)
                            .or_else(|| name.strip_suffix(".bin").map(str::to_string));
                        named.as_deref().and_then(Design::builtin).ok_or_else(|| {
                            format!(
                                "{name} names no design of the emulated board ({}); \
                                     write one with `dmaflow overlay export`, or serve your \
                                     design with `dmaflow serve --hwh`",
                                dmaflow::designs::names().join(", ")
                            )
                        })?
                    }
                };
                let loaded = if st.loaded.design == design {
                    None
                } else {
                    // The engines loaded halt (in `replace_engines`) before
                    // another design's engines reach the same memory: the new
                    // design's engines are built in reset and start nothing.
                    let ddr = self.shared.ddr.as_ref().ok_or("no emulated DMA memory")?;
                    Some(Loaded::emulate(design, ddr).map_err(|e| e.to_string())?)
                };
                Self::replace_engines(&mut st, loaded)?;
            }
            Target::Board { root, .. } => {
                let firmware = root.join("lib/firmware").join(name);
                std::fs::write(&firmware, &bin)
                    .map_err(|e| format!("{}: {e}", firmware.display()))?;
                let mgr = root.join("sys/class/fpga_manager/fpga0");
                std::fs::write(mgr.join("flags"), st.files.flags.as_bytes())
                    .and_then(|()| std::fs::write(mgr.join("firmware"), name.as_bytes()))
                    .map_err(|e| format!("{}: {e}", mgr.display()))?;
                Self::replace_engines(&mut st, None)?;
            }
        }
        st.files.programmed = name.to_string();
        Ok(())
    }

    /// Halts the engines of the design loaded now, then loads `loaded` (or
    /// resets the design, as a download of it does) with engines of its own.
    fn replace_engines(st: &mut State, loaded: Option<Loaded>) -> Result<(), String> {
        if !st.engines.halt_all(&st.loaded) {
            st.engines.surrender();
        }
        match loaded {
            Some(l) => st.loaded = Arc::new(l),
            None => st.loaded.reset(),
        }
        st.engines = Arc::new(Engines::new(&st.loaded)?);
        Ok(())
    }

    /// The window an mmio id names, if it lies in one IP's window or one PS
    /// register block of what is loaded now.
    fn window(&self, id: &str) -> Result<(u64, u64), String> {
        let (base, len) = parse_mmio_id(id).ok_or_else(|| format!("no MMIO window {id:?}"))?;
        let loaded = self.loaded();
        if len > 0 && (loaded.maps(base, len) || PsRegisters::block(base, len).is_some()) {
            Ok((base, len))
        } else {
            Err(format!(
                "no MMIO window {id:?} in the {:?} design",
                loaded.design.name
            ))
        }
    }

    /// Reads the 32-bit word at `addr` for connection `c`: the design's
    /// registers (an AXI DMA's channel registers through `c`'s view of the
    /// engine) or the PS's.
    fn read_word(&self, c: u64, addr: u64) -> Result<u32, String> {
        let (loaded, engines) = self.board();
        if engines.covers(addr) {
            return engines
                .read(&loaded, c, addr, &|| self.own(c, &loaded))
                .map_err(|e| e.to_string());
        }
        if loaded.maps(addr, 4) {
            return loaded.read(addr).map_err(|e| e.to_string());
        }
        if PsRegisters::block(addr, 4).is_some() {
            return Ok(self.shared.ps.read(addr));
        }
        Err(unmapped(&loaded, addr, 4))
    }

    /// Writes the 32-bit word at `addr` for connection `c`: an AXI DMA's
    /// channel registers through `c`'s view of the engine (the server
    /// programs the engine at a start, over `c`'s buffers only).
    fn write_word(&self, c: u64, addr: u64, value: u32) -> Result<(), String> {
        let (loaded, engines) = self.board();
        if engines.covers(addr) {
            return engines
                .write(&loaded, c, addr, value, &|| self.own(c, &loaded))
                .map_err(|e| e.to_string());
        }
        if loaded.maps(addr, 4) {
            return loaded.write(addr, value).map_err(|e| e.to_string());
        }
        if PsRegisters::block(addr, 4).is_some() {
            self.shared.ps.write(addr, value);
            return Ok(());
        }
        Err(unmapped(&loaded, addr, 4))
    }
}

/// The refusal of an access outside every window.
fn unmapped(loaded: &Loaded, addr: u64, len: u64) -> String {
    format!(
        "{addr:#x}..{:#x} is outside every IP of the {:?} design and the PS registers",
        addr.saturating_add(len),
        loaded.design.name
    )
}

/// An mmio id: the window's base and length, checked again at every access
/// (windows change when a design is loaded; nothing is kept per window).
fn mmio_id(base: u64, len: u64) -> String {
    format!("{base:x}:{len:x}")
}

/// The window an mmio id names.
fn parse_mmio_id(id: &str) -> Option<(u64, u64)> {
    let (b, l) = id.split_once(':')?;
    Some((
        u64::from_str_radix(b, 16).ok()?,
        u64::from_str_radix(l, 16).ok()?,
    ))
}

#[tonic::async_trait]
impl pm::mmio_server::Mmio for Service {
    async fn get_mmio(
        &self,
        request: Request<pm::GetMmioRequest>,
    ) -> Result<Response<pm::GetMmioResponse>, Status> {
        let r = request.into_inner();
        let loaded = self.loaded();
        let ok = r.length > 0
            && r.length <= MAX_WINDOW
            && (loaded.maps(r.base_addr, r.length)
                || PsRegisters::block(r.base_addr, r.length).is_some());
        Ok(Response::new(if ok {
            pm::GetMmioResponse {
                status: true,
                msg: None,
                mmio_id: Some(mmio_id(r.base_addr, r.length)),
            }
        } else {
            pm::GetMmioResponse {
                status: false,
                msg: Some(if r.length == 0 {
                    format!("an MMIO window at {:#x} of length 0", r.base_addr)
                } else {
                    unmapped(&loaded, r.base_addr, r.length)
                }),
                mmio_id: None,
            }
        }))
    }

    async fn read(
        &self,
        request: Request<pm::ReadRequest>,
    ) -> Result<Response<pm::ReadResponse>, Status> {
        let c = conn(&request);
        let r = request.into_inner();
        let fail = |msg: String| {
            Ok(Response::new(pm::ReadResponse {
                status: false,
                msg: Some(msg),
                data: None,
            }))
        };
        let (base, len) = match self.window(&r.mmio_id) {
            Ok(w) => w,
            Err(e) => return fail(e),
        };
        if ![1, 2, 4].contains(&r.length) {
            return fail(format!(
                "MMIO reads of {} bytes: the protocol's data field holds 1, 2 or 4",
                r.length
            ));
        }
        if !r.offset.is_multiple_of(4) {
            return fail(format!("unaligned read at offset {:#x}", r.offset));
        }
        if r.offset.checked_add(r.length).is_none_or(|e| e > len) {
            return fail(format!(
                "read of {} bytes at offset {:#x} is outside the {len:#x}-byte window at {base:#x}",
                r.length, r.offset
            ));
        }
        match self.read_word(c, base + r.offset) {
            Ok(w) => {
                let mask = if r.length == 4 {
                    u32::MAX
                } else {
                    (1 << (8 * r.length)) - 1
                };
                Ok(Response::new(pm::ReadResponse {
                    status: true,
                    msg: None,
                    data: Some(w & mask),
                }))
            }
            Err(e) => fail(e),
        }
    }

    async fn write(
        &self,
        request: Request<pm::WriteRequest>,
    ) -> Result<Response<pm::WriteResponse>, Status> {
        let c = conn(&request);
        let r = request.into_inner();
        let result = (|| {
            let (base, len) = self.window(&r.mmio_id)?;
            if !r.offset.is_multiple_of(4) || !r.data.len().is_multiple_of(4) || r.data.is_empty() {
                return Err(format!(
                    "unaligned write: offset {:#x}, {} bytes (both must be multiples of 4)",
                    r.offset,
                    r.data.len()
                ));
            }
            if r.offset
                .checked_add(r.data.len() as u64)
                .is_none_or(|e| e > len)
            {
                return Err(format!(
                    "write of {} bytes at offset {:#x} is outside the {len:#x}-byte window at {base:#x}",
                    r.data.len(),
                    r.offset
                ));
            }
            Ok((base, r.offset, r.data))
        })();
        let result = match result {
            Ok((base, offset, data)) => {
                let data_len = data.len();
                let words = move |s: &Service| -> Result<(), String> {
                    for (i, w) in data.chunks_exact(4).enumerate() {
                        let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                        s.write_word(c, base + offset + 4 * i as u64, v)?;
                    }
                    Ok(())
                };
                // A chain walk or a halt runs off the async worker threads.
                let (_, engines) = self.board();
                let n = (data_len / 4) as u64;
                if (0..n).any(|i| engines.blocks(base + offset + 4 * i)) {
                    let s = self.clone();
                    tokio::task::spawn_blocking(move || words(&s))
                        .await
                        .unwrap_or_else(|e| Err(format!("register write failed: {e}")))
                } else {
                    words(self)
                }
            }
            Err(e) => Err(e),
        };
        Ok(Response::new(match result {
            Ok(()) => pm::WriteResponse {
                status: true,
                msg: None,
            },
            Err(msg) => pm::WriteResponse {
                status: false,
                msg: Some(msg),
            },
        }))
    }
}

/// The byte range a buffer read or write chunk names (`None`: the whole
/// buffer, or after the last chunk, as PYNQ's client sends 0 and 0);
/// negative offsets are refused.
fn chunk_range(start: i32, end: i32, what: &str) -> Result<Option<(usize, usize)>, String> {
    match (usize::try_from(start), usize::try_from(end)) {
        (Ok(0), Ok(0)) => Ok(None),
        (Ok(from), Ok(to)) => Ok(Some((from, to))),
        _ => Err(format!(
            "a {what} of {start}..{end}: offsets are never negative"
        )),
    }
}

/// A buffer read's replies, each chunk read from the buffer when the reply
/// stream is ready for it (the server holds one chunk at a time).
struct ReadChunks {
    buffer: Arc<Mutex<Buffer>>,
    at: usize,
    end: usize,
    /// Whether a reply went out (an empty read still gets one).
    sent: bool,
    _charge: Charge,
}

impl Stream for ReadChunks {
    type Item = Result<pb::BufferReadResponse, Status>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.at >= self.end && self.sent {
            return std::task::Poll::Ready(None);
        }
        let to = (self.at + CHUNK).min(self.end);
        let data = lock(&self.buffer).read(self.at, to);
        self.at = to;
        self.sent = true;
        std::task::Poll::Ready(Some(Ok(pb::BufferReadResponse {
            msg: None,
            data: Some(data),
        })))
    }
}

/// A reply carrying only `msg`, for the buffer service's messages.
macro_rules! msg_reply {
    ($t:ident, $r:expr) => {
        Ok(Response::new(match $r {
            Ok(()) => pb::$t { msg: None },
            Err(msg) => pb::$t { msg: Some(msg) },
        }))
    };
}

#[tonic::async_trait]
impl pb::remote_buffer_server::RemoteBuffer for Service {
    async fn allocate(
        &self,
        request: Request<pb::AllocateRequest>,
    ) -> Result<Response<pb::AllocateResponse>, Status> {
        let c = conn(&request);
        let r = request.into_inner();
        let result = (|| {
            let bytes = usize::try_from(r.size)
                .ok()
                .filter(|&n| n > 0 && n <= MAX_BUFFER)
                .ok_or_else(|| format!("cannot allocate {} bytes", r.size))?;
            let charge = self
                .shared
                .caps
                .dma(
                    c,
                    bytes.next_multiple_of(4),
                    &format!("allocating {bytes} bytes"),
                )
                .map_err(|e| e.to_string())?;
            let loaded = self.loaded();
            let buf = loaded
                .pool
                .alloc::<u32>(bytes.div_ceil(4))
                .map_err(|e| format!("allocating {bytes} bytes: {e}"))?;
            let id = self.shared.next_buffer.fetch_add(1, Ordering::Relaxed);
            lock(&self.shared.buffers).insert(
                id,
                Arc::new(Mutex::new(Buffer {
                    owner: c,
                    buf,
                    bytes,
                    loaded,
                    _charge: charge,
                })),
            );
            Ok(id.to_string())
        })();
        Ok(Response::new(match result {
            Ok(id) => pb::AllocateResponse {
                msg: None,
                buffer_id: Some(id),
            },
            Err(msg) => pb::AllocateResponse {
                msg: Some(msg),
                buffer_id: None,
            },
        }))
    }

    async fn write(
        &self,
        request: Request<Streaming<pb::BufferWriteRequest>>,
    ) -> Result<Response<pb::BufferWriteResponse>, Status> {
        let c = conn(&request);
        let mut stream = request.into_inner();
        let mut target: Option<(String, Arc<Mutex<Buffer>>)> = None;
        let mut at = 0usize;
        let mut result = Ok(());
        while let Some(m) = stream.next().await {
            let m = m?;
            if result.is_err() {
                continue;
            }
            result = (|| {
                let b = match &target {
                    Some((id, b)) if *id == m.buffer_id => b.clone(),
                    Some((id, _)) => {
                        return Err(format!(
                            "one write stream names two buffers ({id:?} and {:?})",
                            m.buffer_id
                        ));
                    }
                    None => {
                        let b = self.buffer(c, &m.buffer_id)?;
                        target = Some((m.buffer_id.clone(), b.clone()));
                        b
                    }
                };
                let mut g = lock(&b);
                // A chunk with a range goes there; without one, after the last.
                let (from, to) = match chunk_range(m.start, m.end, "write")? {
                    Some(range) => range,
                    None => (at, at + m.data.len()),
                };
                if to < from || to - from != m.data.len() || to > g.bytes {
                    return Err(format!(
                        "write of {} bytes at {from}..{to} does not fit buffer {:?} of {} bytes",
                        m.data.len(),
                        m.buffer_id,
                        g.bytes
                    ));
                }
                g.write(from, &m.data);
                at = to;
                Ok(())
            })();
        }
        msg_reply!(BufferWriteResponse, result)
    }

    #[allow(non_camel_case_types)]
    type readStream = Replies<pb::BufferReadResponse>;

    async fn read(
        &self,
        request: Request<pb::BufferReadRequest>,
    ) -> Result<Response<Self::readStream>, Status> {
        let c = conn(&request);
        let r = request.into_inner();
        self.sync_descriptors(c);
        let result = (|| {
            let b = self.buffer(c, &r.buffer_id)?;
            let bytes = lock(&b).bytes;
            let (from, to) = chunk_range(r.start, r.end, "read")?.unwrap_or((0, bytes));
            if from > to || to > bytes {
                return Err(format!(
                    "read of {from}..{to} is outside buffer {:?} of {bytes} bytes",
                    r.buffer_id
                ));
            }
            // The chunk the reply holds until the client takes it.
            let mut charge = self.shared.caps.in_flight(c);
            let what = format!("a read of buffer {:?}", r.buffer_id);
            charge
                .grow((to - from).min(CHUNK), &what)
                .map_err(|e| e.to_string())?;
            Ok(ReadChunks {
                buffer: b,
                at: from,
                end: to,
                sent: false,
                _charge: charge,
            })
        })();
        Ok(Response::new(match result {
            Ok(chunks) => Box::pin(chunks),
            Err(msg) => Box::pin(tokio_stream::once(Ok(pb::BufferReadResponse {
                msg: Some(msg),
                data: None,
            }))),
        }))
    }

    async fn freebuffer(
        &self,
        request: Request<pb::FreeBufferRequest>,
    ) -> Result<Response<pb::FreeBufferResponse>, Status> {
        let c = conn(&request);
        let id = request.into_inner().buffer_id;
        let result = self.buffer(c, &id).map(|b| {
            if let Ok(n) = id.parse::<u64>() {
                lock(&self.shared.buffers).remove(&n);
            }
            self.release(c, vec![b]);
        });
        msg_reply!(FreeBufferResponse, result)
    }

    async fn flush(
        &self,
        request: Request<pb::FlushRequest>,
    ) -> Result<Response<pb::FlushResponse>, Status> {
        let c = conn(&request);
        let id = request.into_inner().buffer_id;
        let result = self.buffer(c, &id).and_then(|b| {
            let g = lock(&b);
            g.buf
                .sync_for_device(g.bytes)
                .map_err(|e| format!("flush of buffer {id:?}: {e}"))
        });
        msg_reply!(FlushResponse, result)
    }

    async fn invalidate(
        &self,
        request: Request<pb::InvalidateRequest>,
    ) -> Result<Response<pb::InvalidateResponse>, Status> {
        let c = conn(&request);
        let id = request.into_inner().buffer_id;
        self.sync_descriptors(c);
        let result = self.buffer(c, &id).and_then(|b| {
            let g = lock(&b);
            g.buf
                .sync_for_cpu(g.bytes)
                .map_err(|e| format!("invalidate of buffer {id:?}: {e}"))
        });
        msg_reply!(InvalidateResponse, result)
    }

    async fn physical_address(
        &self,
        request: Request<pb::AddressRequest>,
    ) -> Result<Response<pb::AddressResponse>, Status> {
        let c = conn(&request);
        let id = request.into_inner().buffer_id;
        let current = self.loaded();
        let result = self.buffer(c, &id).and_then(|b| {
            let g = lock(&b);
            if !Arc::ptr_eq(&g.loaded, &current) {
                return Err(format!(
                    "buffer {id:?} is memory of the design loaded before {:?}: allocate it again",
                    current.design.name
                ));
            }
            Ok(g.buf.bus_addr())
        });
        Ok(Response::new(match result {
            Ok(a) => pb::AddressResponse {
                msg: None,
                address: Some(a),
            },
            Err(msg) => pb::AddressResponse {
                msg: Some(msg),
                address: None,
            },
        }))
    }

    async fn virtual_address(
        &self,
        request: Request<pb::AddressRequest>,
    ) -> Result<Response<pb::AddressResponse>, Status> {
        // The server's own addresses are not the client's business: the
        // buffer's bus address stands in for it, as on a board where both
        // are the board's.
        self.physical_address(request).await
    }

    async fn cacheable(
        &self,
        request: Request<pb::CacheableRequest>,
    ) -> Result<Response<pb::CacheableResponse>, Status> {
        let c = conn(&request);
        let id = request.into_inner().buffer_id;
        let noncoherent = matches!(
            self.shared.target,
            Target::Emulated {
                model: MemoryModel::NonCoherent,
                ..
            } | Target::Board { .. }
        );
        Ok(Response::new(match self.buffer(c, &id) {
            Ok(_) => pb::CacheableResponse {
                msg: None,
                cacheable: Some(noncoherent),
            },
            Err(msg) => pb::CacheableResponse {
                msg: Some(msg),
                cacheable: None,
            },
        }))
    }
}

/// A gRPC error for a request the device service refuses.
fn refused(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg.into())
}

#[tonic::async_trait]
impl pd::remote_device_server::RemoteDevice for Service {
    async fn set_bitstream_attrs(
        &self,
        request: Request<pd::SetBitstreamAttrsRequest>,
    ) -> Result<Response<pd::SetBitstreamAttrsResponse>, Status> {
        let r = request.into_inner();
        let path = format!("{}{}", files::FIRMWARE_DIR, r.binfile_name);
        let status = match files::entry(&path) {
            Ok(files::Entry::Firmware(name)) => {
                // The client sends the bitstream only when this name is
                // missing: a changed one under the same name must be sent.
                lock(&self.shared.state).files.forget_firmware(&name);
                true
            }
            _ => false,
        };
        Ok(Response::new(pd::SetBitstreamAttrsResponse { status }))
    }

    async fn download(
        &self,
        request: Request<Streaming<pd::DownloadRequest>>,
    ) -> Result<Response<pd::DownloadResponse>, Status> {
        let mut held = self.shared.caps.in_flight(conn(&request));
        let mut stream = request.into_inner();
        let mut bin = Vec::new();
        while let Some(m) = stream.next().await {
            let m = m?;
            if bin.len() + m.buffer.len() > files::MAX_FIRMWARE {
                return Err(refused(format!(
                    "a bitstream over {} bytes",
                    files::MAX_FIRMWARE
                )));
            }
            held.grow(m.buffer.len(), "a bitstream download")
                .map_err(|e| Status::resource_exhausted(e.to_string()))?;
            bin.extend_from_slice(&m.buffer);
        }
        let name = "download.bin";
        lock(&self.shared.state)
            .files
            .put_firmware(name.into(), bin);
        let status = self.program(name).is_ok();
        Ok(Response::new(pd::DownloadResponse { status }))
    }

    async fn set_pl_clk(
        &self,
        request: Request<pd::SetPlClkRequest>,
    ) -> Result<Response<pd::SetPlClkResponse>, Status> {
        let r = request.into_inner();
        let ok = (0..4).contains(&r.i) && (1..64).contains(&r.div0) && (1..64).contains(&r.div1);
        if ok {
            let addr = 0xFF5E_00C0 + 4 * r.i as u64;
            let old = self.shared.ps.read(addr);
            let new = (old & !0x003F_3F00) | ((r.div1 as u32) << 16) | ((r.div0 as u32) << 8);
            self.shared.ps.write(addr, new);
        }
        Ok(Response::new(pd::SetPlClkResponse { status: ok }))
    }

    async fn shutdown(
        &self,
        _request: Request<pd::ShutdownRequest>,
    ) -> Result<Response<pd::ShutdownResponse>, Status> {
        Ok(Response::new(pd::ShutdownResponse { status: true }))
    }

    #[allow(non_camel_case_types)]
    type readfileStream = Replies<pd::ReadFileResponse>;

    async fn readfile(
        &self,
        request: Request<pd::ReadFileRequest>,
    ) -> Result<Response<Self::readfileStream>, Status> {
        let mut held = self.shared.caps.in_flight(conn(&request));
        let path = request.into_inner().file_path;
        let bytes = lock(&self.shared.state)
            .files
            .read(&path)
            .map_err(Status::not_found)?;
        // The file's copy is data in flight until its replies are taken.
        held.grow(bytes.len(), &format!("a read of {path:?}"))
            .map_err(|e| Status::resource_exhausted(e.to_string()))?;
        let chunks: Vec<Vec<u8>> = bytes.chunks(CHUNK).map(<[u8]>::to_vec).collect();
        drop(bytes);
        let replies = tokio_stream::iter(chunks).map(move |data| {
            let _held = &held;
            Ok(pd::ReadFileResponse { data })
        });
        Ok(Response::new(Box::pin(replies)))
    }

    async fn writefile(
        &self,
        request: Request<Streaming<pd::WriteFileRequest>>,
    ) -> Result<Response<pd::WriteFileResponse>, Status> {
        let mut held = self.shared.caps.in_flight(conn(&request));
        let mut stream = request.into_inner();
        let mut path: Option<String> = None;
        let mut data = Vec::new();
        while let Some(m) = stream.next().await {
            let m = m?;
            match &path {
                None => path = Some(m.file_path.clone()),
                Some(p) if *p != m.file_path => {
                    return Err(refused(format!(
                        "one write stream names two files ({p:?} and {:?})",
                        m.file_path
                    )));
                }
                Some(_) => {}
            }
            if data.len() + m.data.len() > files::MAX_FIRMWARE {
                return Err(refused(format!(
                    "{:?}: more than {} bytes",
                    m.file_path,
                    files::MAX_FIRMWARE
                )));
            }
            held.grow(m.data.len(), &format!("an upload of {:?}", m.file_path))
                .map_err(|e| Status::resource_exhausted(e.to_string()))?;
            data.extend_from_slice(&m.data);
        }
        let path = path.ok_or_else(|| refused("a file write with no message"))?;
        match files::entry(&path).map_err(|e| refused(e.to_string()))? {
            files::Entry::Firmware(name) => {
                lock(&self.shared.state).files.put_firmware(name, data);
            }
            files::Entry::Attribute(attr) => {
                if data.len() > MAX_ATTRIBUTE {
                    return Err(refused(format!("{path}: more than {MAX_ATTRIBUTE} bytes")));
                }
                let text = String::from_utf8_lossy(&data).trim().to_string();
                match attr {
                    files::FPGA_FLAGS => lock(&self.shared.state).files.flags = text,
                    files::FPGA_FIRMWARE => self.program(&text).map_err(refused)?,
                    _ => return Err(refused(format!("{path} is read-only"))),
                }
            }
            files::Entry::Fixed(_) => return Err(refused(format!("{path} is read-only"))),
        }
        Ok(Response::new(pd::WriteFileResponse {}))
    }

    async fn existsfile(
        &self,
        request: Request<pd::ExistsFileRequest>,
    ) -> Result<Response<pd::ExistsFileResponse>, Status> {
        let path = request.into_inner().file_path;
        let exists = lock(&self.shared.state).files.exists(&path);
        Ok(Response::new(pd::ExistsFileResponse { exists }))
    }
}

#[tonic::async_trait]
impl pg::gpio_server::Gpio for Service {
    async fn get_gpio(
        &self,
        request: Request<pg::GetGpioRequest>,
    ) -> Result<Response<pg::GetGpioResponse>, Status> {
        let r = request.into_inner();
        let result = self.shared.gpio.export(r.index, &r.direction);
        Ok(Response::new(match result {
            Ok(id) => pg::GetGpioResponse {
                message: None,
                gpio_id: Some(id),
            },
            Err(m) => pg::GetGpioResponse {
                message: Some(m),
                gpio_id: None,
            },
        }))
    }

    async fn read(
        &self,
        request: Request<pg::GpioReadRequest>,
    ) -> Result<Response<pg::GpioReadResponse>, Status> {
        let id = request.into_inner().gpio_id;
        Ok(Response::new(match self.shared.gpio.read(&id) {
            Ok(v) => pg::GpioReadResponse {
                message: None,
                value: Some(v),
            },
            Err(m) => pg::GpioReadResponse {
                message: Some(m),
                value: None,
            },
        }))
    }

    async fn write(
        &self,
        request: Request<pg::GpioWriteRequest>,
    ) -> Result<Response<pg::GpioWriteResponse>, Status> {
        let r = request.into_inner();
        self.shared
            .gpio
            .write(&r.gpio_id, r.value)
            .map_err(refused)?;
        Ok(Response::new(pg::GpioWriteResponse {}))
    }

    async fn unexport(
        &self,
        request: Request<pg::GpioUnexportRequest>,
    ) -> Result<Response<pg::GpioUnexportResponse>, Status> {
        let id = request.into_inner().gpio_id;
        self.shared.gpio.unexport(&id).map_err(refused)?;
        Ok(Response::new(pg::GpioUnexportResponse {}))
    }

    async fn is_exported(
        &self,
        request: Request<pg::GpioIsExportedRequest>,
    ) -> Result<Response<pg::GpioIsExportedResponse>, Status> {
        let id = request.into_inner().gpio_id;
        let exported = self.shared.gpio.is_exported(&id);
        Ok(Response::new(pg::GpioIsExportedResponse {
            is_exported: Some(exported),
        }))
    }

    async fn get_gpio_base_path(
        &self,
        request: Request<pg::GetGpioBasePathRequest>,
    ) -> Result<Response<pg::GetGpioBasePathResponse>, Status> {
        let label = request.into_inner().target_label;
        Ok(Response::new(pg::GetGpioBasePathResponse {
            base_path: Some(self.shared.gpio.base_path(label.as_deref())),
        }))
    }

    async fn get_gpio_npins(
        &self,
        request: Request<pg::GetGpioNPinsRequest>,
    ) -> Result<Response<pg::GetGpioNPinsResponse>, Status> {
        let label = request.into_inner().target_label;
        Ok(Response::new(pg::GetGpioNPinsResponse {
            npins: Some(self.shared.gpio.npins(label.as_deref())),
        }))
    }
}
