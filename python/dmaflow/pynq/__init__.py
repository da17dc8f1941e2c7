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
Any other name opens the real board the program runs on (see ``Overlay``).
"""

from __future__ import annotations

import gc
import os
import warnings
import weakref
from datetime import datetime

import numpy as np

from ..registers import AXI_DMA

from .. import Board, Channel, DmaError, DmaTimeoutError, PynqBuffer, _set_default_board
from .. import allocate as _allocate
from .._native import axi_dma_parameters, design_ips, emulated_designs

__all__ = [
    "EMULATED_DESIGNS",
    "DefaultHierarchy",
    "DefaultIP",
    "Interrupt",
    "MMIO",
    "DMA",
    "Device",
    "DmaError",
    "DmaTimeoutError",
    "Overlay",
    "PL",
    "PynqBuffer",
    "allocate",
]


class _DeviceMeta(type):
    """PYNQ's ``Device`` class attributes: ``devices`` and
    ``active_device``."""

    @property
    def devices(cls) -> list[Device]:
        """Every device of this process: the emulated board, then each real
        board an ``Overlay`` opened."""
        return list(_devices)

    @property
    def active_device(cls) -> Device:
        """The device ``Overlay``, ``allocate`` and ``MMIO`` use when none is
        given: the one an overlay was loaded on last (the emulated board
        before any), or the one assigned here, as on PYNQ."""
        if cls._active is None:
            cls._active = _devices[0]
        return cls._active

    @active_device.setter
    def active_device(cls, value: Device) -> None:
        if not isinstance(value, Device):
            raise TypeError(f"active_device must be a Device, not {type(value).__name__}")
        cls._active = value


class Device(metaclass=_DeviceMeta):
    """PYNQ's ``pynq.Device``: a board overlays are loaded on, with what was
    loaded last (``bitfile_name``, ``timestamp``, ``ip_dict`` and the other
    dicts) and ``allocate``. ``Device.devices`` lists them and
    ``Device.active_device`` is the default one. The emulated board is one
    device: each overlay loaded on it is a fresh board (``board``), as its
    ``Overlay`` says."""

    _active: Device | None = None

    def __init__(self, tag: str, name: str) -> None:
        #: A unique name of the device (PYNQ's ``tag``).
        self.tag = tag
        #: What the device is.
        self.name = name
        #: When an overlay was last downloaded (PYNQ's format,
        #: ``year/month/day hour:minute:second +microsecond``; ``None``
        #: before any).
        self.timestamp: str | None = None
        #: The bitstream downloaded last (``None`` before any).
        self.bitfile_name: str | None = None
        #: PYNQ's capabilities: registers are reached by reads and writes.
        self.capabilities = {"REGISTER_RW": True, "MEMORY_MAPPED": False, "CALLABLE": False}
        # The overlay downloaded last, not kept alive by the device (its
        # board's memory goes with the last of its buffers).
        self._overlay_ref: weakref.ref[Overlay] | None = None

    @property
    def _overlay(self) -> Overlay | None:
        return self._overlay_ref() if self._overlay_ref is not None else None

    @property
    def board(self) -> Board | None:
        """The board of the overlay downloaded last (``None`` before any, or
        once that overlay is gone)."""
        ol = self._overlay
        return ol.board if ol is not None else None

    def has_capability(self, cap: str) -> bool:
        """Whether the device has capability ``cap`` (PYNQ's names)."""
        return bool(self.capabilities.get(cap, False))

    def _dict(self, name: str) -> dict:
        return getattr(self._overlay, name) if self._overlay is not None else {}

    @property
    def ip_dict(self) -> dict:
        """The IP of the overlay downloaded last."""
        return self._dict("ip_dict")

    @property
    def mem_dict(self) -> dict:
        """The memories of the overlay downloaded last."""
        return self._dict("mem_dict")

    @property
    def gpio_dict(self) -> dict:
        """The AXI GPIO pins of the overlay downloaded last (none)."""
        return self._dict("gpio_dict")

    @property
    def interrupt_pins(self) -> dict:
        """The interrupt pins of the overlay downloaded last."""
        return self._dict("interrupt_pins")

    @property
    def interrupt_controllers(self) -> dict:
        """The interrupt controllers of the overlay downloaded last."""
        return self._dict("interrupt_controllers")

    @property
    def hierarchy_dict(self) -> dict:
        """The hierarchies of the overlay downloaded last (none)."""
        return self._dict("hierarchy_dict")

    def allocate(self, shape, dtype="u4", **kwargs) -> PynqBuffer:
        """A buffer in the memory of this device's loaded overlay."""
        if self.board is None:
            raise RuntimeError("Overlay is not downloaded")
        return _allocate(shape, dtype, self.board, **kwargs)

    def _downloaded(self, overlay: Overlay) -> str:
        """``overlay`` was downloaded now: its time, as PYNQ stamps it."""
        t = datetime.now()
        self.timestamp = f"{t.year}/{t.month}/{t.day} {t.hour}:{t.minute}:{t.second} +{t.microsecond}"
        self.bitfile_name = overlay.bitfile_name
        self._overlay_ref = weakref.ref(overlay)
        Device.active_device = self
        return self.timestamp

    def __repr__(self) -> str:
        return f"<Device {self.tag}: {self.name}>"


#: The devices: the emulated board first, then each real board opened.
_devices: list[Device] = [Device("emulated0", "dmaflow's emulated board")]


def _board_of(device) -> Board:
    """The board behind ``device`` (a ``Device`` or a ``Board``)."""
    if isinstance(device, Device):
        if device.board is None:
            raise RuntimeError("Overlay is not downloaded")
        return device.board
    return device


_loaded: Overlay | None = None


def allocate(shape, dtype="u4", target=None, **kwargs) -> PynqBuffer:
    """PYNQ's ``allocate``: a numpy array in the loaded overlay's DMA memory."""
    if target is None and _loaded is not None:
        target = _loaded.board
    return _allocate(shape, dtype, target, **kwargs)


class _DMAChannel:
    """One direction of an AXI DMA (PYNQ's ``_SDMAChannel``/``_SGDMAChannel``)."""

    def __init__(self, native: Channel, sg: bool = False) -> None:
        self._native = native
        self._sg = sg
        self._array: PynqBuffer | None = None

    def transfer(self, array: PynqBuffer, start: int = 0, nbytes: int = 0, cyclic: bool = False) -> None:
        """Hands ``nbytes`` bytes of ``array`` from byte ``start`` to the
        channel (all of it from ``start`` when 0). ``array`` must come from
        ``allocate`` and be contiguous. On a scatter-gather engine a transfer
        longer than ``buffer_max_size`` is spread over several descriptors,
        and ``cyclic=True`` (send channel only) sends the range again and
        again until ``stop()`` (``wait()`` then raises, as on PYNQ)."""
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
        if self._sg and not self._native.running and self._native.idle:
            # PYNQ's scatter-gather driver starts a halted channel itself
            # (after stop(), say).
            self._native.start()
        self._native.transfer(native, offset + start, n, cyclic)
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
        """Whether the channel runs (DMASR not Halted, as PYNQ reads it)."""
        return self._native.running

    @property
    def error(self) -> bool:
        """Whether the last transfer went wrong (PYNQ's ``error``; the
        message is ``error_message``)."""
        return self._native.error is not None

    @property
    def error_message(self) -> str | None:
        """What went wrong with the last transfer (``None`` if nothing)."""
        return self._native.error

    @property
    def transferred(self) -> int:
        """Bytes the last transfer moved."""
        return self._native.transferred

    def start(self) -> None:
        """Starts the channel (DMACR.RS set; ``DMA`` does it when created)."""
        self._native.start()

    def stop(self) -> None:
        """Stops the channel (DMACR.RS cleared, DMASR Halted); not while a
        transfer is in flight."""
        self._native.stop()


#: Driver classes by the IP type they bind to (PYNQ's ``bindto``).
_bound: dict[str, type] = {}


class DefaultIP:
    """An IP with registers and no driver of its own (PYNQ's ``DefaultIP``):
    ``read``/``write`` through its ``MMIO``. A subclass with
    ``bindto = ["vendor:lib:name:version", ...]`` is the driver of IP of those
    types in overlays loaded after it is defined, as on PYNQ; it is made as
    ``cls(description)`` with the ``ip_dict`` entry (its ``device`` is the
    board)."""

    bindto: list[str] = []

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for t in cls.__dict__.get("bindto", []):
            _bound[t] = cls

    def __init__(self, description: dict, board: Board | None = None) -> None:
        if board is None:
            board = _board_of(description["device"])
        self.description = description
        self._board = board
        #: The device (PYNQ's ``Device``) the IP is on.
        self.device = description.get("device", board)
        self.mmio = MMIO._on(board, self.device, description["phys_addr"], description["addr_range"])

    def read(self, offset: int = 0) -> int:
        """Reads a register."""
        return self.mmio.read(offset)

    def write(self, offset: int, value: int) -> None:
        """Writes a register."""
        self.mmio.write(offset, value)


class DMA(DefaultIP):
    """An AXI DMA engine (PYNQ's ``pynq.lib.dma.DMA``) with ``sendchannel``
    (MM2S) and ``recvchannel`` (S2MM)."""

    def __init__(self, description: dict, *args, _board: Board | None = None, _index: int | None = None, **kwargs) -> None:
        # PYNQ's form, `DMA(ol.ip_dict["axi_dma_0"])`: the entry names its
        # board (`device`) and the engine (`fullpath`). PYNQ's older driver
        # took more arguments: PYNQ says where it went.
        if not isinstance(description, dict) or args or kwargs:
            raise RuntimeError(
                "You appear to want the old DMA driver which has been deprecated and moved to pynq.lib.deprecated"
            )
        board, index = _board, _index
        if board is None:
            if "device" not in description:
                raise RuntimeError("Device not specified in description")
            board = _board_of(description["device"])
        if index is None:
            name = description["fullpath"]
            if name not in board.engine_names:
                raise ValueError(f"{name!r} is not an AXI DMA engine of the design ({', '.join(board.engine_names)})")
            index = board.engine_names.index(name)
        super().__init__(description, board)
        self.board = board
        self.sendchannel = _DMAChannel(board.channel("mm2s", index), board.sg)
        self.recvchannel = _DMAChannel(board.channel("s2mm", index), board.sg)
        # As PYNQ's drivers: the direct-mode driver starts both channels when
        # the IP is created (DMASR reads running before the first transfer);
        # the scatter-gather driver leaves them halted until a transfer.
        if not board.sg:
            self.sendchannel.start()
            self.recvchannel.start()
        #: The most bytes one transfer moves: what the length register holds.
        self.buffer_max_size = (1 << board.length_width) - 1

    @property
    def register_map(self):
        """PYNQ's ``register_map``: the AXI DMA's registers by name
        (``MM2S_DMACR``, ``S2MM_DMASR``, ...) with their fields (``RS``,
        ``Idle``, ...), read and written through ``mmio``."""
        from ..registers import AXI_DMA, RegisterMap

        return RegisterMap(self.mmio, AXI_DMA)


class FIR(DefaultIP):
    """The FIR filter core of the ``"fir"`` design (``ol.fir_0``): a block
    filter of up to 512 taps, little-endian float32 samples in on the AXI DMA's
    MM2S stream, the "valid" convolution of each packet out on S2MM (``n``
    samples give ``n - taps + 1``)."""

    def __init__(self, description: dict, board: Board | None = None) -> None:
        super().__init__(description, board)
        self.board = self._board

    def load_taps(self, taps) -> None:
        """Loads the filter's taps (1 to 512 finite numbers) through the core's
        registers; the register map and its checks are dmaflow's driver's."""
        self.board.load_taps([float(t) for t in np.asarray(taps, dtype=np.float32).ravel()])


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


#: Real boards opened in this process, by where and how: loading a design
#: again (a notebook's cell run twice) gets the same board, since the
#: u-dma-buf has one pool at a time.
_real_boards: dict[tuple, Board] = {}


def _real_device(root: str) -> Device:
    """The ``Device`` of the real board under ``root`` (one per root)."""
    for d in _devices:
        if d.tag == f"board:{root}":
            return d
    d = Device(f"board:{root}", f"the board under {root}")
    _devices.append(d)
    return d


def _open_real_board(root, udmabuf, engines, timeout, length_width) -> Board:
    """The real board under ``root`` with ``udmabuf`` as its memory, opened
    once per process for the same arguments; other arguments open it again
    once the program holds none of the earlier board's buffers."""
    key = (root, udmabuf, None if engines is None else tuple(engines), timeout, length_width)
    board = _real_boards.get(key)
    if board is None:
        global _loaded
        for other in [k for k in _real_boards if k[:2] == key[:2]]:
            del _real_boards[other]
        if _loaded is not None and not _loaded.board.emulated:
            _loaded = None
            _set_default_board(None)
        gc.collect()
        board = Board.open(root, memory=udmabuf, engines=engines, timeout=timeout, length_width=length_width)
        _real_boards[key] = board
    return board


#: The emulated board's designs.
EMULATED_DESIGNS = tuple(emulated_designs())


def _parameters(pairs) -> dict:
    """An ``ip_dict`` entry's ``parameters``: each under Vivado's name and in
    lower case, as PYNQ gives them."""
    params = {}
    for key, value in pairs:
        params[key] = value
        params[key.lower()] = value
    return params


def _registers(description) -> dict:
    """An ``ip_dict`` entry's ``registers``, in PYNQ's form."""
    return {
        name: {
            "address_offset": offset,
            "size": 32,
            "access": "read-write",
            "description": name,
            "fields": {
                f: {"bit_offset": lsb, "bit_width": width, "access": access, "description": f}
                for f, (lsb, width, access) in fields.items()
            },
        }
        for name, offset, fields in description
    }


class Overlay:
    """Loads a design, as PYNQ's ``Overlay`` loads a bitstream: its IP is
    then in ``ip_dict`` (PYNQ's keys), reachable by physical address through
    ``MMIO``, and as attributes (``ol.axi_dma_0``).

    ``name`` one of ``EMULATED_DESIGNS`` runs that design on the emulated
    board: ``memory`` (``"coherent"`` or ``"noncoherent"``), ``timeout``
    (seconds) and ``length_width`` (bits of the length register, 8..=26)
    choose how it behaves; ``width``, ``height`` and ``threshold`` the frames
    the ``"bgsub"`` core is built for.

    Any other ``name`` (a bitstream's path, as on PYNQ) opens the real board
    the program runs on, under ``root`` (``/``, or ``$DMAFLOW_ROOT``), with
    the design already programmed and its device tree overlay applied (PYNQ
    or ``fpgautil`` does that; dmaflow does not program the fabric): each
    IP's registers are the UIO device named as its block-design instance
    (``axi_dma_0``), each DMA channel's interrupt the UIO device
    ``<engine>_mm2s_introut`` / ``<engine>_s2mm_introut`` where Linux gets it
    (a channel without one is completed by polling), and buffers come from
    the u-dma-buf ``udmabuf``. ``engines`` names the AXI DMA engines (by
    default every UIO device whose name starts with ``axi_dma``).

    ``device`` (PYNQ's keyword) names the ``Device`` to load on; it must be
    the one the design runs on (the emulated board, or the real one).
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
        root: str | None = None,
        udmabuf: str = "udmabuf0",
        engines: list[str] | None = None,
        device: Device | None = None,
    ) -> None:
        global _loaded
        if device is not None and not isinstance(device, Device):
            raise TypeError(f"device must be a Device, not {type(device).__name__}")
        self.name = name
        if name in EMULATED_DESIGNS:
            self.board = Board(
                name,
                memory=memory,
                timeout=timeout,
                length_width=length_width,
                width=width,
                height=height,
                threshold=threshold,
            )
        else:
            if root is None:
                root = os.environ.get("DMAFLOW_ROOT", "/")
            try:
                self.board = _open_real_board(root, udmabuf, engines, timeout, length_width)
            except RuntimeError as e:
                raise type(e)(
                    f"{name!r} is not an emulated design ({', '.join(EMULATED_DESIGNS)}), "
                    f"and the real board under {root} could not be opened: {e}"
                ) from e
        #: The device the overlay is loaded on (PYNQ's ``pynq.Device``):
        #: the emulated board, or the real one under ``root``.
        self.device = _devices[0] if self.board.emulated else _real_device(root)
        if device is not None and device is not self.device:
            raise ValueError(f"{name!r} runs on {self.device!r}, not on {device!r}")
        self.ip_dict: dict[str, dict] = {}
        engine_names = self.board.engine_names
        #: The emulated design's IP, from dmaflow's table of the designs.
        self._design_ips = (
            {ip["name"]: ip for ip in design_ips(name, self.board.length_width)} if self.board.emulated else {}
        )
        for wname, phys, size in self.board.windows:
            if wname in engine_names:
                self.ip_dict[wname] = self._dma_entry(engine_names.index(wname), wname, phys, size)
            elif wname == "fir_0" and self.board.emulated:
                self.ip_dict[wname] = {
                    "fullpath": wname,
                    "type": self._design_ips[wname]["type"],
                    "phys_addr": phys,
                    "addr_range": size,
                    "state": None,
                    "interrupts": {},
                    "parameters": _parameters(self._design_ips[wname]["parameters"]),
                    "driver": FIR,
                }
            else:
                self.ip_dict[wname] = {
                    "fullpath": wname,
                    "type": "unknown",
                    "phys_addr": phys,
                    "addr_range": size,
                    "state": None,
                    "interrupts": {},
                    "parameters": {},
                    "driver": DefaultIP,
                }
        lo, size = self.board.memory_range
        self.mem_dict = {
            "PSDDR" if self.board.emulated else udmabuf: {
                "base_address": lo,
                "size": size,
                "type": "DDR4" if self.board.emulated else "u-dma-buf",
            }
        }
        for key, entry in self.ip_dict.items():
            # PYNQ's further keys that code reads.
            entry.setdefault("device", self.device)
            entry.setdefault("mem_id", "S_AXI_LITE")
            entry.setdefault("bdtype", None)
            entry.setdefault("gpio", {})
            entry.setdefault("registers", _registers(AXI_DMA) if entry["driver"] is DMA else {})
        #: The bitstream's name (PYNQ's ``bitfile_name``): the design's name
        #: with ``.bit`` on the emulated board, the path given on a real one.
        self.bitfile_name = f"{name}.bit" if self.board.emulated else name
        #: Hierarchies, AXI GPIO pins, partial regions and PS clocks the
        #: design declares: dmaflow's designs are flat and set no clocks.
        self.hierarchy_dict: dict[str, dict] = {}
        self.gpio_dict: dict[str, dict] = {}
        self.pr_dict: dict[str, dict] = {}
        self.clock_dict: dict[int, dict] = {}
        #: Each interrupt pin by its full path, with its controller and index
        #: (PYNQ's ``interrupt_pins``), and the controllers.
        self.interrupt_pins: dict[str, dict] = {}
        self.interrupt_controllers: dict[str, dict] = {}
        for entry in self.ip_dict.values():
            for pin in entry["interrupts"].values():
                self.interrupt_pins[pin["fullpath"]] = dict(pin, parent="")
                self.interrupt_controllers.setdefault(pin["controller"], {"parent": "", "index": 0})
        #: When the overlay was downloaded, as PYNQ stamps it (the device's
        #: ``timestamp`` and ``PL.timestamp`` while it is the one loaded).
        self.timestamp = self.device._downloaded(self)
        self._create_ips()
        if name == "bgsub":
            self.ip_dict["bgsub_0"] = {
                "fullpath": "bgsub_0",
                "type": self._design_ips["bgsub_0"]["type"],
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

    def _create_ips(self) -> None:
        """The IP's driver objects, as attributes (``ol.axi_dma_0``)."""
        engine_names = self.board.engine_names
        for key, entry in self.ip_dict.items():
            driver = entry["driver"]
            if driver is BgSub:
                continue
            bound = _bound.get(entry["type"])
            if bound is not None:
                # A driver of the user's (PYNQ's `bindto`).
                entry["driver"] = bound
                ip = bound(entry)
            elif driver is DMA:
                ip = DMA(entry, _board=self.board, _index=engine_names.index(key))
            else:
                ip = driver(entry, self.board)
            setattr(self, key.replace("-", "_"), ip)

    def download(self) -> None:
        """Loads the design again (PYNQ's ``download``): the fabric returns
        to its power-on state (every DMA engine reset), the IP's driver
        objects are made anew (direct-mode channels started, as on PYNQ),
        and this overlay is the loaded one. Buffers allocated before stay
        valid (they are the board's memory, not the fabric's). On a real
        board dmaflow does not program the fabric (PYNQ or ``fpgautil``
        does): this resets its engines the same way."""
        global _loaded
        self.board.reset()
        self.timestamp = self.device._downloaded(self)
        self._create_ips()
        if hasattr(self, "bgsub_0"):
            self.bgsub_0 = BgSub(self.ip_dict["bgsub_0"], self)
        _loaded = self
        _set_default_board(self.board)

    def reset(self) -> None:
        """Returns the design's IP to its power-on state (PYNQ's
        ``Overlay.reset``): every DMA engine reset, its driver objects made
        anew. A transfer in flight ends in its wait with a timeout."""
        self.board.reset()
        self._create_ips()
        if hasattr(self, "bgsub_0"):
            self.bgsub_0 = BgSub(self.ip_dict["bgsub_0"], self)

    def free(self) -> None:
        """Gives the overlay up (PYNQ's ``free``): it is no longer the
        loaded design, and ``allocate`` and ``MMIO`` no longer default to its
        board. Its memory goes when the last buffer on it does."""
        global _loaded
        if _loaded is self:
            _loaded = None
            _set_default_board(None)

    def _dma_entry(self, i: int, name: str, phys: int, size: int) -> dict:
        """An AXI DMA's ``ip_dict`` entry, with PYNQ's keys."""
        params = _parameters(axi_dma_parameters(self.board.sg, self.board.length_width))
        interrupts = {}
        if self.board.emulated:
            for pin, controller, line in self._design_ips[name]["interrupts"]:
                interrupts[pin] = {"controller": controller, "index": line, "fullpath": f"{name}/{pin}"}
        else:
            for pin in ("mm2s_introut", "s2mm_introut"):
                if self.board.has_interrupt(pin[:4], i):
                    interrupts[pin] = {"controller": "uio", "device": f"{name}_{pin}", "fullpath": f"{name}/{pin}"}
        return {
            "fullpath": name,
            "type": "xilinx.com:ip:axi_dma:7.1",
            "phys_addr": phys,
            "addr_range": size,
            "state": None,
            "interrupts": interrupts,
            "parameters": params,
            "driver": DMA,
        }

    def is_loaded(self) -> bool:
        """Whether this is the design loaded now."""
        return _loaded is self

    def __repr__(self) -> str:
        return f"Overlay({self.name!r})"


class DefaultHierarchy:
    """PYNQ's ``DefaultHierarchy``: dmaflow's designs are flat (no
    hierarchies in their ``ip_dict``), so there is nothing to bind one to."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(
            "hierarchies: dmaflow's designs are flat (hierarchy_dict is empty); "
            "drive each IP from ip_dict"
        )


class Interrupt:
    """PYNQ's ``Interrupt``: a DMA channel's interrupt is used by ``wait()``
    and ``wait_async()`` underneath; other interrupt pins are not driven."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError(
            "pynq.Interrupt: a DMA channel's interrupt line is used by its wait() and "
            "wait_async(); dmaflow drives no other interrupt pins"
        )


