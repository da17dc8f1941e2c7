"""PYNQ's DMA API on dmaflow: ``Overlay``, ``allocate`` and ``MMIO`` with
PYNQ's names, keys and behaviour, so that a notebook's DMA cell runs with only
its import line changed::

    from dmaflow.pynq import Overlay, allocate

    ol = Overlay("loopback")
    dma = ol.axi_dma_0
    inp = allocate(shape=(5,), dtype="u4")
    out = allocate(shape=(5,), dtype="u4")
    inp[:] = range(5)
    dma.sendchannel.transfer(inp)
    dma.recvchannel.transfer(out)
    dma.sendchannel.wait()
    dma.recvchannel.wait()

The designs are the emulated board's: ``"loopback"`` (an AXI DMA in direct
register mode around a loopback stream), ``"loopback-sg"`` (with its
scatter-gather engine), each with its engine at ``axi_dma_0``; ``"fir"`` (a
FIR filter core, ``fir_0``, behind a scatter-gather ``axi_dma_0``) and
``"bgsub"`` (paper 000's background-subtraction core, ``bgsub_0``, behind
``axi_dma_0`` and ``axi_dma_1``). Unlike PYNQ's
driver, a stalled core ends in ``DmaTimeoutError`` (after the board's timeout,
with the engine halted and the buffer never reused while the device may write
it), and waiting releases the GIL and sleeps on the channel's interrupt line.
"""

from __future__ import annotations

import numpy as np

from . import Board, Channel, DmaError, DmaTimeoutError, PynqBuffer, _set_default_board
from . import allocate as _allocate

__all__ = [
    "MMIO",
    "DMA",
    "DmaError",
    "DmaTimeoutError",
    "Overlay",
    "PynqBuffer",
    "allocate",
]

_loaded: Overlay | None = None


def allocate(shape, dtype="u4", target=None, **kwargs) -> PynqBuffer:
    """PYNQ's ``allocate``: a numpy array in the loaded overlay's DMA memory."""
    if target is None and _loaded is not None:
        target = _loaded.board
    return _allocate(shape, dtype, target, **kwargs)


class _DMAChannel:
    """One direction of an AXI DMA (PYNQ's ``_SDMAChannel``/``_SGDMAChannel``)."""

    def __init__(self, native: Channel) -> None:
        self._native = native
        self._array: PynqBuffer | None = None

    def transfer(self, array: PynqBuffer, start: int = 0, nbytes: int = 0) -> None:
        """Hands ``nbytes`` bytes of ``array`` from byte ``start`` to the
        channel (all of it from ``start`` when 0). ``array`` must come from
        ``allocate`` and be contiguous."""
        if not isinstance(array, PynqBuffer) or array._native is None:
            raise TypeError("transfer needs an array from allocate()")
        if not array.flags["C_CONTIGUOUS"]:
            raise ValueError("transfer needs a contiguous array")
        native = array._native
        offset = array.ctypes.data - native.address
        if start < 0 or nbytes < 0:
            raise ValueError("start and nbytes cannot be negative")
        if start > array.nbytes or (nbytes and start + nbytes > array.nbytes):
            raise ValueError(
                f"{nbytes or array.nbytes - start} bytes from {start} are not inside "
                f"the array's {array.nbytes} bytes"
            )
        n = nbytes if nbytes else array.nbytes - start
        self._native.transfer(native, offset + start, n)
        self._array = array

    def wait(self) -> None:
        """Waits for the transfer (at most the board's timeout, the GIL
        released). Raises ``DmaTimeoutError`` or ``DmaError``."""
        try:
            self._native.wait()
        finally:
            self._array = None

    async def wait_async(self) -> None:
        """``wait`` for asyncio: the wait runs in a worker thread (it sleeps on
        the interrupt line with the GIL released), so other tasks go on."""
        import asyncio

        await asyncio.to_thread(self.wait)

    @property
    def idle(self) -> bool:
        """Whether no transfer is in flight."""
        return self._native.idle

    @property
    def running(self) -> bool:
        """Whether the channel is started."""
        return self._native.running

    @property
    def error(self) -> str | None:
        """What went wrong with the last transfer."""
        return self._native.error

    @property
    def transferred(self) -> int:
        """Bytes the last transfer moved."""
        return self._native.transferred

    def start(self) -> None:
        """Starts the channel."""
        self._native.start()

    def stop(self) -> None:
        """Stops the channel (not while a transfer is in flight)."""
        self._native.stop()


