# `dmaflow bench remote`'s client, run by it as `python -c` with its setup in
# DMAFLOW_BENCH_REMOTE: builds the points that are installed (PYNQ's client
# against `dmaflow serve`, and against a minimal PYNQ.remote server written in
# Python with grpcio, started here on the address the setup names; dmaflow.pynq
# in process), measures them in turns, and prints one JSON line of samples.
import json, os, sys, time
from concurrent import futures
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

def minimal_server(ip):
    """PYNQ.remote's device and MMIO services in Python, answering from a dict:
    what any server's MMIO round trip costs at least through Python's gRPC."""
    import grpc
    from pynq.remote import (
        mmio_pb2,
        mmio_pb2_grpc,
        remote_device_pb2,
        remote_device_pb2_grpc,
    )

    class Device(remote_device_pb2_grpc.RemoteDeviceServicer):
        def existsfile(self, request, context):
            return remote_device_pb2.ExistsFileResponse(exists=True)

        def readfile(self, request, context):
            yield remote_device_pb2.ReadFileResponse(data=b"Linux aarch64\0")

    class Mmio(mmio_pb2_grpc.MmioServicer):
        regs = {}

        def get_mmio(self, request, context):
            return mmio_pb2.GetMmioResponse(status=True, mmio_id="0")

        def read(self, request, context):
            return mmio_pb2.ReadResponse(status=True, data=self.regs.get(request.offset, 0))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    remote_device_pb2_grpc.add_RemoteDeviceServicer_to_server(Device(), server)
    mmio_pb2_grpc.add_MmioServicer_to_server(Mmio(), server)
    if server.add_insecure_port(ip) == 0:
        raise OSError(f"cannot listen on {ip}")
    server.start()
    return server

points = {}
checks = {}
py_server = None
try:
    py_server = minimal_server(cfg["minimal"])
except Exception as e:
    out["notes"]["minimal"] = f"the minimal Python server: {type(e).__name__}: {e}"
    # PYNQ is then told of the served board only.
    os.environ["PYNQ_REMOTE_DEVICES"] = os.environ["PYNQ_REMOTE_DEVICES"].split(",")[0]
try:
    import pynq
    from pynq import MMIO, Device, Overlay
    out["pynq"] = pynq.__version__
    # PYNQ probes every device in PYNQ_REMOTE_DEVICES when first asked: the
    # served board first, then the minimal server if it started.
    served = Device.devices[0]
    Device.active_device = served
    ol = Overlay(cfg["bit"], device=served)
    dma = ol.axi_dma_0
    tx = pynq.allocate(shape=(n,), dtype=np.uint8, target=served)
    rx = pynq.allocate(shape=(n,), dtype=np.uint8, target=served)
    tx[:] = data
    m = MMIO(cfg["base"], 0x10000, device=served)
    points["mmio_read|remote"] = (lambda: m.read(0x04), cfg["mmio_reads"], True)
    points["loopback|remote"] = (cell(dma, tx, rx), cfg["loopbacks"], True)
    checks["loopback|remote"] = rx
    if py_server is not None:
        mm = MMIO(cfg["base"], 0x10000, device=Device.devices[1])
        points["mmio_read|minimal"] = (lambda: mm.read(0x04), cfg["mmio_reads"], False)
except Exception as e:
    out["notes"]["remote"] = f"PYNQ 4.0's client: {type(e).__name__}: {e}"
    out["notes"].setdefault("minimal", out["notes"]["remote"])
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
if py_server is not None:
    py_server.stop(0)
print(json.dumps(out))