class _PL:
    """PYNQ's ``PL``: what the programmable logic holds now (the loaded
    overlay's ``bitfile_name``, ``ip_dict``, ``interrupt_pins`` and the
    rest; empty before any ``Overlay`` is loaded), and ``reset()``."""

    def _get(self, name: str, empty):
        return getattr(_loaded, name) if _loaded is not None else empty

    @property
    def bitfile_name(self) -> str | None:
        """The loaded design's bitstream name (``None`` before any)."""
        return self._get("bitfile_name", None)

    @property
    def timestamp(self) -> str | None:
        """When the loaded design was downloaded (``None`` before any), as
        PYNQ stamps it: ``year/month/day hour:minute:second +microsecond``."""
        return self._get("timestamp", None)

    @property
    def ip_dict(self) -> dict:
        """The loaded design's IP."""
        return self._get("ip_dict", {})

    @property
    def mem_dict(self) -> dict:
        """The loaded design's memories."""
        return self._get("mem_dict", {})

    @property
    def gpio_dict(self) -> dict:
        """The loaded design's AXI GPIO pins (none in dmaflow's designs)."""
        return self._get("gpio_dict", {})

    @property
    def hierarchy_dict(self) -> dict:
        """The loaded design's hierarchies (none: the designs are flat)."""
        return self._get("hierarchy_dict", {})

    @property
    def interrupt_pins(self) -> dict:
        """The loaded design's interrupt pins."""
        return self._get("interrupt_pins", {})

    @property
    def interrupt_controllers(self) -> dict:
        """The loaded design's interrupt controllers."""
        return self._get("interrupt_controllers", {})

    @property
    def clock_dict(self) -> dict:
        """The PS clocks the loaded design sets (none in dmaflow's designs)."""
        return self._get("clock_dict", {})

    def reset(self) -> None:
        """Returns the fabric to its power-on state: the loaded overlay's
        engines reset and its driver objects made anew
        (``Overlay.reset``); nothing to do before any overlay is loaded."""
        if _loaded is not None:
            _loaded.reset()

    def __repr__(self) -> str:
        return f"PL(bitfile_name={self.bitfile_name!r})"


