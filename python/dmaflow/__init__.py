"""dmaflow from Python: DMA buffers that numpy views in place, and the AXI DMA
channels of an emulated Zynq board (or a real one), with dmaflow's timeouts and
recovery underneath.

``dmaflow.pynq`` is the PYNQ-compatible facade: change ``from pynq import ...``
to ``from dmaflow.pynq import ...`` and a notebook's DMA cell runs as it is.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._native import Board, Channel, DmaBuffer, DmaError, DmaTimeoutError, PacketRing, QueueClosed
from ._native import Graph as _NativeGraph
from ._native import Queue as _NativeQueue
from ._native import SharedReader as _NativeSharedReader
from ._native import SharedWriter as _NativeSharedWriter

__all__ = [
    "Board",
    "Engine",
    "Graph",
    "Channel",
    "DmaBuffer",
    "DmaError",
    "DmaTimeoutError",
    "PacketRing",
    "PynqBuffer",
    "Queue",
    "QueueClosed",
    "SharedQueueReader",
    "SharedQueueWriter",
    "allocate",
    "default_board",
]

_default: Board | None = None


def default_board() -> Board:
    """The board buffers go to when none is named: the one an overlay loaded
    last, else an emulated board with the ``"loopback"`` design."""
    global _default
    if _default is None:
        _default = Board("loopback")
    return _default


def _set_default_board(board: Board | None) -> None:
    global _default
    _default = board


class PynqBuffer(np.ndarray):
    """A numpy array over a DMA buffer, in place (PYNQ's ``PynqBuffer``).

    Views and slices keep the buffer alive; ``physical_address`` is the bus
    address of the array's first element (of a slice, too).
    """

    _native: DmaBuffer | None

    def __array_finalize__(self, obj) -> None:
        self._native = getattr(obj, "_native", None)

    def _buffer(self) -> DmaBuffer:
        if self._native is None:
            raise ValueError("this array is not over a DMA buffer")
        return self._native

    @property
    def physical_address(self) -> int:
        """Bus address of the first element, as the device sees it."""
        b = self._buffer()
        return b.physical_address + (self.ctypes.data - b.address)

    @property
    def virtual_address(self) -> int:
        """The CPU address of the first item (PYNQ's ``virtual_address``)."""
        return self.ctypes.data

    @property
    def device_address(self) -> int:
        """The same as ``physical_address`` (PYNQ's name on newer boards)."""
        return self.physical_address

    @property
    def coherent(self) -> bool:
        """Whether the board needs no cache maintenance."""
        return self._buffer().coherent

    @property
    def cacheable(self) -> bool:
        """PYNQ's meaning: whether the buffer needs cache maintenance
        (``not coherent``); dmaflow does that maintenance for you."""
        return not self.coherent

    def _range(self) -> tuple[int, int]:
        b = self._buffer()
        return self.ctypes.data - b.address, self.nbytes

    def flush(self) -> None:
        """Makes what the CPU wrote visible to the device (clean)."""
        self._buffer().sync_to_device(*self._range())

    def invalidate(self) -> None:
        """Makes what the device wrote visible to the CPU (invalidate)."""
        self._buffer().sync_from_device(*self._range())

    def sync_to_device(self) -> None:
        """The same as ``flush``."""
        self.flush()

    def sync_from_device(self) -> None:
        """The same as ``invalidate``."""
        self.invalidate()

    def freebuffer(self) -> None:
        """Returns the DMA memory to the pool at the call, as PYNQ does (an
        error while a transfer owns it). Arrays that still view the buffer
        keep a private copy of its bytes: they never show the memory's next
        owner, and a transfer refuses them."""
        self._buffer().close()

    def close(self) -> None:
        """Does nothing but warn, as on PYNQ (whose ``close`` stopped freeing
        the buffer): a ``DeprecationWarning``. ``freebuffer()`` or ``with``
        give the memory back."""
        warnings.warn(".close no longer functional - use scopes to manage buffers", DeprecationWarning, stacklevel=2)

    def __enter__(self) -> PynqBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.freebuffer()


def allocate(
    shape,
    dtype="u4",
    target=None,
    *,
    board: Board | None = None,
    cacheable: bool = True,
) -> PynqBuffer:
    """A numpy array of ``shape`` and ``dtype`` in a board's DMA memory, in
    place (no copy), zeroed as the kernel's DMA allocators hand memory out.

    Accepts PYNQ's keywords: ``target`` (a memory bank or an IP; dmaflow's
    boards have one bank, so it only chooses the board when it is one), and
    ``cacheable`` (dmaflow's buffers are always cacheable, with cache
    maintenance done for you where the board needs it).
    """
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise TypeError(f"a DMA buffer cannot hold Python objects (dtype {dt})")
    if isinstance(target, Board) and board is None:
        board = target
    if board is None:
        board = getattr(target, "board", None) or default_board()
    shape_t = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape_t):
        raise ValueError(f"negative dimension in shape {shape_t}")
    count = int(np.prod(shape_t, dtype=np.int64))
    nbytes = count * dt.itemsize
    if nbytes == 0:
        raise ValueError(f"a DMA buffer of zero bytes (shape {shape_t}, dtype {dt})")
    native = board.allocate(nbytes)
    arr = np.frombuffer(native, dtype=dt, count=count).reshape(shape_t).view(PynqBuffer)
    arr._native = native
    return arr


class Engine:
    """A board's AXI DMA engine driven by dmaflow's own zero-copy two-way
    transfer (both channels at once), with the completion mode of your choice:
    ``"poll"`` (spin on DMASR), ``"yield"`` (poll, sleeping briefly between reads) or
    ``"irq"`` (sleep on the interrupt line). The GIL is released while the
    transfer runs."""

    def __init__(self, board: Board | None = None, index: int = 0) -> None:
        self.board = board if board is not None else default_board()
        self._index = index
        self._native = self.board.engine(index)

    @staticmethod
    def _whole(a: PynqBuffer, what: str) -> DmaBuffer:
        if not isinstance(a, PynqBuffer) or a._native is None:
            raise TypeError(f"{what} must be an array from allocate()")
        # Within its buffer, a contiguous array of the buffer's size is the
        # whole buffer (cheaper to ask than its address).
        if a.nbytes != a._native.nbytes or not a.flags.c_contiguous:
            raise ValueError(f"{what} must be a whole buffer from allocate(), not a view into one")
        return a._native

    def begin(self, tx: PynqBuffer, rx: PynqBuffer) -> "Transfer":
        """Starts sending all of ``tx`` and receiving into ``rx`` and returns at
        once; ``wait()`` on the handle collects it. Both buffers belong to the
        transfer until then (closing one raises)."""
        return Transfer(self.board, self._index, tx, rx)

    def two_way(self, tx: PynqBuffer, rx: PynqBuffer, completion: str = "irq") -> int:
        """Sends all of ``tx`` and receives into ``rx``; returns the bytes
        received. Raises ``DmaTimeoutError`` or ``DmaError`` with the engine
        halted."""
        return self._native.two_way(
            self._whole(tx, "tx"), self._whole(rx, "rx"), tx.nbytes, completion
        )


def _window_array(view, dtype: np.dtype) -> np.ndarray:
    """A window's items as an array in place (an empty, read-only one for an
    empty window)."""
    if view.nbytes == 0:
        a = np.empty(0, dtype=dtype)
        a.flags.writeable = False
        return a
    return np.frombuffer(view, dtype=dtype)


def _queue_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise TypeError(f"a queue cannot hold Python objects (dtype {dt})")
    return dt


class _Writing:
    """The writing half of a queue facade: ``reserve``/``commit``/``write``
    over ``self._native`` with items of ``self.dtype``."""

    dtype: np.dtype
    _native: object

    @property
    def capacity(self) -> int:
        """Items the queue holds."""
        return self._native.capacity

    def reserve(self, n: int, timeout: float | None = None) -> np.ndarray:
        """``n`` free slots in place, waiting for them (at most ``timeout``
        seconds; ``TimeoutError`` after)."""
        return _window_array(self._native.reserve(int(n), timeout), self.dtype)

    def commit(self, k: int) -> None:
        """Publishes the first ``k`` reserved items."""
        self._native.commit(int(k))

    def write(self, items, timeout: float | None = None) -> None:
        """Copies ``items`` in and commits them (``reserve`` + ``commit``)."""
        data = np.ascontiguousarray(items, dtype=self.dtype).ravel()
        done = 0
        while done < len(data):
            k = min(len(data) - done, self.capacity)
            slots = self.reserve(k, timeout)
            slots[:] = data[done : done + k]
            del slots
            self.commit(k)
            done += k


class _Reading:
    """The reading half of a queue facade: ``peek``/``consume`` over
    ``self._native`` with items of ``self.dtype``."""

    dtype: np.dtype
    _native: object

    @property
    def capacity(self) -> int:
        """Items the queue holds."""
        return self._native.capacity

    def peek(self, n: int, timeout: float | None = None) -> np.ndarray:
        """The next ``n`` items in place, read-only, waiting for them (at most
        ``timeout`` seconds); fewer, down to none, once the stream has ended."""
        return _window_array(self._native.peek(int(n), timeout), self.dtype)

    def consume(self, m: int) -> None:
        """Releases the first ``m`` items of the window."""
        self._native.consume(int(m))


class Queue(_Writing, _Reading):
    """dmaflow's mirrored circular queue of ``dtype`` items (paper 001's
    zero-copy queue).

    ``peek(n)`` returns the next ``n`` items as a read-only numpy array *in
    place*, contiguous even where they wrap round the end of the queue (the
    memory is mapped twice); ``consume(m)`` then releases the first ``m`` (a
    reader may look at more than it consumes: the firing threshold).
    ``reserve(n)`` returns ``n`` free slots as a writable array in place, and
    ``commit(k)`` publishes the first ``k``. ``consume`` and ``commit`` are
    refused (``BufferError``) while arrays from ``peek``/``reserve`` are alive:
    ``del`` them first, so an array never sees slots that changed hands.
    """

    def __init__(self, capacity: int, dtype="f4") -> None:
        self.dtype = _queue_dtype(dtype)
        self._native = _NativeQueue(int(capacity), self.dtype.itemsize)

    def close(self) -> None:
        """Ends the stream: the reader gets what is left, then empty windows."""
        self._native.close_writer()


class SharedQueueWriter(_Writing):
    """The writing end of a queue shared with other processes: the same
    in-place ``reserve``/``commit`` as :class:`Queue`, over memory that
    readers in other processes (:class:`SharedQueueReader`, or dmaflow's Rust
    ``ring::shm::ShmReader``) map too. With ``path`` (e.g. under ``/dev/shm``)
    the queue is a file readers open by name, removed on ``close``; without
    it, pass ``fd`` to a child process (``subprocess``'s ``pass_fds``).

    A reader that dies, or holds the writer back without moving for
    ``evict_after`` seconds while it waits for room, is evicted;
    ``events()`` lists evictions as ``(slot, pid, position, reason)``.
    """

    def __init__(
        self,
        capacity: int,
        dtype="f4",
        path: str | None = None,
        max_readers: int = 8,
        evict_after: float = 1.0,
    ) -> None:
        self.dtype = _queue_dtype(dtype)
        self._native = _NativeSharedWriter(
            int(capacity), self.dtype.itemsize, path, int(max_readers), float(evict_after)
        )

    @property
    def fd(self) -> int:
        """The memory object's file descriptor (while the writer is open)."""
        return self._native.fd

    @property
    def readers(self) -> int:
        """Readers attached now."""
        return self._native.readers

    def wait_for_readers(self, n: int = 1, timeout: float = 10.0) -> None:
        """Waits until ``n`` readers are attached (``TimeoutError`` after
        ``timeout`` seconds)."""
        self._native.wait_for_readers(int(n), float(timeout))

    def events(self) -> list[tuple[int, int, int, str]]:
        """Evictions since the last call: ``(slot, pid, position, reason)``."""
        return self._native.events()

    def close(self) -> None:
        """Ends the stream (readers get what is left, then empty windows) and
        removes the queue's file, if it has one."""
        self._native.close()


class SharedQueueReader(_Reading):
    """A reading end of a queue another process writes
    (:class:`SharedQueueWriter`, or dmaflow's Rust ``ring::shm::ShmWriter``),
    attached by ``path`` or by an inherited ``fd``: the same in-place
    ``peek``/``consume`` as :class:`Queue`. ``dtype`` must have the writer's
    item size (checked). A window is the writer's memory: it is the reader's,
    unchanged, for at least the writer's ``evict_after`` from the ``peek``
    that made it; held longer while the writer waits for room, the reader may
    be evicted and the window overwritten. Use what you read from a window
    only once ``intact()`` or the ``consume`` that releases it has succeeded (an evicted
    reader's next call raises ``ValueError`` saying so). A writer
    process that exits without closing raises ``ValueError`` rather than
    leaving ``peek`` to wait.
    """

    def __init__(self, dtype="f4", path: str | None = None, fd: int | None = None) -> None:
        self.dtype = _queue_dtype(dtype)
        self._native = _NativeSharedReader(self.dtype.itemsize, path, fd)

    def intact(self) -> None:
        """Raises ``ValueError`` if this reader was evicted since its last
        ``peek``: what that window showed may have been overwritten. Call it
        after reading a window in place and before acting on what you read."""
        self._native.intact()


class InputPort:
    """A Python node's input: ``peek(n)`` waits for ``n`` items and returns
    every readable item as a read-only array in place (fewer, down to none,
    at the end of the stream); ``consume(m)`` releases ``m`` of them. Arrays
    from an earlier ``peek`` must be dropped before the next ``peek`` or
    ``consume``."""

    def __init__(self, native, dtype: np.dtype) -> None:
        self._native = native
        self.dtype = dtype

    def peek(self, n: int) -> np.ndarray:
        """At least ``n`` items in place (fewer only at the end of the stream)."""
        return _window_array(self._native.peek(int(n)), self.dtype)

    def consume(self, m: int) -> None:
        """Releases the first ``m`` items."""
        self._native.consume(int(m))

    def __iter__(self):
        """The stream in chunks (each a copy, so it may be kept)."""
        while True:
            w = self.peek(1)
            k = len(w)
            if k == 0:
                return
            chunk = w.copy()
            del w
            self.consume(k)
            yield chunk


class OutputPort:
    """A Python node's output: ``reserve(n)`` returns ``n`` free slots in
    place, ``commit(k)`` publishes the first ``k`` (drop the array first);
    ``write(items)`` does both."""

    def __init__(self, native, dtype: np.dtype) -> None:
        self._native = native
        self.dtype = dtype

    def reserve(self, n: int) -> np.ndarray:
        """``n`` free slots in place, writable."""
        return np.frombuffer(self._native.reserve(int(n)), dtype=self.dtype)

    def commit(self, k: int) -> None:
        """Publishes the first ``k`` reserved items."""
        self._native.commit(int(k))

    def write(self, items) -> None:
        """Copies ``items`` into the queue and publishes them."""
        data = np.ascontiguousarray(items, dtype=self.dtype).ravel()
        if len(data) == 0:
            return
        slots = self.reserve(len(data))
        slots[:] = data
        del slots
        self.commit(len(data))


class Edge:
    """A queue between two ports of a ``Graph``."""

    def __init__(self, index: int, dtype: np.dtype) -> None:
        self.index = index
        self.dtype = dtype


class Graph:
    """A Kahn process network on dmaflow's mirrored queues: Python functions
    as nodes (each on its own thread; the GIL is held only while Python code
    runs) beside dmaflow's built-in nodes (``fir``). Queues grow when the
    network would otherwise deadlock on a full one (bounded scheduling)."""

    def __init__(self) -> None:
        self._native = _NativeGraph()

    def connect(self, source: tuple[str, str], target: tuple[str, str], dtype="f4", capacity: int = 16384) -> Edge:
        """A queue from ``source`` = (node, port) to ``target`` of at least
        ``capacity`` items of ``dtype`` (1, 2, 4 or 8 bytes)."""
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise TypeError(f"a queue cannot hold Python objects (dtype {dt})")
        return Edge(self._native.connect(tuple(source), tuple(target), int(capacity), dt.itemsize), dt)

    def node(self, name: str, body, inputs=(), outputs=()) -> None:
        """Adds node ``name``: ``body(*input_ports, *output_ports)`` runs on its
        own thread; its ports close when it returns; an exception stops the
        graph and ``run`` raises it. Once every reader of an output has
        finished, writing to it raises ``QueueClosed``: a node that lets that
        propagate has ended normally (the ``head`` idiom of SDR flowgraphs)."""
        ins, outs = list(inputs), list(outputs)

        def call(native_ins, native_outs):
            body(
                *(InputPort(p, e.dtype) for p, e in zip(native_ins, ins)),
                *(OutputPort(p, e.dtype) for p, e in zip(native_outs, outs)),
            )

        self._native.python_node(name, call, [e.index for e in ins], [e.index for e in outs])

    def fir(self, name: str, taps, input: Edge, output: Edge) -> None:
        """dmaflow's overlap-save FIR filter as node ``name`` (float32 edges):
        one output sample per input sample, zero initial state, windows read
        in place from the input queue, never copied."""
        self._native.fir_node(name, [float(t) for t in np.asarray(taps, dtype=np.float32).ravel()], input.index, output.index)

    def run(self) -> None:
        """Runs every node to its end; raises the first node's error."""
        self._native.run()


class Transfer:
    """A two-way transfer in flight (``Engine.begin``): it owns both buffers
    until ``wait()`` collects it, or, after a timeout or an engine error, until
    the engine is confirmed halted (a buffer it could not be halted over is
    given up to it for good: ``lost``)."""

    def __init__(self, board: Board, index: int, tx: PynqBuffer, rx: PynqBuffer) -> None:
        t, r = Engine._whole(tx, "tx"), Engine._whole(rx, "rx")
        self._send = board.channel("mm2s", index)
        self._recv = board.channel("s2mm", index)
        self._recv.transfer(r)
        try:
            self._send.transfer(t)
        except BaseException:
            # The receive side is in flight alone: collect it (it times out
            # and halts the engine) before the error goes on.
            try:
                self._recv.wait()
            except (DmaError, DmaTimeoutError):
                pass
            raise
        self._done = False

    def wait(self) -> int:
        """Waits for both directions (at most the board's timeout each, the
        GIL released); returns the bytes received."""
        if self._done:
            raise RuntimeError("the transfer was collected already")
        self._done = True
        try:
            self._send.wait()
        finally:
            received = self._recv.wait()
        return received