class DMA:
    """An AXI DMA engine (PYNQ's ``pynq.lib.dma.DMA``) with ``sendchannel``
    (MM2S) and ``recvchannel`` (S2MM)."""

    def __init__(self, description: dict, board: Board, index: int = 0) -> None:
        self.description = description
        self.board = board
        self.sendchannel = _DMAChannel(board.channel("mm2s", index))
        self.recvchannel = _DMAChannel(board.channel("s2mm", index))
        self.mmio = MMIO(description["phys_addr"], description["addr_range"], device=board)

    def read(self, offset: int = 0) -> int:
        """Reads a register (PYNQ's ``DefaultIP.read``)."""
        return self.mmio.read(offset)

    def write(self, offset: int, value: int) -> None:
        """Writes a register (PYNQ's ``DefaultIP.write``)."""
        self.mmio.write(offset, value)


class FIR:
    """The FIR filter core of the ``"fir"`` design (``ol.fir_0``): a block
    filter of up to 512 taps, little-endian float32 samples in on the AXI DMA's
    MM2S stream, the "valid" convolution of each packet out on S2MM (``n``
    samples give ``n - taps + 1``)."""

    def __init__(self, description: dict, board: Board) -> None:
        self.description = description
        self.board = board
        self.mmio = MMIO(description["phys_addr"], description["addr_range"], device=board)

    def load_taps(self, taps) -> None:
        """Loads the filter's taps (1 to 512 finite numbers) through the core's
        registers; the register map and its checks are dmaflow's driver's."""
        self.board.load_taps([float(t) for t in np.asarray(taps, dtype=np.float32).ravel()])

    def read(self, offset: int = 0) -> int:
        """Reads a register of the core."""
        return self.mmio.read(offset)

    def write(self, offset: int, value: int) -> None:
        """Writes a register of the core."""
        self.mmio.write(offset, value)


class BgSub:
    """Paper 000's background-subtraction core of the ``"bgsub"`` design
    (``ol.bgsub_0``), for 8-bit frames of the size the design was built for.
    ``axi_dma_0`` takes the frame and gives the new background,
    ``axi_dma_1`` takes the background and gives the mask (0 or 255 per
    pixel); ``step`` drives all four channels for one frame."""

    def __init__(self, description: dict, overlay: "Overlay") -> None:
        self.description = description
        p = description["parameters"]
        self.width, self.height, self.threshold = (
            int(p["width"]),
            int(p["height"]),
            int(p["threshold"]),
        )
        self._dmas = (overlay.axi_dma_0, overlay.axi_dma_1)

    def step(self, frame: PynqBuffer, background: PynqBuffer, new_background: PynqBuffer, mask: PynqBuffer) -> None:
        """One frame: ``mask`` and ``new_background`` from ``frame`` and
        ``background`` (all arrays from ``allocate`` of ``width * height``
        bytes)."""
        d0, d1 = self._dmas
        d0.recvchannel.transfer(new_background)
        d1.recvchannel.transfer(mask)
        d0.sendchannel.transfer(frame)
        d1.sendchannel.transfer(background)
        for ch in (d0.sendchannel, d1.sendchannel, d0.recvchannel, d1.recvchannel):
            ch.wait()