#: PYNQ's ``PL`` object.
PL = _PL()


class MMIO:
    """PYNQ's ``MMIO``: 32-bit register access at a physical address of the
    loaded design (inside one of its IP's register windows), with PYNQ's
    arguments, exceptions and messages. ``device`` is a ``Device`` (by
    default ``Device.active_device``) or a board."""

    def __init__(self, base_addr: int, length: int = 4, device=None, **kwargs) -> None:
        if "debug" in kwargs:
            warnings.warn("Keyword debug has been deprecated.", DeprecationWarning, stacklevel=2)
        if device is None:
            if _loaded is None:
                raise RuntimeError("no overlay loaded: load one with Overlay(name) first")
            device = Device.active_device
        self._setup(_board_of(device), device, base_addr, length)

    @classmethod
    def _on(cls, board: Board, device, base_addr: int, length: int) -> MMIO:
        """An MMIO on ``board`` itself, whichever board ``device`` holds now
        (an IP's driver stays with the overlay it was made for)."""
        mmio = cls.__new__(cls)
        mmio._setup(board, device, base_addr, length)
        return mmio

    def _setup(self, board: Board, device, base_addr: int, length: int) -> None:
        if base_addr < 0 or length < 0:
            raise ValueError("Base address or length cannot be negative.")
        if length == 0 or not any(
            lo <= base_addr and base_addr + length <= lo + size for _, lo, size in board.windows
        ):
            windows = ", ".join(f"{n} {lo:#x}+{size:#x}" for n, lo, size in board.windows)
            raise ValueError(
                f"{base_addr:#x}+{length:#x} is not inside a register window of the "
                f"loaded design ({windows or 'none'})"
            )
        self.base_addr = base_addr
        self.length = length
        self._board = board
        #: The device whose registers these are (PYNQ's ``device``).
        self.device = device

    @property
    def array(self) -> "_RegisterArray":
        """The window as 32-bit words (PYNQ's ``mmio.array``): ``array[i]``
        reads word ``i``, ``array[i] = v`` writes it, slices give lists."""
        return _RegisterArray(self)

    def _word(self, offset: int, what: str) -> int:
        """The index of the word at ``offset``, with PYNQ's checks and
        messages: a negative offset is a ``ValueError``, an unaligned one a
        ``MemoryError``."""
        if offset < 0:
            raise ValueError("Offset cannot be negative.")
        if offset % 4:
            raise MemoryError(f"Unaligned {what}: offset must be multiple of 4.")
        return offset >> 2

    def _in_window(self, idx: int) -> int:
        """The physical address of word ``idx``; past the window an
        ``IndexError`` in the words of the numpy array PYNQ's MMIO indexes."""
        words = self.length // 4
        if idx >= words:
            raise IndexError(f"index {idx} is out of bounds for axis 0 with size {words}")
        return self.base_addr + 4 * idx

    def read(self, offset: int = 0, length: int = 4, word_order: str = "little", dtype=None):
        """Reads ``length`` bytes (1, 2, 4 or 8) at ``offset`` as an ``int``,
        as PYNQ does (8 bytes: two words, in ``word_order``); with ``dtype``
        (dmaflow's keyword) the word as that type: ``np.uint32``/``int`` and
        narrower integers the word, 64-bit integers two words,
        ``np.float32``/``float`` the word's bits."""
        if dtype is not None:
            dt = np.dtype(dtype) if dtype not in (int, float) else dtype
            if dt in (np.dtype("i8"), np.dtype("u8")):
                return dt.type(self.read(offset, 8))
            word = self.read(offset)
            if dt is int:
                return word
            if dt in (float, np.dtype("f4")):
                value = np.frombuffer(word.to_bytes(4, "little"), dtype="<f4")[0]
                return float(value) if dt is float else value
            if isinstance(dt, np.dtype) and dt.kind in "iu":
                return dt.type(word & ((1 << (8 * dt.itemsize)) - 1))
            raise ValueError(f"dtype {dtype!r} is not supported")
        if length not in (1, 2, 4, 8):
            raise ValueError("MMIO currently only supports 1, 2, 4 and 8-byte reads.")
        if offset < 0:
            raise ValueError("Offset cannot be negative.")
        if length == 8 and word_order not in ("big", "little"):
            raise ValueError("MMIO only supports big and little endian.")
        idx = self._word(offset, "read")
        lo = self._board.read_register(self._in_window(idx))
        if length < 8:
            return lo & ((1 << (8 * length)) - 1)
        hi = self._board.read_register(self._in_window(idx + 1))
        return (hi << 32 | lo) if word_order == "little" else (lo << 32 | hi)

    def write(self, offset: int, data) -> None:
        """Writes an ``int`` (one 32-bit register) or ``bytes`` (whole words)
        at ``offset``; anything else is a ``ValueError``, as on PYNQ (whose
        check is ``type(data) is int``: a numpy integer or a ``bool`` is
        refused too)."""
        idx = self._word(offset, "write")
        if type(data) is int:
            self._board.write_register(self._in_window(idx), data & 0xFFFF_FFFF)
        elif type(data) is bytes:
            if len(data) % 4:
                raise MemoryError("Unaligned write: data length must be multiple of 4.")
            # Every word checked before the first is written.
            addrs = [self._in_window(idx + i) for i in range(len(data) // 4)]
            for i, addr in enumerate(addrs):
                self._board.write_register(addr, int.from_bytes(data[4 * i : 4 * i + 4], "little"))
        else:
            raise ValueError("Data type must be int or bytes.")


class _RegisterArray:
    """A register window as 32-bit words, each access one register access
    (PYNQ's ``mmio.array`` on a device reached by register reads and writes)."""

    def __init__(self, mmio: MMIO) -> None:
        self._mmio = mmio

    def __len__(self) -> int:
        return self._mmio.length // 4

    def _index(self, i: int) -> int:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"word {i} of a window of {n} words")
        return i

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return np.uint32(self._mmio.read(4 * self._index(int(i))))

    def __setitem__(self, i, value) -> None:
        if isinstance(i, slice):
            for j, v in zip(range(*i.indices(len(self))), value, strict=True):
                self[j] = v
            return
        self._mmio.write(4 * self._index(int(i)), int(value))
