"""The remote path measured: PYNQ 4.0's own client (MMIO, and a 4 MiB
loopback through its own DMA driver) against `dmaflow serve`, beside the
same through `dmaflow.pynq` in this process, and PYNQ's MMIO against a
minimal PYNQ.remote server written in Python with grpcio (PYNQ's generated
servicers, answering from a dict: what any server's MMIO round trip costs
at least through Python's gRPC client). The points take turns round by
round; medians over rounds, with the rounds' spread (min..max of the
rounds' medians).

Run by scripts/pynq-remote-bench.sh (PYNQ 4.0 and dmaflow installed in
target/pynq-venv)."""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DMAFLOW = Path(os.environ.get("DMAFLOW_BIN", ROOT / "target/release/dmaflow"))
ROUNDS = int(os.environ.get("ROUNDS", "7"))
MMIO_READS = 200
LOOPBACK_BYTES = 4 << 20
LOOPBACKS = 3


def loopback_ip():
    return "127.%d.%d.%d" % (
        random.randint(1, 254),
        random.randint(1, 254),
        random.randint(2, 254),
    )


def minimal_server(ip):
    """PYNQ.remote's device and MMIO services in Python, minimal."""
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
    server.add_insecure_port(f"{ip}:7967")
    server.start()
    return server


def timed(f, n):
    """Median seconds of `n` calls of f."""
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def main():
    served_ip, minimal_ip = loopback_ip(), loopback_ip()
    # PYNQ probes its devices when first asked for them, after both servers
    # are up.
    os.environ["PYNQ_REMOTE_DEVICES"] = f"{served_ip},{minimal_ip}"
    serve = subprocess.Popen(
        [str(DMAFLOW), "serve", "--listen", f"{served_ip}:7967"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert "PYNQ.remote on" in serve.stdout.readline()
    py_server = minimal_server(minimal_ip)
    tmp = Path(tempfile.mkdtemp())
    subprocess.run([str(DMAFLOW), "overlay", "export", "loopback", str(tmp)], check=True, capture_output=True)
    try:
        import pynq
        from pynq import MMIO, Device, Overlay

        import dmaflow.pynq as dp

        served, minimal = Device.devices[0], Device.devices[1]
        Device.active_device = served
        ol = Overlay(str(tmp / "loopback.bit"), device=served)
        dma = ol.axi_dma_0
        tx = pynq.allocate(shape=(LOOPBACK_BYTES,), dtype=np.uint8, target=served)
        rx = pynq.allocate(shape=(LOOPBACK_BYTES,), dtype=np.uint8, target=served)
        data = np.random.default_rng(1).integers(0, 256, LOOPBACK_BYTES, dtype=np.uint8)
        tx[:] = data

        dol = dp.Overlay("loopback")
        ddma = dol.axi_dma_0
        dtx = dp.allocate(shape=(LOOPBACK_BYTES,), dtype=np.uint8)
        drx = dp.allocate(shape=(LOOPBACK_BYTES,), dtype=np.uint8)
        dtx[:] = data

        m_served = MMIO(0x40400000, 0x10000, device=served)
        m_minimal = MMIO(0x40400000, 0x10000, device=minimal)
        m_local = dp.MMIO(0x40400000, 0x10000)

        def cell(d, a, b):
            def run():
                d.sendchannel.transfer(a)
                d.recvchannel.transfer(b)
                d.sendchannel.wait()
                d.recvchannel.wait()

            return run

        points = {
            ("mmio_read", "pynq-remote/dmaflow-serve"): (lambda: m_served.read(0x04), MMIO_READS),
            ("mmio_read", "pynq-remote/python-minimal"): (lambda: m_minimal.read(0x04), MMIO_READS),
            ("mmio_read", "dmaflow.pynq-in-process"): (lambda: m_local.read(0x04), MMIO_READS),
            ("loopback_4MiB", "pynq-remote/dmaflow-serve"): (cell(dma, tx, rx), LOOPBACKS),
            ("loopback_4MiB", "dmaflow.pynq-in-process"): (cell(ddma, dtx, drx), LOOPBACKS),
        }
        rounds = {k: [] for k in points}
        for r in range(ROUNDS):
            order = list(points)
            if r % 2:
                order.reverse()
            for k in order:
                f, n = points[k]
                rounds[k].append(timed(f, n))
        assert (np.asarray(rx) == data).all(), "remote loopback data differs"
        assert (np.asarray(drx) == data).all(), "in-process loopback data differs"
        rows = []
        for (what, point), ts in rounds.items():
            med = statistics.median(ts)
            rows.append(
                {
                    "what": what,
                    "point": point,
                    "median_us": round(med * 1e6, 1),
                    "round_min_us": round(min(ts) * 1e6, 1),
                    "round_max_us": round(max(ts) * 1e6, 1),
                    "rounds": len(ts),
                }
            )
        print(f"{'what':15} {'point':30} {'median_us':>10} {'rounds min..max':>22}")
        for row in rows:
            print(
                f"{row['what']:15} {row['point']:30} {row['median_us']:>10} "
                f"{row['round_min_us']:>10}..{row['round_max_us']:<10}"
            )

        def med(what, point):
            return next(r["median_us"] for r in rows if r["what"] == what and r["point"] == point)

        ratios = {
            "mmio dmaflow-serve / python-minimal": med("mmio_read", "pynq-remote/dmaflow-serve")
            / med("mmio_read", "pynq-remote/python-minimal"),
            "loopback remote / in-process": med("loopback_4MiB", "pynq-remote/dmaflow-serve")
            / med("loopback_4MiB", "dmaflow.pynq-in-process"),
        }
        for k, v in ratios.items():
            print(f"ratio {k}: {v:.2f}")
        if "--json" in sys.argv:
            print(json.dumps({"experiment": "pynq-remote", "rows": rows, "ratios": ratios}))
    finally:
        py_server.stop(0)
        serve.terminate()
        serve.wait(timeout=10)


if __name__ == "__main__":
    main()
