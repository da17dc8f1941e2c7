# `dmaflow bench remote`'s client, run by it as `python -c` with its setup in
# DMAFLOW_BENCH_REMOTE: builds the points that are installed, measures them in
# turns, and prints one JSON line of samples.
import json, os, sys, time
import numpy as np
cfg = json.loads(os.environ["DMAFLOW_BENCH_REMOTE"])
out = {"notes": {}, "samples": {}, "verified": {}, "pynq": None}
n = cfg["bytes"]
data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)

def server_cpu():
    t = 0
    pid = cfg["server_pid"]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                t += int(f.read().split()[0])
        except OSError:
            pass
    return t / 1e9

def cell(d, a, b):
    def run():
        d.sendchannel.transfer(a)
        d.recvchannel.transfer(b)
        d.sendchannel.wait()
        d.recvchannel.wait()
    return run

points = {}
checks = {}
try:
    import pynq
    from pynq import MMIO, Overlay
    out["pynq"] = pynq.__version__
    ol = Overlay(cfg["bit"])
    dma = ol.axi_dma_0
    tx = pynq.allocate(shape=(n,), dtype=np.uint8)
    rx = pynq.allocate(shape=(n,), dtype=np.uint8)
    tx[:] = data
    m = MMIO(cfg["base"], 0x10000)
    points["mmio_read|remote"] = (lambda: m.read(0x04), cfg["mmio_reads"], True)
    points["loopback|remote"] = (cell(dma, tx, rx), cfg["loopbacks"], True)
    checks["loopback|remote"] = rx
except Exception as e:
    out["notes"]["remote"] = f"PYNQ 4.0's client: {type(e).__name__}: {e}"
try:
    import dmaflow.pynq as dp
    dol = dp.Overlay("loopback")
    ddma = dol.axi_dma_0
    dtx = dp.allocate(shape=(n,), dtype=np.uint8)
    drx = dp.allocate(shape=(n,), dtype=np.uint8)
    dtx[:] = data
    dm = dp.MMIO(cfg["base"], 0x10000)
    points["mmio_read|local"] = (lambda: dm.read(0x04), cfg["mmio_reads"], False)
    points["loopback|local"] = (cell(ddma, dtx, drx), cfg["loopbacks"], False)
    checks["loopback|local"] = drx
except Exception as e:
    out["notes"]["local"] = f"dmaflow.pynq: {type(e).__name__}: {e}"

samples = {k: {"us": [], "cpu_us": [], "server_cpu_us": []} for k in points}
for r in range(cfg["rounds"]):
    order = list(points)
    if r % 2:
        order.reverse()
    for k in order:
        f, ops, remote = points[k]
        s0 = server_cpu() if remote else 0.0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(ops):
            f()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        server = server_cpu() - s0 if remote else 0.0
        samples[k]["us"].append(wall / ops * 1e6)
        samples[k]["cpu_us"].append((cpu + server) / ops * 1e6)
        samples[k]["server_cpu_us"].append(server / ops * 1e6)
out["samples"] = samples
out["verified"] = {k: bool((np.asarray(b) == data).all()) for k, b in checks.items()}
print(json.dumps(out))
