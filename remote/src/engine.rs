//! The AXI DMA engines belong to the server. A client drives an engine by
//! hand through MMIO (as PYNQ's DMA driver does), but its register writes
//! reach a view of the engine of its own; the server programs the real
//! engine itself, at the moment a channel starts (a direct-mode LENGTH write,
//! a scatter-gather TAILDESC write), with addresses it has checked against
//! the starting client's buffers, and nothing the client writes afterwards
//! reaches the engine until the next start.
//!
//! - **Direct mode**: at LENGTH the server checks the view's address and
//!   length, then writes ADDR and LENGTH itself. A start while the channel's
//!   transfer is in flight is refused, so the engine's job reads the address
//!   the server wrote.
//! - **Scatter-gather**: at TAILDESC the chain is walked in the client's
//!   memory (the library's walk, [`dmaflow::axi::chain`], over the client's
//!   buffers as an interval index), each descriptor and the buffer it names
//!   checked, and copied into descriptor memory the server owns and no client
//!   can reach: the engine only ever fetches the server's copy, so its data
//!   can never land in a descriptor it will fetch. An idle channel's resume
//!   point and a cyclic ring are the server's copy too. Each descriptor's
//!   status (and APP words) is copied back into the client's descriptor once
//!   the engine completes it, when the client looks (a register read of the
//!   engine, a read or invalidate of its buffers), so PYNQ's driver sees what
//!   a board gives it.
//! - **One client per engine**: the first to start it holds it until it
//!   stops or resets it, frees a buffer a transfer reaches, or disconnects.
//!   Another client's writes are refused, naming the engine's state; its
//!   register reads show its own view of the address registers, never the
//!   holder's.
//! - **Release**: before a buffer a transfer still reaches goes back to the
//!   pool, the engine is halted by the library's driver
//!   ([`AxiDma::recover`](dmaflow::axi::AxiDma::recover)); a transfer already
//!   complete (the channel idle) needs no halt.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dmaflow::axi::chain::{self, Descriptor, End};
use dmaflow::axi::regs::{
    ADDR, ADDR_MSB, CURDESC, CURDESC_MSB, DESC_ALIGN, DESC_STATUS, DESC_STS_CMPLT,
    DESC_STS_ERR_MASK, DMACR, DMACR_CYCLIC, DMACR_RESET, DMACR_RS, DMASR, DMASR_HALTED, DMASR_IDLE,
    DMASR_IRQ_MASK, LENGTH, MM2S, S2MM, TAILDESC, TAILDESC_MSB,
};
use dmaflow::axi::{AxiDma, Channel, Config, DESC_WORDS};
use dmaflow::mem::DmaBuf;
use dmaflow::platform::RegisterSpace;

use crate::board::{Buffer, Loaded};

/// Descriptors of server memory per scatter-gather channel: the longest
/// chain one start takes is one fewer (the slot after a chain's tail is where
/// the engine resumes).
pub(crate) const SLOTS: usize = 1024;
/// How long the library's driver waits for a channel to halt.
const HALT_WAIT: Duration = Duration::from_millis(200);
/// Bytes of a channel's register block.
const CHANNEL_BYTES: usize = 0x30;
/// Words of a channel's register block.
const CHANNEL_WORDS: usize = CHANNEL_BYTES / 4;

/// Locks a mutex, a poisoned one included.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The channels' names, by index.
const NAMES: [&str; 2] = ["MM2S", "S2MM"];

/// A client's buffers in one design's memory, by bus address (an interval
/// index: buffers never overlap).
#[derive(Default)]
pub(crate) struct Own(BTreeMap<u64, (u64, Arc<Mutex<Buffer>>)>);

impl Own {
    /// Adds a buffer of `len` bytes at bus address `addr`.
    pub(crate) fn insert(&mut self, addr: u64, len: u64, b: Arc<Mutex<Buffer>>) {
        self.0.insert(addr, (len, b));
    }

