"""Buffers: numpy arrays over DMA memory, in place, with PYNQ's attributes."""

import gc

import numpy as np
import pytest

import dmaflow
from dmaflow import Board, PynqBuffer, allocate


def test_shapes_dtypes_and_addresses():
    board = Board("loopback")
    lo, size = board.memory_range
    for shape, dtype in [(5, "u4"), ((3, 4), np.int16), ((2, 3, 5), np.float64), (1, "u1")]:
        a = allocate(shape, dtype=dtype, board=board)
        assert isinstance(a, PynqBuffer)
        assert a.shape == ((shape,) if isinstance(shape, int) else shape)
        assert a.dtype == np.dtype(dtype)
        assert a.flags["C_CONTIGUOUS"] and a.flags["WRITEABLE"]
        assert lo <= a.physical_address < lo + size
        assert a.physical_address % 4096 == 0, "whole pages"
        assert a.device_address == a.physical_address
        assert a.coherent and not a.cacheable  # PYNQ: cacheable = not coherent


def test_an_array_is_the_buffer_itself_not_a_copy():
    board = Board("loopback")
    a = allocate(1024, dtype="u1", board=board)
    a[:] = 7
    # The bytes the buffer protocol hands out are the array's.
    view = memoryview(a._native)
    assert view.nbytes == 1024 and view[0] == 7
    view[3] = 9
    assert a[3] == 9
    # A slice is a view, with its own physical address.
    s = a[100:200]
    assert s.physical_address == a.physical_address + 100
    s[:] = 1
    assert (a[100:200] == 1).all()


def test_views_outlive_close_with_their_bytes():
    board = Board("loopback")
    a = allocate(4096, dtype="u1", board=board)
    a[:] = 5
    tail = a[2048:]
    native = a._native
    del a
    gc.collect()
    assert (tail == 5).all(), "the slice still views the buffer"
    tail.freebuffer()
    assert native.closed
    # Closed: no new views, no transfers; the existing one still reads.
    with pytest.raises(BufferError):
        memoryview(native)
    assert (tail == 5).all()


def test_context_manager_and_close_while_the_device_owns_it():
    board = Board("loopback")
    send, recv = board.channel("mm2s"), board.channel("s2mm")
    with allocate(256, dtype="u1", board=board) as a, allocate(256, dtype="u1", board=board) as b:
        a[:] = 3
        recv.transfer(b._native)
        with pytest.raises(RuntimeError, match="in use by a transfer"):
            b.freebuffer()
        send.transfer(a._native)
        send.wait()
        recv.wait()
        assert (b == 3).all()
    assert a._native.closed and b._native.closed


def test_bad_requests_are_python_errors():
    board = Board("loopback")
    with pytest.raises(TypeError, match="Python objects"):
        allocate(4, dtype=object, board=board)
    with pytest.raises(ValueError, match="zero bytes"):
        allocate(0, board=board)
    with pytest.raises(ValueError, match="negative"):
        allocate((-1, 4), board=board)
    with pytest.raises(MemoryError):
        allocate(1 << 30, dtype="u1", board=board)
    with pytest.raises(ValueError, match="no design"):
        Board("nonesuch")
    with pytest.raises(ValueError, match="memory must be"):
        Board("loopback", memory="sometimes")


def test_the_default_board_is_the_last_overlay_s():
    from dmaflow.pynq import Overlay

    ol = Overlay("loopback-sg")
    a = dmaflow.pynq.allocate(16)
    assert a._native.physical_address >= ol.board.memory_range[0]
    assert dmaflow.default_board() is ol.board


def test_engine_two_way_in_every_completion_mode():
    board = Board("loopback", memory="noncoherent")
    e = dmaflow.Engine(board)
    a = allocate(3000, dtype="u1", board=board)
    b = allocate(3000, dtype="u1", board=board)
    a[:] = np.arange(3000) % 256
    for c in ["poll", "yield", "irq", "adaptive"]:
        b[:] = 0
        assert e.two_way(a, b, c) == 3000
        assert np.array_equal(a, b), c
    with pytest.raises(ValueError, match="completion"):
        e.two_way(a, b, "sometimes")
    with pytest.raises(ValueError, match="whole buffer"):
        e.two_way(a[1:], b)
    with pytest.raises(ValueError, match="differ"):
        e._native.two_way(a._native, a._native)


