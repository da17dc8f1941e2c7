# `dmaflow bench python`'s peer, run by it as `python -c`: opens an emulated
# loopback board through dmaflow's Python package, says it is ready (one JSON
# line), then answers each request line {"through", "bytes", "count",
# "completion"} with one JSON line: the seconds of each two-way transfer, the
# calling thread's CPU seconds, and whether what came back equals what was
# sent. A size's buffers are made and warmed up on its first request.
import json, sys
try:
    import numpy as np
    from dmaflow import Board, Engine, allocate
    from dmaflow.bench import two_ways
    board = Board("loopback")
    engine = Engine(board)
except Exception as e:
    print(json.dumps({"error": f"dmaflow's Python package: {type(e).__name__}: {e}"}), flush=True)
    sys.exit(0)
print(json.dumps({"ready": True}), flush=True)
buffers = {}
for line in sys.stdin:
    try:
        req = json.loads(line)
        n = req["bytes"]
        if n not in buffers:
            tx = allocate(n, dtype="u1", board=board)
            rx = allocate(n, dtype="u1", board=board)
            tx[:] = np.arange(n, dtype=np.uint64).astype(np.uint8)
            # The first transfers of a size fault pages in and settle the
            # device thread.
            for through in ("rust", "python"):
                two_ways(engine, tx, rx, 10, req["completion"], through)
            buffers[n] = (tx, rx)
        tx, rx = buffers[n]
        rx[:] = 0
        times, cpu = two_ways(engine, tx, rx, req["count"], req["completion"], req["through"])
        out = {"times": times, "cpu": cpu, "equal": bool(np.array_equal(tx, rx))}
    except Exception as e:
        out = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)
