"""A real board through UIO and u-dma-buf, found by the names its device tree
gives each IP. The board here is a tree of plain files standing in for sysfs
and /dev (no engine behind them): what is checked is that the design's IP is
found by name and address, MMIO reaches the device files, buffers come from
the u-dma-buf, and an engine that does not answer is a named error."""

from pathlib import Path

import numpy as np
import pytest

from dmaflow import DmaError
from dmaflow.pynq import MMIO, DefaultIP, Overlay, allocate

UDMABUF_PHYS = 0x3800_0000


def fake_board(root: Path, with_dma: bool, phys: int = UDMABUF_PHYS) -> None:
    """A board tree under ``root``; each test's u-dma-buf at its own ``phys``
    (a physical range has one pool per process, and boards stay open)."""
    devices = [("fir_0", 0x43C0_0000), ("gpio_leds", 0x4120_0000)]
    if with_dma:
        devices = [("axi_dma_0", 0x4040_0000), ("axi_dma_0_s2mm_introut", None)] + devices
    (root / "dev").mkdir()
    for i, (name, addr) in enumerate(devices):
        d = root / f"sys/class/uio/uio{i}"
        d.mkdir(parents=True)
        (d / "name").write_text(name + "\n")
        if addr is not None:
            (d / "maps/map0").mkdir(parents=True)
            (d / "maps/map0/addr").write_text(f"{addr:#x}\n")
            (d / "maps/map0/size").write_text("0x10000\n")
        (root / f"dev/uio{i}").write_bytes(bytes(0x10000))
    ub = root / "sys/class/u-dma-buf/udmabuf0"
    ub.mkdir(parents=True)
    (ub / "phys_addr").write_text(f"{phys:#x}\n")
    (ub / "size").write_text(f"{4 << 20}\n")
    (ub / "dma_coherent").write_text("1\n")
    (root / "dev/udmabuf0").write_bytes(bytes(4 << 20))


def test_ip_is_found_by_name_and_reached_by_physical_address(tmp_path):
    fake_board(tmp_path, with_dma=False)
    ol = Overlay("design.bit", root=str(tmp_path))
    assert not ol.board.emulated
    assert set(ol.ip_dict) == {"fir_0", "gpio_leds"}
    leds = ol.ip_dict["gpio_leds"]
    assert (leds["phys_addr"], leds["addr_range"]) == (0x4120_0000, 0x10000)
    # Register access by physical address lands in that IP's device file.
    MMIO(0x4120_0000, 0x10000).write(8, 0x5A)
    ol.fir_0.write(0x40, 0xDEAD_BEEF)
    assert (tmp_path / "dev/uio1").read_bytes()[8:12] == (0x5A).to_bytes(4, "little")
    assert (tmp_path / "dev/uio0").read_bytes()[0x40:0x44] == (0xDEAD_BEEF).to_bytes(4, "little")
    assert ol.gpio_leds.read(8) == 0x5A
    with pytest.raises(ValueError, match="not inside a register window"):
        MMIO(0x4040_0000, 4)
    # Buffers come from the u-dma-buf, at its physical addresses.
    assert ol.mem_dict["udmabuf0"]["base_address"] == UDMABUF_PHYS
    a = allocate(1024, dtype=np.uint16)
    assert UDMABUF_PHYS <= a.physical_address < UDMABUF_PHYS + (4 << 20)
    assert a.coherent
    a[:] = np.arange(1024)
    a.flush()
    # The array is the u-dma-buf's memory: the device file holds its bytes.
    off = a.physical_address - UDMABUF_PHYS
    raw = (tmp_path / "dev/udmabuf0").read_bytes()[off : off + 2048]
    assert np.array_equal(np.frombuffer(raw, dtype=np.uint16), np.arange(1024))


def test_an_engine_that_does_not_answer_is_a_named_error(tmp_path):
    fake_board(tmp_path, with_dma=True, phys=UDMABUF_PHYS + (16 << 20))
    # A plain file never clears DMACR.Reset: the engine's reset times out.
    with pytest.raises(DmaError, match="axi_dma_0: .*no completion"):
        Overlay("design.bit", root=str(tmp_path), timeout=0.02)
    # Engines can be named (none here: its window is then plain registers;
    # the interrupt line alone is no IP), and a missing one is named.
    ol = Overlay("design.bit", root=str(tmp_path), engines=[])
    assert ol.ip_dict["axi_dma_0"]["driver"] is DefaultIP
    assert "axi_dma_0_s2mm_introut" not in ol.ip_dict
    assert ol.board.engines == 0
    # Loading it again (a cell run twice) opens the same board; with other
    # settings while the program holds the first one's memory, it is refused.
    again = Overlay("design.bit", root=str(tmp_path), engines=[])
    assert again.board is ol.board
    with pytest.raises(RuntimeError, match="already carved"):
        Overlay("design.bit", root=str(tmp_path), engines=[], timeout=2.0)
    del ol, again
    with pytest.raises(DmaError, match='no UIO device named "axi_dma_7"'):
        Overlay("design.bit", root=str(tmp_path), engines=["axi_dma_7"])


def test_a_board_without_u_dma_buf_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="udmabuf0"):
        Overlay("design.bit", root=str(tmp_path))
