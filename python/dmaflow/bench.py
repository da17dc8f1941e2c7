"""What the Python layer costs: two-way transfers through ``Engine.two_way``
from Python against the same transfers done by the Rust API in a loop, in the
same process, on the same board and buffers, interleaved (the order swapped
every round). Per size: the median time per transfer of each, the difference
(median of the rounds' differences and its range over the rounds) and the
calling thread's CPU per transfer.

    python -m dmaflow.bench [--quick] [--json] [--completion poll|yield|irq]

A difference whose range over the rounds includes zero is reported as "no
measurable difference".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from . import Board, Engine, allocate

SIZES = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]


def _python_loop(engine: Engine, tx, rx, count: int, completion: str) -> tuple[list[float], float]:
    times = []
    cpu0 = time.thread_time()
    for _ in range(count):
        t0 = time.perf_counter()
        engine.two_way(tx, rx, completion)
        times.append(time.perf_counter() - t0)
    return times, (time.thread_time() - cpu0) / count


def _rust_loop(engine: Engine, tx, rx, count: int, completion: str) -> tuple[list[float], float]:
    cpu0 = time.thread_time()
    times = engine._native._rust_loop(tx._native, rx._native, tx.nbytes, count, completion)
    return times, (time.thread_time() - cpu0) / count


def measure(sizes=SIZES, rounds: int = 7, count: int = 200, completion: str = "poll") -> list[dict]:
    """Rows of the comparison, one per size."""
    board = Board("loopback")
    engine = Engine(board)
    rows = []
    for n in sizes:
        tx = allocate(n, dtype="u1", board=board)
        rx = allocate(n, dtype="u1", board=board)
        tx[:] = np.arange(n, dtype=np.uint64).astype(np.uint8)
        per = max(20, min(count, (64 << 20) // max(n, 1) // rounds))
        py_med, rs_med, diffs, py_cpu, rs_cpu = [], [], [], [], []
        # Warm-up: the first transfers of a size fault pages in and settle the
        # device thread.
        _rust_loop(engine, tx, rx, 10, completion)
        _python_loop(engine, tx, rx, 10, completion)
        for r in range(rounds):
            order = [_python_loop, _rust_loop] if r % 2 == 0 else [_rust_loop, _python_loop]
            got = {}
            for f in order:
                got[f] = f(engine, tx, rx, per, completion)
            p = statistics.median(got[_python_loop][0])
            q = statistics.median(got[_rust_loop][0])
            py_med.append(p)
            rs_med.append(q)
            diffs.append(p - q)
            py_cpu.append(got[_python_loop][1])
            rs_cpu.append(got[_rust_loop][1])
        if not np.array_equal(tx, rx):
            raise RuntimeError(f"{n} bytes: what came back differs from what was sent")
        lo, hi = min(diffs), max(diffs)
        rows.append(
            {
                "bytes": n,
                "completion": completion,
                "python_us": statistics.median(py_med) * 1e6,
                "rust_us": statistics.median(rs_med) * 1e6,
                "diff_us": statistics.median(diffs) * 1e6,
                "diff_min_us": lo * 1e6,
                "diff_max_us": hi * 1e6,
                "measurable": not (lo <= 0.0 <= hi),
                "python_cpu_us": statistics.median(py_cpu) * 1e6,
                "rust_cpu_us": statistics.median(rs_cpu) * 1e6,
                "rounds": rounds,
                "transfers_per_round": per,
            }
        )
        tx.freebuffer()
        rx.freebuffer()
    return rows


def render(rows: list[dict]) -> str:
    """The rows as a table, with the targets' verdicts."""
    out = [
        f"{'bytes':>8} {'python_us':>10} {'rust_us':>8} {'diff_us (range)':>24} "
        f"{'py_cpu_us':>9} {'rs_cpu_us':>9}  verdict"
    ]
    for r in rows:
        rng = f"{r['diff_us']:+.2f} ({r['diff_min_us']:+.2f}..{r['diff_max_us']:+.2f})"
        verdict = "measurable" if r["measurable"] else "no measurable difference"
        out.append(
            f"{r['bytes']:>8} {r['python_us']:>10.2f} {r['rust_us']:>8.2f} {rng:>24} "
            f"{r['python_cpu_us']:>9.2f} {r['rust_cpu_us']:>9.2f}  {verdict}"
        )
    small = next((r for r in rows if r["bytes"] == 64), None)
    if small is not None:
        met = small["diff_us"] < 2.0
        out.append(
            f"target: Python within 2 us of Rust per transfer at 64 B: "
            f"{small['diff_us']:+.2f} us ({'met' if met else 'missed'})"
        )
    large = [r for r in rows if r["bytes"] >= 65536]
    if large:
        met = all(not r["measurable"] or abs(r["diff_us"]) < 2.0 for r in large)
        out.append(
            "target: no measurable difference from 64 KiB up: "
            + ", ".join(
                f"{r['bytes'] // 1024} KiB {r['diff_us']:+.2f} us"
                + ("" if r["measurable"] else " (none measurable)")
                for r in large
            )
            + f" ({'met' if met else 'missed'})"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dmaflow.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and transfers")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--completion", default="poll", choices=["poll", "yield", "irq"])
    a = ap.parse_args(argv)
    rows = measure(
        rounds=3 if a.quick else 9,
        count=50 if a.quick else 400,
        completion=a.completion,
    )
    if a.json:
        print(json.dumps({"experiment": "python", "rows": rows}, indent=1))
    else:
        print(
            f"Python layer: Engine.two_way from Python vs the Rust API in a loop, same board, "
            f"interleaved, completion {a.completion}"
        )
        print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