    /// The buffer holding `addr..addr + len`, and `addr`'s offset in it.
    fn find(&self, addr: u64, len: u64) -> Option<(&Arc<Mutex<Buffer>>, usize)> {
        let end = addr.checked_add(len)?;
        let (&base, (n, b)) = self.0.range(..=addr).next_back()?;
        (end <= base + n).then(|| (b, (addr - base) as usize))
    }

    /// Whether `addr..addr + len` lies inside one buffer.
    fn inside(&self, addr: u64, len: u64) -> bool {
        self.find(addr, len).is_some()
    }

    /// The descriptor at `at`, as the engine would fetch it: the client's
    /// copy is flushed to memory first.
    fn descriptor(&self, at: u64) -> Option<Descriptor> {
        if !at.is_multiple_of(DESC_ALIGN) {
            return None;
        }
        let (b, off) = self.find(at, DESC_ALIGN)?;
        let g = lock(b);
        let _ = g.buf.sync_range_for_device(off, DESC_ALIGN as usize);
        let bytes = g.read(off, off + DESC_ALIGN as usize);
        let mut w = [0u32; DESC_WORDS];
        for (i, c) in bytes.chunks_exact(4).enumerate() {
            w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Some(Descriptor::from_words(at, &w))
    }

    /// Writes `words` into the client's memory at `at` as the engine writes
    /// a descriptor's status: to the CPU's view and on to memory.
    fn put(&self, at: u64, words: &[u32]) {
        let Some((b, off)) = self.find(at, 4 * words.len() as u64) else {
            return;
        };
        let mut g = lock(b);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        g.write(off, &bytes);
        let _ = g.buf.sync_range_for_device(off, bytes.len());
    }
}

/// Why a register write was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// The channel would reach memory outside the client's buffers.
    #[error(
        "{channel} of {ip} not started: {what} {addr:#x}..{end:#x} is outside this client's buffers"
    )]
    Outside {
        /// The engine.
        ip: String,
        /// The channel.
        channel: &'static str,
        /// What lies there (a buffer, a descriptor).
        what: &'static str,
        /// First byte.
        addr: u64,
        /// One past the last byte.
        end: u64,
    },
    /// The chain does not come to its end.
    #[error("{channel} of {ip} not started: {reason}")]
    Chain {
        /// The engine.
        ip: String,
        /// The channel.
        channel: &'static str,
        /// The walk's error.
        reason: String,
    },
    /// Another client holds the engine.
    #[error(
        "{ip} is in use by another client ({state}): its registers take this client's writes \
         once that client stops or resets it, frees the buffers its transfers reach, or \
         disconnects"
    )]
    Held {
        /// The engine.
        ip: String,
        /// Its channels' states.
        state: String,
    },
    /// A start while the channel's last one is still in flight.
    #[error(
        "{channel} of {ip} not started: {what} written while its transfer is in flight \
         (wait for DMASR.Idle)"
    )]
    Busy {
        /// The engine.
        ip: String,
        /// The channel.
        channel: &'static str,
        /// The register written.
        what: &'static str,
    },
    /// The engine's registers could not be reached.
    #[error("{ip}: {reason}")]
    Device {
        /// The engine.
        ip: String,
        /// What went wrong.
        reason: String,
    },
}

/// A descriptor of the server's copy, and the client's it came from.
struct Copied {
    /// The slot of server memory.
    slot: usize,
    /// The client's descriptor.
    client: u64,
    /// The status last copied back (or the client's own, before).
    status: u32,
}

/// The server's side of one channel.
#[derive(Default)]
struct Chan {
    /// A transfer was started and has not been stopped since.
    started: bool,
    /// Scatter-gather: the slot the engine fetches next (`None`: the
    /// channel is halted, CURDESC is written when it is set running).
    fetch: Option<usize>,
    /// Scatter-gather: the client's descriptor the holder's view resumes
    /// from after an idle chain (the tail's NXTDESC as copied).
    resume: Option<u64>,
    /// Scatter-gather: the chain copied at the last start.
    chain: Vec<Copied>,
    /// How many of `chain`'s statuses were copied back (non-cyclic).
    synced: usize,
    /// The chain is a cyclic ring.
    cyclic: bool,
    /// The client memory the started transfer reaches: data buffers and
    /// (scatter-gather) the client's descriptors.
    reach: Vec<(u64, u64)>,
}

