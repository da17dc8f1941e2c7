"""Process networks from Python: Python nodes beside dmaflow's FIR node."""

import numpy as np
import pytest

from dmaflow import Graph


def test_python_source_dmaflow_fir_python_sink():
    taps = (np.hanning(31) / np.hanning(31).sum()).astype(np.float32)
    x = np.sin(np.arange(100_000) * 0.003).astype(np.float32)
    g = Graph()
    a = g.connect(("source", "out"), ("fir", "in"), "f4", 8192)
    b = g.connect(("fir", "out"), ("sink", "in"), "f4", 8192)
    got = []

    def source(out):
        for i in range(0, len(x), 7000):
            out.write(x[i : i + 7000])

    def sink(inp):
        for chunk in inp:
            got.append(chunk)

    g.node("source", source, outputs=[a])
    g.fir("fir", taps, a, b)
    g.node("sink", sink, inputs=[b])
    g.run()
    y = np.concatenate(got)
    want = np.convolve(x, taps)[: len(x)]
    assert len(y) == len(x)
    assert np.max(np.abs(y - want)) < 1e-4


def test_windows_in_place_with_a_firing_threshold():
    g = Graph()
    e = g.connect(("src", "out"), ("avg", "in"), "u4", 1024)
    sums = []

    def src(out):
        for i in range(0, 10_000, 250):
            out.write(np.arange(i, i + 250, dtype=np.uint32))

    def avg(inp):
        # Windows of 8 items every 4: the overlap is looked at twice, never copied.
        while True:
            w = inp.peek(8)
            if len(w) < 8:
                break
            sums.append(int(w[:8].sum()))
            del w
            inp.consume(4)

    g.node("src", src, outputs=[e])
    g.node("avg", avg, inputs=[e])
    g.run()
    assert len(sums) == (10_000 - 8) // 4 + 1
    assert sums[0] == sum(range(8)) and sums[1] == sum(range(4, 12))


def test_a_failing_python_node_stops_the_graph_with_its_error():
    g = Graph()
    e = g.connect(("src", "out"), ("sink", "in"), "f4", 1024)

    def src(out):
        out.write(np.ones(10, dtype=np.float32))
        raise ValueError("the source broke (injected)")

    def sink(inp):
        for _ in inp:
            pass

    g.node("src", src, outputs=[e])
    g.node("sink", sink, inputs=[e])
    with pytest.raises(RuntimeError, match="the source broke"):
        g.run()


def test_views_must_go_before_their_slots_do_and_bad_graphs_are_named():
    g = Graph()
    e = g.connect(("src", "out"), ("sink", "in"), "u1", 64)
    seen = []

    def src(out):
        s = out.reserve(4)
        s[:] = [1, 2, 3, 4]
        with pytest.raises(BufferError, match="still alive"):
            out.commit(4)
        del s
        out.commit(4)

    def sink(inp):
        w = inp.peek(4)
        with pytest.raises(BufferError, match="still alive"):
            inp.consume(4)
        seen.extend(w)
        del w
        inp.consume(4)

    g.node("src", src, outputs=[e])
    g.node("sink", sink, inputs=[e])
    g.run()
    assert seen == [1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="run already"):
        g.run()
    h = Graph()
    with pytest.raises(ValueError, match="1, 2, 4 or 8"):
        h.connect(("a", "o"), ("b", "i"), "V3")
    f = h.connect(("a", "o"), ("b", "i"), "u1")
    with pytest.raises(ValueError, match="float32"):
        h.fir("b", [1.0], f, h.connect(("b", "o"), ("c", "i"), "u1"))


def _run_within(g, seconds=30.0):
    """Runs the graph on a thread; a graph that does not end in time fails
    the test instead of hanging it."""
    import threading

    box = {}

    def go():
        try:
            g.run()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the graph did not end within {seconds} s: it hangs"
    if "error" in box:
        raise box["error"]


