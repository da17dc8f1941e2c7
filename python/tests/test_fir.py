"""The "fir" design: the emulated FIR core behind an AXI DMA, from Python."""

import numpy as np
import pytest

from dmaflow.pynq import MMIO, Overlay, allocate


def test_the_fir_core_filters_as_numpy_does():
    ol = Overlay("fir")
    assert "fir_0" in ol.ip_dict
    taps = np.cos(np.arange(31) * 0.3).astype(np.float32) / 16
    ol.fir_0.load_taps(taps)
    x = allocate(4096, dtype=np.float32)
    y = allocate(4096, dtype=np.float32)
    x[:] = np.sin(np.arange(4096) * 0.01)
    dma = ol.axi_dma_0
    dma.recvchannel.transfer(y)
    dma.sendchannel.transfer(x)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    n = 4096 - len(taps) + 1
    assert dma.recvchannel.transferred == 4 * n
    want = np.convolve(x, taps, mode="valid")
    assert np.allclose(y[:n], want, atol=1e-5)
    # The core's registers are at their physical address too.
    mmio = MMIO(ol.ip_dict["fir_0"]["phys_addr"], 0x1000)
    assert mmio.read(0x04) == len(taps)
    assert ol.fir_0.read(0x00) == int.from_bytes(b"FIR1", "big")


def test_bad_taps_are_named():
    ol = Overlay("fir")
    with pytest.raises(ValueError, match="tap"):
        ol.fir_0.load_taps([])
    with pytest.raises(ValueError):
        ol.fir_0.load_taps([float("nan")])
    with pytest.raises(ValueError, match="no FIR core"):
        Overlay("loopback").board.load_taps([1.0])