/// Registers a client wrote, per channel.
#[derive(Clone, Copy, Default)]
struct View([[u32; CHANNEL_WORDS]; 2]);

impl View {
    fn get(&self, ch: usize, r: usize) -> u32 {
        self.0[ch][r / 4]
    }
    fn set(&mut self, ch: usize, r: usize, v: u32) {
        self.0[ch][r / 4] = v;
    }
    fn pair(&self, ch: usize, lo: usize, hi: usize) -> u64 {
        u64::from(self.get(ch, lo)) | (u64::from(self.get(ch, hi)) << 32)
    }
}

/// What an engine's state holds under its lock.
#[derive(Default)]
struct State {
    /// The connection that holds the engine.
    holder: Option<u64>,
    /// Each client's view.
    views: HashMap<u64, View>,
    /// MM2S, S2MM.
    ch: [Chan; 2],
}

/// One AXI DMA engine of the loaded design.
struct Engine {
    ip: String,
    base: u64,
    sg: bool,
    length_mask: u32,
    length_width: u32,
    /// Descriptor memory of the server ([`SLOTS`] per channel; scatter-gather
    /// engines only), reached by no client.
    desc: Option<Mutex<DmaBuf<u32>>>,
    st: Mutex<State>,
}

/// The engines of one loaded design.
pub(crate) struct Engines(Vec<Engine>);

impl Engines {
    /// The engines of `loaded`, each with its descriptor memory.
    pub(crate) fn new(loaded: &Loaded) -> Result<Self, String> {
        let mut list = Vec::new();
        for (ip, dma, _) in loaded.engines() {
            let width = dma.params.sg_length_width.min(32);
            let desc = if dma.params.include_sg {
                let buf = loaded
                    .pool
                    .alloc::<u32>(2 * SLOTS * DESC_WORDS)
                    .map_err(|e| format!("descriptor memory of {}: {e}", ip.name))?;
                Some(Mutex::new(buf))
            } else {
                None
            };
            list.push(Engine {
                ip: ip.name.clone(),
                base: ip.base,
                sg: dma.params.include_sg,
                length_mask: if width == 32 {
                    u32::MAX
                } else {
                    (1 << width) - 1
                },
                length_width: dma.params.sg_length_width.clamp(8, 26),
                desc,
                st: Mutex::default(),
            });
        }
        Ok(Engines(list))
    }

    /// The engine whose channel registers hold `addr`, its channel and the
    /// register's offset in the channel.
    fn at(&self, addr: u64) -> Option<(&Engine, usize, usize)> {
        self.0.iter().find_map(|e| {
            let off = addr.checked_sub(e.base)? as usize;
            (off < 2 * CHANNEL_BYTES).then_some((e, off / CHANNEL_BYTES, off % CHANNEL_BYTES))
        })
    }

    /// Whether `addr` is a channel register of an engine.
    pub(crate) fn covers(&self, addr: u64) -> bool {
        self.at(addr).is_some()
    }

    /// Whether writing `addr` may block (a walk, a halt): those run off the
    /// async worker threads.
    pub(crate) fn blocks(&self, addr: u64) -> bool {
        self.at(addr)
            .is_some_and(|(_, _, r)| r == DMACR || r == TAILDESC)
    }