def test_the_python_layer_measurement_returns_every_call_and_moves_the_data():
    from dmaflow import bench

    board = Board("loopback")
    e = dmaflow.Engine(board)
    a = allocate(4096, dtype="u1", board=board)
    b = allocate(4096, dtype="u1", board=board)
    a[:] = np.arange(4096) % 251
    for through in bench.THROUGH:
        b[:] = 0
        times, cpu = bench.two_ways(e, a, b, 5, "poll", through)
        assert len(times) == 5 and all(t > 0 for t in times), through
        assert cpu >= 0
        assert np.array_equal(a, b), through
    with pytest.raises(ValueError, match="through"):
        bench.two_ways(e, a, b, 1, "poll", "c")
    with pytest.raises(ValueError, match="count"):
        bench.two_ways(e, a, b, 0)


def test_owned_transfers_begin_and_wait():
    board = Board("loopback-sg")
    e = dmaflow.Engine(board)
    a = allocate(5000, dtype="u1", board=board)
    b = allocate(5000, dtype="u1", board=board)
    a[:] = np.arange(5000) % 253
    t = e.begin(a, b)
    with pytest.raises(RuntimeError, match="in use by a transfer"):
        b.freebuffer()
    assert t.wait() == 5000
    assert np.array_equal(a, b)
    with pytest.raises(RuntimeError, match="collected already"):
        t.wait()
    b.freebuffer()


def test_a_packet_ring_holds_its_engine_until_closed():
    board = Board("loopback-sg", memory="noncoherent")
    ring = board.packet_ring(slots=8, slot_bytes=1500, batch=3, completion="poll")
    rng = np.random.default_rng(5)
    packets = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 1500, 50)]
    for p in packets:
        ring.send(p)
        assert ring.recv() == p
    # Longer than a buffer: named, the ring goes on.
    with pytest.raises(ValueError):
        ring.send(b"x" * 1501)
    # The engine is the ring's: channels and transfers are refused, not blocked.
    with pytest.raises(RuntimeError, match="packet ring"):
        board.channel("mm2s").transfer(allocate(16, board=board)._native)
    with pytest.raises(RuntimeError, match="packet ring"):
        board.packet_ring()
    ring.close()
    with pytest.raises(RuntimeError, match="closed"):
        ring.send(b"1")
    # The engine is free again, for a transfer through its channels.
    a = allocate(64, dtype="u1", board=board)
    b = allocate(64, dtype="u1", board=board)
    a[:] = 9
    assert dmaflow.Engine(board).begin(a, b).wait() == 64 and (b == 9).all()
    # Direct register mode does not exist on a scatter-gather engine (PG021).
    with pytest.raises(dmaflow.DmaError, match="no direct register mode"):
        dmaflow.Engine(board).two_way(a, b)
    with pytest.raises(ValueError, match="scatter-gather"):
        Board("loopback").packet_ring()


def test_a_buffer_never_shows_its_previous_owners_bytes():
    # PYNQ's scatter-gather driver relies on fresh DMA memory being zero (it
    # never writes a descriptor's status word).
    board = Board("loopback")
    a = allocate(4096, dtype="u4", board=board)
    a[:] = 0xDEADBEEF
    a.freebuffer()
    del a
    gc.collect()
    b = allocate(4096, dtype="u4", board=board)
    assert not b.any()


def test_freebuffer_and_with_give_the_memory_back_at_the_call():
    # PYNQ notebooks allocate in a loop, in `with` blocks or with
    # freebuffer(), more than the pool holds in total.
    board = Board("loopback")
    _, size = board.memory_range
    n = size * 6 // 10
    for i in range(3):
        with allocate(n, dtype="u1", board=board) as buf:
            buf[:] = i
            assert buf[-1] == i
    for i in range(3):
        buf = allocate(n, dtype="u1", board=board)
        buf[:1] = i
        buf.freebuffer()
    # The array still holds its bytes after freebuffer (a private copy) ...
    old = allocate(n, dtype="u1", board=board)
    old[:] = 5
    old_address = old.physical_address
    tail = old[-4096:]
    old.freebuffer()
    # ... the memory has a new owner at once ...
    new = allocate(n, dtype="u1", board=board)
    assert new.physical_address == old_address
    new[:] = 9
    send, recv = board.channel("mm2s"), board.channel("s2mm")
    src = allocate(4096, dtype="u1", board=board)
    src[:] = 7
    recv.transfer(new._native, n - 4096, 4096)
    send.transfer(src._native)
    send.wait()
    recv.wait()
    assert (new[-4096:] == 7).all()
    # ... and the old arrays never show it, by the CPU or by the device.
    assert (old == 5).all() and (tail == 5).all()
    old[:3] = 1  # still writable, private
    assert (new[:3] == 9).all()
    # A closed buffer is refused by a transfer.
    with pytest.raises(ValueError, match="closed"):
        send.transfer(old._native)
