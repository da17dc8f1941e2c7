"""One measurement of what the Python layer costs, for ``dmaflow bench
python``: ``count`` two-way transfers through ``Engine.two_way`` from Python,
or the same transfers done by the Rust API in a Rust loop, on the same board
and buffers. The tool runs the rounds, takes the points in turns and keeps
the statistics; this module only times the calls and returns the raw
samples.
"""

from __future__ import annotations

import time

from . import Engine

#: The two ways a transfer is called: from Python, or in a Rust loop.
THROUGH = ("python", "rust")


def two_ways(engine: Engine, tx, rx, count: int, completion: str = "poll", through: str = "python"):
    """Does ``count`` two-way transfers of ``tx`` into ``rx`` through
    ``through`` (``"python"``: ``Engine.two_way`` called from Python;
    ``"rust"``: the Rust API in a Rust loop). Returns the seconds each
    transfer took, and the calling thread's CPU seconds for all of them."""
    if through not in THROUGH:
        raise ValueError(f"through must be one of {THROUGH}, not {through!r}")
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    cpu0 = time.thread_time()
    if through == "rust":
        times = engine._native._rust_loop(tx._native, rx._native, tx.nbytes, count, completion)
    else:
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            engine.two_way(tx, rx, completion)
            times.append(time.perf_counter() - t0)
    return times, time.thread_time() - cpu0