    /// Client `c` writes `value` to the register at `addr` (a channel
    /// register of an engine, [`covers`](Self::covers)). `own` gives the
    /// client's buffers when a start needs them.
    pub(crate) fn write(
        &self,
        loaded: &Loaded,
        c: u64,
        addr: u64,
        value: u32,
        own: &dyn Fn() -> Own,
    ) -> Result<(), Refused> {
        let Some((e, ch, r)) = self.at(addr) else {
            return Ok(());
        };
        let regs = e.regs(loaded)?;
        let mut st = lock(&e.st);
        if let Some(h) = st.holder
            && h != c
        {
            return Err(Refused::Held {
                ip: e.ip.clone(),
                state: e.state(regs),
            });
        }
        // The view keeps what the IP's register keeps: LENGTH as wide as
        // the IP was built with, descriptor pointers 64-byte aligned.
        let kept = match r {
            LENGTH => value & e.length_mask,
            CURDESC | TAILDESC if e.sg => value & !(DESC_ALIGN as u32 - 1),
            _ => value,
        };
        // CURDESC takes a write only while the channel is halted (PG021).
        let ignored = matches!(r, CURDESC | CURDESC_MSB)
            && e.get(regs, ch, DMASR)
                .is_ok_and(|sr| sr & DMASR_HALTED == 0);
        if !ignored {
            st.views.entry(c).or_default().set(ch, r, kept);
        }
        match r {
            DMACR => e.control(regs, &mut st, c, ch, value),
            DMASR => e.set(regs, ch, DMASR, value & DMASR_IRQ_MASK),
            LENGTH if !e.sg => e.start_direct(regs, &mut st, c, ch, value, own),
            TAILDESC if e.sg => e.start_chain(regs, &mut st, c, ch, own),
            CURDESC | CURDESC_MSB | TAILDESC | TAILDESC_MSB | ADDR | ADDR_MSB | LENGTH => Ok(()),
            _ => e.set(regs, ch, r, value),
        }
    }

    /// The register at `addr` as client `c` reads it: the engine's state
    /// (DMACR, DMASR), and for its holder where it is (CURDESC as the
    /// client's descriptor, LENGTH as transferred); the address registers
    /// as the client wrote them. Statuses the engine completed are copied
    /// back to the holder's descriptors first.
    pub(crate) fn read(
        &self,
        loaded: &Loaded,
        c: u64,
        addr: u64,
        own: &dyn Fn() -> Own,
    ) -> Result<u32, Refused> {
        let Some((e, ch, r)) = self.at(addr) else {
            return Ok(0);
        };
        let regs = e.regs(loaded)?;
        let mut st = lock(&e.st);
        let holder = st.holder == Some(c);
        if holder {
            e.sync(&mut st, own);
        }
        let view = st.views.get(&c).copied().unwrap_or_default();
        let real = |r: usize| e.get(regs, ch, r);
        Ok(match r {
            CURDESC | CURDESC_MSB if holder && e.sg && st.ch[ch].fetch.is_some() => {
                let at = e.client_desc(&st.ch[ch], real(CURDESC), &view, ch);
                if r == CURDESC {
                    at as u32
                } else {
                    (at >> 32) as u32
                }
            }
            LENGTH if holder => real(LENGTH)?,
            CURDESC | CURDESC_MSB | TAILDESC | TAILDESC_MSB | ADDR | ADDR_MSB | LENGTH => {
                view.get(ch, r)
            }
            _ => real(r)?,
        })
    }

    /// Copies the statuses the engine completed back into client `c`'s
    /// descriptors (before the client reads its buffers).
    pub(crate) fn sync(&self, c: u64, own: &dyn Fn() -> Own) {
        for e in &self.0 {
            let mut st = lock(&e.st);
            if st.holder == Some(c) {
                e.sync(&mut st, own);
            }
        }
    }

    /// Client `c` frees the buffers `ranges` (`None`: every buffer, it has
    /// gone): every engine it holds with a transfer in flight that reaches
    /// one is halted, and the engine let go. Whether every halt was
    /// confirmed (if not, the buffers must never be reused).
    pub(crate) fn release(&self, loaded: &Loaded, c: u64, ranges: Option<&[(u64, u64)]>) -> bool {
        let mut all = true;
        for e in &self.0 {
            let mut st = lock(&e.st);
            if ranges.is_none() {
                st.views.remove(&c);
            }
            if st.holder != Some(c) {
                continue;
            }
            let Ok(regs) = e.regs(loaded) else { continue };
            let reaches = |chan: &Chan| {
                chan.started
                    && ranges.is_none_or(|rs| {
                        rs.iter()
                            .any(|&(b, n)| chan.reach.iter().any(|&(a, l)| a < b + n && a + l > b))
                    })
            };
            if !st.ch.iter().any(reaches) {
                continue;
            }
            let busy = (0..2).any(|ch| reaches(&st.ch[ch]) && e.in_flight(regs, ch));
            if busy {
                all &= e.halt(regs, &mut st);
            } else {
                for chan in &mut st.ch {
                    if reaches(chan) {
                        chan.started = false;
                        chan.reach.clear();
                    }
                }
            }
            if !st.ch.iter().any(|chan| chan.started) {
                st.holder = None;
            }
        }
        all
    }

