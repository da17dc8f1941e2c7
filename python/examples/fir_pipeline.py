"""A long signal through the emulated FIR core in overlapping windows
(overlap-save: each window repeats the last ``taps - 1`` samples of the one
before, so the core's per-packet "valid" outputs join into one filtered
stream), each window and answer a numpy array in DMA memory; checked against
numpy."""

import numpy as np

from dmaflow.pynq import Overlay, allocate

TAPS = np.hanning(63).astype(np.float32)
TAPS /= TAPS.sum()
HOP = 8192
WINDOW = HOP + len(TAPS) - 1

ol = Overlay("fir")
ol.fir_0.load_taps(TAPS)
dma = ol.axi_dma_0

rng = np.random.default_rng(7)
signal = (np.sin(np.arange(40 * HOP) * 0.002) + 0.3 * rng.standard_normal(40 * HOP)).astype(
    np.float32
)
padded = np.concatenate([np.zeros(len(TAPS) - 1, dtype=np.float32), signal])

w = allocate(WINDOW, dtype=np.float32)
a = allocate(HOP, dtype=np.float32)
out = np.empty_like(signal)

for k in range(len(signal) // HOP):
    w[:] = padded[k * HOP : k * HOP + WINDOW]
    dma.recvchannel.transfer(a)
    dma.sendchannel.transfer(w)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    out[k * HOP : (k + 1) * HOP] = a

want = np.convolve(signal, TAPS)[: len(signal)]
err = float(np.max(np.abs(out - want)))
print(f"{len(signal)} samples through the FIR core in {len(signal) // HOP} windows; "
      f"largest difference from numpy {err:.2e}")
assert err < 1e-4
