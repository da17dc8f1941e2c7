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
