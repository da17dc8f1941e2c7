"""The mirrored queue from Python: windows in place, across the wrap."""

import threading

import numpy as np
import pytest

from dmaflow import Queue


def test_windows_are_contiguous_across_the_wrap_and_in_place():
    q = Queue(1024, dtype="f4")
    cap = q.capacity
    assert cap >= 1024
    # Move the positions near the end, so the next window wraps.
    q.write(np.zeros(cap - 3, dtype="f4"))
    w = q.peek(cap - 3)
    del w
    q.consume(cap - 3)
    q.write(np.arange(10, dtype="f4"))
    window = q.peek(10)
    assert window.dtype == np.float32 and not window.flags.writeable
    assert list(window) == list(range(10)), "one contiguous array across the wrap"
    # A window larger than what it consumes: the rest stays (firing threshold).
    del window
    q.consume(4)
    assert list(q.peek(6)) == [4, 5, 6, 7, 8, 9]


def test_a_view_cannot_outlive_its_permission():
    q = Queue(256, dtype="i2")
    slots = q.reserve(4)
    slots[:] = [1, 2, 3, 4]
    with pytest.raises(BufferError, match="still alive"):
        q.commit(4)
    del slots
    q.commit(4)
    window = q.peek(4)
    with pytest.raises(BufferError, match="still alive"):
        q.consume(4)
    assert list(window) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="read-only"):
        window[0] = 9
    del window
    q.consume(4)


def test_waits_end_with_timeouts_or_the_end_of_the_stream():
    q = Queue(64, dtype="u1")
    with pytest.raises(TimeoutError, match="peek"):
        q.peek(1, timeout=0.01)
    q.write([1, 2, 3])
    q.close()
    assert list(q.peek(10)) == [1, 2, 3], "what is left, once the writer is closed"
    q.consume(3)
    assert len(q.peek(1)) == 0
    with pytest.raises(ValueError, match="cannot consume"):
        q.consume(1)
    with pytest.raises(ValueError, match="power of two"):
        Queue(10, dtype="V3")


def test_a_producer_and_a_consumer_thread():
    q = Queue(4096, dtype="u4")
    n = 200_000

    def produce():
        for start in range(0, n, 1000):
            q.write(np.arange(start, start + 1000, dtype="u4"), timeout=5)
        q.close()

    t = threading.Thread(target=produce)
    t.start()
    total, expect = 0, 0
    while True:
        w = q.peek(1, timeout=5)
        k = len(w)
        if k == 0:
            break
        assert w[0] == expect and w[-1] == expect + k - 1
        total += int(w.sum(dtype=np.uint64))
        expect += k
        del w
        q.consume(k)
    t.join()
    assert expect == n and total == n * (n - 1) // 2


def test_counts_too_large_for_a_number_are_errors():
    q = Queue(64, dtype="u4")
    for call in (q._native.commit, q._native.consume):
        with pytest.raises(ValueError, match="too many"):
            call(2**63)


def _window_of(a):
    """The window object behind an array (what any code can reach from it)."""
    obj = a
    while isinstance(obj, (np.ndarray, memoryview)):
        obj = obj.base if isinstance(obj, np.ndarray) else obj.obj
    return obj


def test_a_kept_window_makes_no_view_of_slots_that_changed_hands():
    from dmaflow import Queue

    q = Queue(1024, "u4")
    a = q.reserve(4)
    a[:] = [1, 2, 3, 4]
    w_win = _window_of(a)
    del a
    q.commit(4)
    # The reservation's window outlives the commit: no new (writable) view
    # of slots now published to the reader.
    with pytest.raises(BufferError, match="handed on"):
        np.frombuffer(w_win, dtype=np.uint32)
    r = q.peek(4)
    assert list(r) == [1, 2, 3, 4]
    r_win = _window_of(r)
    del r
    q.consume(4)
    with pytest.raises(BufferError, match="handed on"):
        np.frombuffer(r_win, dtype=np.uint32)
    # A fresh window is fine, and a live view still blocks the hand-over.
    b = q.reserve(2)
    with pytest.raises(BufferError, match="still alive"):
        q.commit(2)
    del b
    q.commit(2)
    q.close()
