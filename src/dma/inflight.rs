//! A two-way transfer in flight that owns its buffers: the buffers come back only
//! when the transfer is complete or the engine is confirmed halted. Dropping the
//! guard early halts the engine first; forgetting it (`std::mem::forget`) keeps
//! the buffers from ever returning to the pool, so the device never writes into
//! memory the program can reach again. A forgotten transfer also leaves its
//! channels busy ([`crate::axi::Error::Busy`] on the next start): a reset of
//! the engine ([`crate::axi::AxiDma::reset`], through [`Engine::dma`]) halts it
//! and puts it back in service, the forgotten buffers still never returning.

use super::{Completion, Engine, Error};
use crate::mem::DmaBuf;
use crate::platform::{IrqLine, RegisterSpace};

/// A two-way transfer started by [`Engine::begin`].
pub struct InFlight<'e, R: RegisterSpace, I: IrqLine> {
    engine: &'e Engine<R, I>,
    /// (tx, rx); `None` once given back.
    bufs: Option<(DmaBuf<u8>, DmaBuf<u8>)>,
    completion: Completion,
    started: super::Started,
}

/// A completed transfer: the buffers back, and what arrived.
#[derive(Debug)]
pub struct Done {
    /// The buffer that was sent.
    pub tx: DmaBuf<u8>,
    /// The buffer that received.
    pub rx: DmaBuf<u8>,
    /// Bytes received into `rx`.
    pub received: usize,
}

/// A transfer that failed or was refused.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Failed {
    /// What went wrong.
    #[source]
    pub error: Error,
    /// The buffers `(tx, rx)`, when they are safe to use again: the transfer never
    /// started, or the engine was confirmed halted. `None` when the engine could
    /// not be halted: the buffers are lost to it and never return to the pool.
    pub buffers: Option<Box<(DmaBuf<u8>, DmaBuf<u8>)>>,
}

impl<R: RegisterSpace, I: IrqLine> Engine<R, I> {
    /// Starts a zero-copy two-way transfer that owns its buffers: sends the first
    /// `tx_len` bytes of `tx`, receives into the first `rx_len` bytes of `rx`.
    /// The buffers come back from [`InFlight::wait`] (or inside its error).
    pub fn begin(
        &self,
        tx: DmaBuf<u8>,
        tx_len: usize,
        mut rx: DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<InFlight<'_, R, I>, Box<Failed>> {
        let refused = |error, tx, rx| {
            Box::new(Failed {
                error,
                buffers: Some(Box::new((tx, rx))),
            })
        };
        if let Err(e) = self.check_two_way(&tx, tx_len, &rx, rx_len, c) {
            return Err(refused(e, tx, rx));
        }
        self.timing.set(super::Timing::default());
        match self.start_two_way(&tx, tx_len, &mut rx, rx_len, c) {
            Ok(started) => Ok(InFlight {
                engine: self,
                bufs: Some((tx, rx)),
                completion: c,
                started,
            }),
            Err(e) => Err(self.given_back(e, tx, rx)),
        }
    }

    /// The error of a transfer on `tx` and `rx` after the engine was recovered:
    /// the buffers come back only if they were not lost to it.
    fn given_back(&self, error: Error, tx: DmaBuf<u8>, rx: DmaBuf<u8>) -> Box<Failed> {
        let buffers = (!tx.is_lost() && !rx.is_lost()).then(|| Box::new((tx, rx)));
        Box::new(Failed { error, buffers })
    }
}

impl<R: RegisterSpace, I: IrqLine> InFlight<'_, R, I> {
    /// Waits for the transfer (at most the engine's timeout) and gives the buffers
    /// back with the bytes received. On a timeout or an error the engine is halted
    /// first; if it cannot be, the buffers are lost to it.
    pub fn wait(mut self) -> Result<Done, Box<Failed>> {
        let Some((tx, mut rx)) = self.bufs.take() else {
            return Err(Box::new(Failed {
                error: Error::Empty,
                buffers: None,
            }));
        };
        match self
            .engine
            .finish(self.completion, self.started, &tx, &mut rx)
        {
            Ok(received) => Ok(Done { tx, rx, received }),
            Err(e) => Err(self.engine.given_back(e, tx, rx)),
        }
    }
}

impl<R: RegisterSpace, I: IrqLine> Drop for InFlight<'_, R, I> {
    /// A transfer dropped before [`wait`](InFlight::wait): the engine is halted
    /// before the buffers go back to the pool; if it cannot be, they are lost to it.
    fn drop(&mut self) {
        if let Some((tx, mut rx)) = self.bufs.take() {
            self.engine.abort(&tx, &mut rx);
        }
    }
}