    /// Keeps every engine's descriptor memory from the pool for good (an
    /// engine that may still fetch it could not be confirmed halted).
    pub(crate) fn surrender(&self) {
        for e in &self.0 {
            if let Some(d) = &e.desc {
                lock(d).surrender();
            }
        }
    }

    /// Halts every engine with a transfer in flight (the design is replaced
    /// or reset). Whether every halt was confirmed.
    pub(crate) fn halt_all(&self, loaded: &Loaded) -> bool {
        let mut all = true;
        for e in &self.0 {
            let mut st = lock(&e.st);
            if let Ok(regs) = e.regs(loaded)
                && (0..2).any(|ch| st.ch[ch].started && e.in_flight(regs, ch))
            {
                all &= e.halt(regs, &mut st);
            }
            st.holder = None;
        }
        all
    }
}

impl Engine {
    fn regs<'a>(&self, loaded: &'a Loaded) -> Result<&'a dyn RegisterSpace, Refused> {
        loaded
            .engines()
            .find(|(ip, _, _)| ip.name == self.ip)
            .map(|(_, _, r)| r)
            .ok_or_else(|| Refused::Device {
                ip: self.ip.clone(),
                reason: "no register window".into(),
            })
    }

    fn device(&self, e: impl std::fmt::Display) -> Refused {
        Refused::Device {
            ip: self.ip.clone(),
            reason: e.to_string(),
        }
    }

    fn get(&self, regs: &dyn RegisterSpace, ch: usize, r: usize) -> Result<u32, Refused> {
        regs.read(ch * CHANNEL_BYTES + r)
            .map_err(|e| self.device(e))
    }

    /// Writes a register of the engine. Callers: the server's own starts,
    /// over addresses checked; control, status and configuration writes,
    /// which start nothing.
    fn set(&self, regs: &dyn RegisterSpace, ch: usize, r: usize, v: u32) -> Result<(), Refused> {
        // SAFETY: the writes that start a transfer (LENGTH, TAILDESC) come only
        // from `start_direct` and `start_chain`, after ADDR or CURDESC were
        // written here with memory checked to be the starting client's
        // buffers or the server's own descriptor copies; that memory goes back
        // to the pool only after `release` saw the transfer complete or halted
        // the engine. Every other write stops, resets or configures.
        unsafe { regs.write(ch * CHANNEL_BYTES + r, v) }.map_err(|e| self.device(e))
    }

    /// Whether channel `ch` is running and not idle.
    fn in_flight(&self, regs: &dyn RegisterSpace, ch: usize) -> bool {
        self.get(regs, ch, DMASR)
            .is_ok_and(|sr| sr & (DMASR_HALTED | DMASR_IDLE) == 0)
    }

    /// The engine's channels as another client may know them.
    fn state(&self, regs: &dyn RegisterSpace) -> String {
        let one = |ch: usize| {
            let what = match self.get(regs, ch, DMASR) {
                Ok(sr) if sr & DMASR_HALTED != 0 => "halted",
                Ok(sr) if sr & DMASR_IDLE != 0 => "idle",
                Ok(_) => "running",
                Err(_) => "unreadable",
            };
            format!("{} {what}", NAMES[ch])
        };
        format!("{}, {}", one(0), one(1))
    }

    /// The bus address of slot `slot` of channel `ch`'s descriptor memory.
    fn slot(&self, ch: usize, slot: usize) -> u64 {
        let base = self.desc.as_ref().map_or(0, |d| lock(d).bus_addr());
        base + ((ch * SLOTS + slot) as u64) * DESC_ALIGN
    }

    /// The client's descriptor standing for the server's descriptor at
    /// `real` (CURDESC as the engine has it).
    fn client_desc(&self, chan: &Chan, real: Result<u32, Refused>, view: &View, ch: usize) -> u64 {
        let Ok(real) = real else { return 0 };
        let base = self.slot(ch, 0);
        let slot = (u64::from(real).wrapping_sub(base) / DESC_ALIGN) as usize;
        if let Some(c) = chan.chain.iter().find(|c| c.slot == slot) {
            return c.client;
        }
        if chan.fetch == Some(slot)
            && let Some(r) = chan.resume
        {
            return r;
        }
        view.pair(ch, CURDESC, CURDESC_MSB)
    }

    /// A DMACR write by the holder (or with the engine free): a reset or a
    /// stop goes to the engine through the library's driver; setting RS
    /// points a halted scatter-gather channel at the server's descriptor
    /// memory first. Cyclic BD Enable changes only while nothing runs.
    fn control(
        &self,
        regs: &dyn RegisterSpace,
        st: &mut State,
        c: u64,
        ch: usize,
        value: u32,
    ) -> Result<(), Refused> {
        if value & DMACR_RESET != 0 {
            self.halt(regs, st);
            st.holder = None;
            st.views.insert(c, View::default());
            return Ok(());
        }
        if value & DMACR_RS == 0 {
            let sr = self.get(regs, ch, DMASR)?;
            if sr & DMASR_HALTED == 0 {
                let dma = self.driver(regs)?;
                let channel = [Channel::Mm2s, Channel::S2mm][ch];
                if dma.stop(channel).is_err() {
                    // The driver reset the engine: both channels halted.
                    st.ch = Default::default();
                }
            }
            st.ch[ch] = Chan::default();
            self.set(regs, ch, DMACR, value)?;
            if !st.ch.iter().any(|chan| chan.started) {
                st.holder = None;
            }
            return Ok(());
        }
        let sr = self.get(regs, ch, DMASR)?;
        if self.sg && sr & DMASR_HALTED != 0 {
            let first = self.slot(ch, 0);
            self.set(regs, ch, CURDESC_MSB, (first >> 32) as u32)?;
            self.set(regs, ch, CURDESC, first as u32)?;
            st.ch[ch] = Chan {
                fetch: Some(0),
                ..Chan::default()
            };
        }
        let chan = &st.ch[ch];
        let cyclic = if chan.started {
            self.get(regs, ch, DMACR)? & DMACR_CYCLIC
        } else {
            value & DMACR_CYCLIC
        };
        self.set(regs, ch, DMACR, (value & !DMACR_CYCLIC) | cyclic)
    }

    /// The library's driver over this engine, as it is.
    fn driver<'a>(
        &self,
        regs: &'a dyn RegisterSpace,
    ) -> Result<AxiDma<&'a dyn RegisterSpace>, Refused> {
        AxiDma::attach(
            regs,
            Config {
                length_width: self.length_width,
                timeout: HALT_WAIT,
            },
        )
        .map_err(|e| self.device(e))
    }

    /// Halts the engine (the library's driver: both channels stopped, then
    /// a soft reset) and forgets every transfer; whether it is confirmed.
    fn halt(&self, regs: &dyn RegisterSpace, st: &mut State) -> bool {
        let ok = self.driver(regs).is_ok_and(|d| d.recover());
        st.ch = Default::default();
        ok
    }

    /// A direct-mode LENGTH write of `value` by client `c`.
    fn start_direct(
        &self,
        regs: &dyn RegisterSpace,
        st: &mut State,
        c: u64,
        ch: usize,
        value: u32,
        own: &dyn Fn() -> Own,
    ) -> Result<(), Refused> {
        let len = u64::from(value & self.length_mask);
        let sr = self.get(regs, ch, DMASR)?;
        if len == 0 || sr & DMASR_HALTED != 0 {
            // The engine takes no transfer: nothing reaches it.
            return Ok(());
        }
        if st.ch[ch].started && sr & DMASR_IDLE == 0 {
            return Err(Refused::Busy {
                ip: self.ip.clone(),
                channel: NAMES[ch],
                what: "LENGTH",
            });
        }
        let view = st.views.get(&c).copied().unwrap_or_default();
        let addr = view.pair(ch, ADDR, ADDR_MSB);
        if !own().inside(addr, len) {
            return Err(self.outside(ch, "the buffer", addr, len));
        }
        self.set(regs, ch, ADDR_MSB, (addr >> 32) as u32)?;
        self.set(regs, ch, ADDR, addr as u32)?;
        self.set(regs, ch, LENGTH, value)?;
        st.ch[ch].started = true;
        st.ch[ch].reach = vec![(addr, len)];
        st.holder = Some(c);
        Ok(())
    }

    fn outside(&self, ch: usize, what: &'static str, addr: u64, len: u64) -> Refused {
        Refused::Outside {
            ip: self.ip.clone(),
            channel: NAMES[ch],
            what,
            addr,
            end: addr.saturating_add(len),
        }
    }

    /// A scatter-gather TAILDESC write by client `c`: the chain is walked
    /// in the client's memory, checked, copied into the server's descriptor
    /// memory at the slot the engine fetches next, and the engine's
    /// TAILDESC moved to the copy's tail.
    fn start_chain(
        &self,
        regs: &dyn RegisterSpace,
        st: &mut State,
        c: u64,
        ch: usize,
        own: &dyn Fn() -> Own,
    ) -> Result<(), Refused> {
        let sr = self.get(regs, ch, DMASR)?;
        if sr & DMASR_HALTED != 0 || (st.ch[ch].started && st.ch[ch].cyclic) {
            // A halted channel, or one cycling its ring, takes no new tail.
            return Ok(());
        }
        if st.ch[ch].started && sr & DMASR_IDLE == 0 {
            return Err(Refused::Busy {
                ip: self.ip.clone(),
                channel: NAMES[ch],
                what: "TAILDESC",
            });
        }
        let Some(from) = st.ch[ch].fetch else {
            return Err(self.device(format!(
                "{} runs without a descriptor of the server's: reset the engine",
                NAMES[ch]
            )));
        };
        let own = own();
        // What the previous chain completed goes back before its slots are
        // used again.
        self.sync_with(st, &own);
        let view = st.views.get(&c).copied().unwrap_or_default();
        let first = st.ch[ch]
            .resume
            .unwrap_or_else(|| view.pair(ch, CURDESC, CURDESC_MSB));
        let cyclic = self.get(regs, ch, DMACR)? & DMACR_CYCLIC != 0;
        let end = if cyclic {
            End::Cyclic
        } else {
            End::Tail(view.pair(ch, TAILDESC, TAILDESC_MSB))
        };
        let walked = chain::walk(first, end, SLOTS - 1, |at| {
            own.descriptor(at)
                .ok_or_else(|| self.outside(ch, "the descriptor", at, DESC_ALIGN))
        })
        .map_err(|e| match e {
            chain::WalkError::Read(r) => r,
            e => Refused::Chain {
                ip: self.ip.clone(),
                channel: NAMES[ch],
                reason: format!("{e} (the server copies at most {} per start)", SLOTS - 1),
            },
        })?;
        let mut reach = Vec::with_capacity(2 * walked.len());
        for d in &walked {
            let len = u64::from(d.control & self.length_mask);
            if len > 0 && !own.inside(d.buffer, len) {
                return Err(self.outside(ch, "the descriptor's buffer", d.buffer, len));
            }
            reach.push((d.buffer, len));
            reach.push((d.at, DESC_ALIGN));
        }
        let n = walked.len();
        let desc = self
            .desc
            .as_ref()
            .ok_or_else(|| self.device("no descriptor memory"))?;
        let mut copied = Vec::with_capacity(n);
        let base = self.slot(ch, 0);
        let addr = |slot: usize| base + slot as u64 * DESC_ALIGN;
        {
            let mut mem = lock(desc);
            for (i, d) in walked.iter().enumerate() {
                let slot = (from + i) % SLOTS;
                let next = if cyclic && i + 1 == n {
                    addr(from)
                } else {
                    addr((from + i + 1) % SLOTS)
                };
                let at = (ch * SLOTS + slot) * DESC_WORDS;
                for (k, w) in d.words_with_next(next).into_iter().enumerate() {
                    mem.write_volatile(at + k, w);
                }
                let _ = mem.sync_range_for_device(4 * at, DESC_ALIGN as usize);
                copied.push(Copied {
                    slot,
                    client: d.at,
                    status: d.status,
                });
            }
        }
        let tail = addr((from + n - 1) % SLOTS);
        self.set(regs, ch, TAILDESC_MSB, (tail >> 32) as u32)?;
        self.set(regs, ch, TAILDESC, tail as u32)?;
        let last = walked[n - 1];
        st.ch[ch] = Chan {
            started: true,
            fetch: Some(if cyclic { from } else { (from + n) % SLOTS }),
            resume: (!cyclic).then(|| last.next_fetch()),
            chain: copied,
            synced: 0,
            cyclic,
            reach,
        };
        st.holder = Some(c);
        Ok(())
    }

    /// Copies what the engine completed back to the holder's descriptors.
    fn sync(&self, st: &mut State, own: &dyn Fn() -> Own) {
        if self.pending(st) {
            self.sync_with(st, &own());
        }
    }

    /// Whether a status of the server's copy is not yet copied back.
    fn pending(&self, st: &State) -> bool {
        let Some(desc) = &self.desc else { return false };
        let mem = lock(desc);
        st.ch.iter().enumerate().any(|(ch, chan)| {
            let status = |c: &Copied| self.status(&mem, ch, c.slot);
            if chan.cyclic {
                chan.chain.iter().any(|c| status(c) != c.status)
            } else {
                chan.chain.get(chan.synced).is_some_and(|c| done(status(c)))
            }
        })
    }

    /// The status word of slot `slot` of channel `ch`, as the engine left it.
    fn status(&self, mem: &DmaBuf<u32>, ch: usize, slot: usize) -> u32 {
        let at = (ch * SLOTS + slot) * DESC_WORDS + (DESC_STATUS / 4) as usize;
        let _ = mem.sync_range_for_cpu(4 * at, 24);
        mem.load_word(at).unwrap_or(0)
    }

    fn sync_with(&self, st: &mut State, own: &Own) {
        let Some(desc) = &self.desc else { return };
        let mem = lock(desc);
        for (ch, chan) in st.ch.iter_mut().enumerate() {
            let cyclic = chan.cyclic;
            let from = if cyclic { 0 } else { chan.synced };
            for i in from..chan.chain.len() {
                let c = &mut chan.chain[i];
                let status = self.status(&mem, ch, c.slot);
                if !cyclic && !done(status) {
                    break;
                }
                if status != c.status || !cyclic {
                    // STATUS and APP0..APP4: what the engine writes.
                    let at = (ch * SLOTS + c.slot) * DESC_WORDS + (DESC_STATUS / 4) as usize;
                    let words: Vec<u32> =
                        (0..6).map(|k| mem.load_word(at + k).unwrap_or(0)).collect();
                    own.put(c.client + DESC_STATUS, &words);
                    c.status = status;
                }
                if !cyclic {
                    chan.synced = i + 1;
                }
            }
        }
    }
}

/// Whether a descriptor status says the engine is done with it.
fn done(status: u32) -> bool {
    status & (DESC_STS_CMPLT | DESC_STS_ERR_MASK) != 0
}

/// Channel register offsets of MM2S and S2MM, for the docs' sake.
const _: () = assert!(S2MM == MM2S + CHANNEL_BYTES);
