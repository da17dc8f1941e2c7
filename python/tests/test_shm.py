"""The queue shared between processes: a writer here, readers in child
processes (attached by path or by an inherited descriptor), windows in place."""

import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from dmaflow import SharedQueueReader, SharedQueueWriter

ITEMS = 200_000


def shm_path(name: str) -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, f"dmaflow-pytest-{os.getpid()}-{name}")


def child(code: str, **kwargs) -> subprocess.Popen:
    """A Python child running ``code`` (dmaflow imported), stdout piped."""
    src = "import sys, os, numpy as np\nfrom dmaflow import SharedQueueReader\n" + textwrap.dedent(code)
    return subprocess.Popen(
        [sys.executable, "-c", src], stdout=subprocess.PIPE, text=True, **kwargs
    )


READ_ALL = """
total, count, ok = 0, 0, True
while True:
    w = r.peek(1, timeout=20)
    k = len(w)
    if k == 0:
        break
    ok &= bool(np.array_equal(w, np.arange(count, count + k, dtype=w.dtype)))
    total += int(w.sum())
    count += k
    del w
    r.consume(k)
print(count, total, ok)
"""


def write_sequence(w: SharedQueueWriter, batch: int) -> None:
    done = 0
    while done < ITEMS:
        k = min(batch, ITEMS - done)
        slots = w.reserve(k, timeout=20)
        slots[:] = np.arange(done, done + k, dtype=w.dtype)
        del slots
        w.commit(k)
        done += k


def expect_sequence(p: subprocess.Popen) -> None:
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    count, total, ok = out.split()
    assert int(count) == ITEMS and ok == "True", out
    assert int(total) == ITEMS * (ITEMS - 1) // 2


def test_a_child_reads_every_item_in_place_by_path():
    path = shm_path("path")
    w = SharedQueueWriter(4096, dtype="i8", path=path)
    p = child(f"r = SharedQueueReader('i8', path={path!r})\n" + READ_ALL)
    w.wait_for_readers(1, timeout=20)
    write_sequence(w, 1000)
    w.close()
    assert not os.path.exists(path), "the writer removes its file"
    expect_sequence(p)


def test_a_child_reads_through_an_inherited_descriptor():
    w = SharedQueueWriter(4096, dtype="f8")
    p = child(f"r = SharedQueueReader('f8', fd={w.fd})\n" + READ_ALL, pass_fds=[w.fd])
    w.wait_for_readers(1, timeout=20)
    write_sequence(w, 777)
    w.close()
    expect_sequence(p)


def test_windows_wrap_in_place_and_views_hold_their_slots():
    path = shm_path("wrap")
    w = SharedQueueWriter(1024, dtype="f4", path=path)
    r = SharedQueueReader("f4", path=path)
    cap = w.capacity
    w.write(np.zeros(cap - 3, dtype="f4"))
    r.consume(len(r.peek(cap - 3)))
    w.write(np.arange(10, dtype="f4"))
    window = r.peek(10)
    assert not window.flags.writeable
    assert list(window) == list(range(10)), "one contiguous array across the wrap"
    with pytest.raises(BufferError, match="still alive"):
        r.consume(10)
    del window
    r.consume(10)
    w.close()
    assert len(r.peek(1)) == 0, "the end of the stream"


def test_a_reader_that_dies_is_evicted_and_reported():
    path = shm_path("die")
    w = SharedQueueWriter(4096, dtype="u4", path=path, evict_after=30.0)
    p = child(
        f"r = SharedQueueReader('u4', path={path!r})\n"
        "print(int(r.peek(5, timeout=20)[0]), flush=True)\n"
        "os._exit(0)\n"
    )
    w.wait_for_readers(1, timeout=20)
    w.write(np.arange(100, dtype="u4"))
    assert p.stdout.readline().strip() == "0"
    p.wait(timeout=20)
    # Four queues' worth: the dead reader must not hold the writer back.
    for _ in range(4):
        w.write(np.ones(w.capacity, dtype="u4"), timeout=10)
    events = w.events()
    assert len(events) == 1 and events[0][3] == "process gone", events
    assert w.readers == 0
    w.close()


def test_bad_ends_are_named():
    path = shm_path("bad")
    w = SharedQueueWriter(100, dtype="f4", path=path)
    with pytest.raises(ValueError, match="4-byte items; this reader reads 8-byte"):
        SharedQueueReader("f8", path=path)
    with pytest.raises(ValueError, match="cannot open"):
        SharedQueueReader("f4", path=path + "-missing")
    with pytest.raises(ValueError, match="item size 3"):
        SharedQueueWriter(10, dtype="S3")
    with pytest.raises(ValueError, match="by path or by fd"):
        SharedQueueReader("f4")
    w.close()


def test_dmaflows_rust_reader_reads_what_python_writes():
    """The same queue from the other language: ``dmaflow shm-reader`` (the
    Rust reader behind ``bench ring``'s cross-process row) sums the bits of
    every f32 item this Python writer writes."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # DMAFLOW_EXE: the tool built for another machine (the ARM tests).
    exe = os.environ.get("DMAFLOW_EXE") or os.path.join(root, "target", "release", "dmaflow")
    if not os.path.exists(exe):
        pytest.skip("no target/release/dmaflow: run the README's test command (cargo test --release first)")
    path = shm_path("rust")
    w = SharedQueueWriter(4096, dtype="f4", path=path)
    p = subprocess.Popen([exe, "shm-reader", "--path", path], stdout=subprocess.PIPE, text=True)
    w.wait_for_readers(1, timeout=20)
    n = 100_000
    w.write(np.arange(n, dtype="u4").view("f4"))
    w.close()
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    fields = out.split()
    assert fields[0] == "sum" and int(fields[1]) == (n * (n - 1) // 2) % 2**32, out


def test_an_evicted_reader_learns_before_it_acts_that_its_window_may_be_torn():
    import threading

    w = SharedQueueWriter(1024, dtype="u4", evict_after=0.05)
    r = SharedQueueReader("u4", fd=w.fd)
    cap = w.capacity
    w.write(np.full(cap, 1, dtype=np.uint32))
    win = r.peek(cap)
    r.intact()  # fresh: the window is the reader's
    # The writer waits for room; the reader holds its window past evict_after.
    t = threading.Thread(target=lambda: w.write(np.full(cap, 2, dtype=np.uint32), timeout=20))
    t.start()
    t.join(20)
    assert not t.is_alive()
    assert len(w.events()) == 1, "the reader was evicted"
    seen = win.copy()  # what the window shows now: possibly the writer's 2s
    del win
    with pytest.raises(ValueError, match="evicted"):
        r.intact()
    assert set(np.unique(seen)) <= {1, 2}
    w.close()


def test_a_kept_writer_window_makes_no_view_after_close():
    w = SharedQueueWriter(1024, dtype="u4")
    a = w.reserve(4)
    obj = a
    while isinstance(obj, (np.ndarray, memoryview)):
        obj = obj.base if isinstance(obj, np.ndarray) else obj.obj
    del a
    w.close()
    with pytest.raises(BufferError, match="handed on"):
        np.frombuffer(obj, dtype=np.uint32)