class Overlay:
    """Loads one of the emulated board's designs, as PYNQ's ``Overlay`` loads a
    bitstream: its IP is then in ``ip_dict`` (PYNQ's keys), reachable by
    physical address through ``MMIO``, and as attributes (``ol.axi_dma_0``).

    ``memory`` (``"coherent"`` or ``"noncoherent"``), ``timeout`` (seconds)
    and ``length_width`` (bits of the length register, 8..=26) choose how the
    emulated board behaves; ``width``, ``height`` and ``threshold`` the frames
    the ``"bgsub"`` core is built for.
    """

    def __init__(
        self,
        name: str,
        download: bool = True,
        *,
        memory: str = "coherent",
        timeout: float = 1.0,
        length_width: int = 26,
        width: int = 320,
        height: int = 240,
        threshold: int = 25,
    ) -> None:
        global _loaded
        self.board = Board(
            name,
            memory=memory,
            timeout=timeout,
            length_width=length_width,
            width=width,
            height=height,
            threshold=threshold,
        )
        base, size = self.board.register_base, self.board.register_size
        self.ip_dict = {}
        for i in range(self.board.engines):
            self.ip_dict[f"axi_dma_{i}"] = self._dma_entry(i, base + i * size, size)
        self.mem_dict = {
            "PSDDR": {
                "base_address": self.board.memory_range[0],
                "size": self.board.memory_range[1],
                "type": "DDR4",
            }
        }
        for i in range(self.board.engines):
            setattr(self, f"axi_dma_{i}", DMA(self.ip_dict[f"axi_dma_{i}"], self.board, i))
        control = self.board.control_window
        if name == "fir" and control is not None:
            self.ip_dict["fir_0"] = {
                "fullpath": "fir_0",
                "type": "dmaflow:hls:fir:1.0",
                "phys_addr": base + control * size,
                "addr_range": size,
                "state": None,
                "interrupts": {},
                "parameters": {"C_MAX_TAPS": "512", "c_max_taps": "512"},
                "driver": FIR,
            }
            self.fir_0 = FIR(self.ip_dict["fir_0"], self.board)
        if name == "bgsub":
            self.ip_dict["bgsub_0"] = {
                "fullpath": "bgsub_0",
                "type": "dmaflow:hls:bgsub:1.0",
                "phys_addr": None,
                "addr_range": 0,
                "state": None,
                "interrupts": {},
                "parameters": {"width": str(width), "height": str(height), "threshold": str(threshold)},
                "driver": BgSub,
            }
            self.bgsub_0 = BgSub(self.ip_dict["bgsub_0"], self)
        _loaded = self
        _set_default_board(self.board)

    def _dma_entry(self, i: int, phys: int, size: int) -> dict:
        """An AXI DMA's ``ip_dict`` entry, with PYNQ's keys."""
        sg = str(int(self.board.sg))
        lw = str(self.board.length_width)
        params = {}
        for key, value in [
            ("C_INCLUDE_SG", sg),
            ("C_SG_LENGTH_WIDTH", lw),
            ("C_INCLUDE_MM2S", "1"),
            ("C_INCLUDE_S2MM", "1"),
            ("C_M_AXI_MM2S_DATA_WIDTH", "32"),
            ("C_M_AXI_S2MM_DATA_WIDTH", "32"),
            ("C_ADDR_WIDTH", "32"),
        ]:
            params[key] = value
            params[key.lower()] = value
        return {
            "fullpath": f"axi_dma_{i}",
            "type": "xilinx.com:ip:axi_dma:7.1",
            "phys_addr": phys,
            "addr_range": size,
            "state": None,
            "interrupts": {
                "mm2s_introut": {"controller": "axi_intc_0", "index": 2 * i},
                "s2mm_introut": {"controller": "axi_intc_0", "index": 2 * i + 1},
            },
            "parameters": params,
            "driver": DMA,
        }

    def is_loaded(self) -> bool:
        """Whether this is the design loaded now."""
        return _loaded is self

    def __repr__(self) -> str:
        return f"Overlay({self.board.design!r})"


class MMIO:
    """PYNQ's ``MMIO``: 32-bit register access at a physical address of the
    loaded design (its AXI DMA's register window)."""

    def __init__(
        self, base_addr: int, length: int = 4, debug: bool = False, device: Board | None = None
    ) -> None:
        if device is None:
            if _loaded is None:
                raise RuntimeError("no overlay loaded: load one with Overlay(name) first")
            device = _loaded.board
        board = device
        lo, size = board.register_base, board.register_size * board.register_windows
        if base_addr < lo or base_addr + length > lo + size or length <= 0:
            raise ValueError(
                f"{base_addr:#x}+{length:#x} is not inside a register window of the "
                f"loaded design ({lo:#x}+{size:#x})"
            )
        self.base_addr = base_addr
        self.length = length
        self._board = board
        self._offset = base_addr - lo
        self.debug = debug

    def _check(self, offset: int, nbytes: int) -> None:
        if offset < 0 or offset % 4 or offset + nbytes > self.length:
            raise ValueError(
                f"offset {offset:#x} is unaligned or outside the {self.length:#x}-byte window"
            )

    def read(self, offset: int = 0, length: int = 4, word_order: str = "little") -> int:
        """Reads ``length`` bytes (4 or 8) at ``offset``."""
        if length not in (4, 8):
            raise ValueError("MMIO reads 4 or 8 bytes")
        self._check(offset, length)
        lo = self._board.read_register(self._offset + offset)
        if length == 4:
            return lo
        hi = self._board.read_register(self._offset + offset + 4)
        return (hi << 32 | lo) if word_order == "little" else (lo << 32 | hi)

    def write(self, offset: int, data) -> None:
        """Writes an ``int`` (one 32-bit register) or ``bytes`` (whole words)
        at ``offset``."""
        if isinstance(data, (int, np.integer)):
            self._check(offset, 4)
            self._board.write_register(self._offset + offset, int(data) & 0xFFFF_FFFF)
            return
        if isinstance(data, (bytes, bytearray)):
            if len(data) % 4:
                raise ValueError("MMIO writes whole 32-bit words")
            self._check(offset, len(data))
            for i in range(0, len(data), 4):
                word = int.from_bytes(data[i : i + 4], "little")
                self._board.write_register(self._offset + offset + i, word)
            return
        raise TypeError(f"MMIO writes an int or bytes, not {type(data).__name__}")
