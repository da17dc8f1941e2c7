"""The "bgsub" design: paper 000's coprocessor behind two AXI DMA engines."""

import numpy as np
import pytest

from dmaflow._native import bgsub_step
from dmaflow.pynq import Overlay, allocate


def test_the_coprocessor_gives_the_software_s_masks():
    w, h = 64, 48
    ol = Overlay("bgsub", width=w, height=h, threshold=20)
    assert {"axi_dma_0", "axi_dma_1", "bgsub_0"} <= set(ol.ip_dict)
    assert ol.ip_dict["axi_dma_1"]["phys_addr"] == ol.ip_dict["axi_dma_0"]["phys_addr"] + 0x10000
    core = ol.bgsub_0
    rng = np.random.default_rng(3)
    frames = [rng.integers(0, 256, w * h, dtype=np.uint8) for _ in range(4)]
    frame, bg, new_bg, mask = (allocate(w * h, dtype=np.uint8) for _ in range(4))
    bg[:] = frames[0]
    soft_bg = frames[0].tobytes()
    for f in frames[1:]:
        frame[:] = f
        core.step(frame, bg, new_bg, mask)
        soft_bg, soft_mask = bgsub_step(f.tobytes(), soft_bg, w, h, 20)
        assert mask.tobytes() == soft_mask
        assert new_bg.tobytes() == soft_bg
        bg[:] = new_bg
    with pytest.raises(ValueError):
        bgsub_step(b"\0" * 10, b"\0" * 10, w, h)


def test_engines_are_named_by_index():
    ol = Overlay("loopback")
    with pytest.raises(ValueError, match="1 DMA engine"):
        ol.board.channel("mm2s", 1)
    # Not an emulated design: the real board, and there is none here.
    with pytest.raises(RuntimeError, match="not an emulated design .* could not be opened"):
        Overlay("bitstream.bit", root="/nonexistent")