def test_endless_sources_behind_finished_heads_end_the_graph():
    # The idiom of SDR flowgraphs: endless source -> head(N) -> sink, four
    # pipes. The head returns early; its source's next write raises
    # QueueClosed, which ends the source normally.
    from dmaflow import QueueClosed

    for _ in range(5):
        g = Graph()
        counts = {}
        closed = []
        for p in range(4):
            a = g.connect((f"src{p}", "out"), (f"head{p}", "in"), "u4", 1024)
            b = g.connect((f"head{p}", "out"), (f"sink{p}", "in"), "u4", 1024)

            def src(out, p=p):
                i = 0
                try:
                    while True:
                        out.write(np.arange(i, i + 300, dtype=np.uint32))
                        i += 300
                except QueueClosed:
                    closed.append(p)
                    raise

            def head(inp, out, limit=5000):
                left = limit
                while left > 0:
                    w = inp.peek(1)
                    if len(w) == 0:
                        return
                    k = min(len(w), left)
                    chunk = w[:k].copy()
                    del w
                    inp.consume(k)
                    out.write(chunk)
                    left -= k

            def sink(inp, p=p):
                n, ordered = 0, True
                for chunk in inp:
                    ordered &= bool(np.array_equal(chunk, np.arange(n, n + len(chunk), dtype=np.uint32)))
                    n += len(chunk)
                counts[p] = (n, ordered)

            g.node(f"src{p}", src, outputs=[a])
            g.node(f"head{p}", head, inputs=[a], outputs=[b])
            g.node(f"sink{p}", sink, inputs=[b])
        _run_within(g)
        assert counts == {p: (5000, True) for p in range(4)}
        assert sorted(closed) == [0, 1, 2, 3]


def test_a_node_that_raises_while_others_wait_ends_the_graph_with_its_error():
    g = Graph()
    a = g.connect(("src", "out"), ("mid", "in"), "u4", 1024)
    b = g.connect(("mid", "out"), ("sink", "in"), "u4", 1024)

    def src(out):
        while True:  # endless: only the failure can end it
            out.write(np.zeros(500, dtype=np.uint32))

    def mid(inp, out):
        inp.peek(10)
        raise KeyError("mid broke (injected)")

    def sink(inp):
        for _ in inp:
            pass

    g.node("src", src, outputs=[a])
    g.node("mid", mid, inputs=[a], outputs=[b])
    g.node("sink", sink, inputs=[b])
    with pytest.raises(RuntimeError, match="mid broke"):
        _run_within(g)


def test_a_view_kept_past_its_node_stays_readable_and_the_graph_ends():
    g = Graph()
    e = g.connect(("src", "out"), ("sink", "in"), "u4", 1024)
    kept = {}

    def src(out):
        out.write(np.arange(100, dtype=np.uint32))
        kept["reserved"] = out.reserve(8)  # a writable view kept

    def sink(inp):
        kept["window"] = inp.peek(100)  # returns without consuming or dropping

    g.node("src", src, outputs=[e])
    g.node("sink", sink, inputs=[e])
    _run_within(g)
    # The queue is gone from the graph, its memory is not: reading the kept
    # view is reading what it showed, never a fault.
    assert np.array_equal(kept["window"][:100], np.arange(100, dtype=np.uint32))
    kept["reserved"][:] = 7  # slots no reader will ever be shown
    del kept["window"], kept["reserved"]


def test_a_kept_window_object_makes_no_view_after_consume_or_close():
    g = Graph()
    e = g.connect(("src", "out"), ("sink", "in"), "u4", 1024)
    kept = {}
    errors = []

    def window_of(a):
        obj = a
        while isinstance(obj, (np.ndarray, memoryview)):
            obj = obj.base if isinstance(obj, np.ndarray) else obj.obj
        return obj

    def src(out):
        out.write(np.arange(2000, dtype=np.uint32))

    def sink(inp):
        a = inp.peek(10)
        win = window_of(a)
        del a
        inp.consume(10)
        try:
            np.frombuffer(win, dtype=np.uint32)
        except BufferError as err:
            errors.append(str(err))
        b = inp.peek(10)
        kept["window"] = window_of(b)
        del b
        for _ in inp:
            pass

    g.node("src", src, outputs=[e])
    g.node("sink", sink, inputs=[e])
    _run_within(g)
    assert len(errors) == 1 and "handed on" in errors[0]
    # After the node ended (its port closed), the kept window makes no view.
    with pytest.raises(BufferError, match="handed on"):
        np.frombuffer(kept["window"], dtype=np.uint32)
