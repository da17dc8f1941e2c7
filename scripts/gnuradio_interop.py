"""GNU Radio 3.10 <-> dmaflow over ZeroMQ, byte for byte.

Run by scripts/gnuradio-interop.sh with Debian's python3 (GNU Radio's Python
API). Usage: gnuradio_interop.py DMAFLOW_BINARY WORKDIR

Each case: a GNU Radio flowgraph sends samples to `dmaflow fir` over
ZeroMQ, dmaflow filters them and serves them to a second GNU Radio
flowgraph; the result is checked against scipy.signal.lfilter and against
GNU Radio's own fft_filter_fff on the same samples. With tag headers, the
tag GNU Radio sets on a sample arrives in dmaflow at that sample and goes
back out on the same filtered sample.
"""

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pmt
from gnuradio import blocks, filter as grfilter, gr, zeromq
from scipy.signal import lfilter

DMAFLOW, WORK = sys.argv[1], Path(sys.argv[2])
N = 200_003
rng = np.random.default_rng(7)
samples = rng.standard_normal(N).astype(np.float32)
taps = rng.standard_normal(31).astype(np.float32)
(WORK / "h.f32").write_bytes(taps.astype("<f4").tobytes())
reference = lfilter(taps.astype(np.float64), 1.0, samples.astype(np.float64))


def gnuradio_fft_filter() -> np.ndarray:
    tb = gr.top_block()
    src = blocks.vector_source_f(samples.tolist(), False)
    fir = grfilter.fft_filter_fff(1, taps.tolist())
    sink = blocks.vector_sink_f()
    tb.connect(src, fir, sink)
    tb.run()
    return np.array(sink.data(), dtype=np.float32)


def run_case(name: str, pattern: str, port: int, pass_tags: bool) -> None:
    a, b = f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"
    pub = pattern == "pub-sub"
    # The receiving flowgraph: GNU Radio's source connects to dmaflow's sink.
    rx = gr.top_block()
    if pub:
        gr_in = zeromq.sub_source(4, 1, b, 100, pass_tags)
    else:
        gr_in = zeromq.pull_source(4, 1, b, 100, pass_tags)
    got = blocks.vector_sink_f()
    rx.connect(gr_in, got)
    rx.start()
    cmd = [
        DMAFLOW, "fir", "--taps", str(WORK / "h.f32"), "--input", a, "--output", b,
        "--idle-timeout", "2", "--grace", "1", "--pattern", pattern,
    ]
    if pass_tags:
        cmd.append("--pass-tags")
    dmaflow = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The sending flowgraph: GNU Radio's sink binds, dmaflow's source connects.
    tx = gr.top_block()
    tags = [gr.tag_utils.python_to_tag((1000, pmt.intern("burst"), pmt.PMT_T, pmt.intern("gr")))]
    src = blocks.vector_source_f(samples.tolist(), False, 1, tags)
    if pub:
        # Subscribers join before anything is published (PUB drops otherwise):
        # the publisher binds, dmaflow's subscriber has a second to connect,
        # then the samples go at a steady rate.
        thr = blocks.throttle(4, 2_000_000)
        gr_out = zeromq.pub_sink(4, 1, a, 100, pass_tags)
        tx.connect(src, thr, gr_out)
        time.sleep(1.0)
    else:
        gr_out = zeromq.push_sink(4, 1, a, 100, pass_tags)
        tx.connect(src, gr_out)
    tx.start()
    out, err = dmaflow.communicate(timeout=60)
    tx.stop()
    tx.wait()
    time.sleep(0.5)
    rx.stop()
    rx.wait()
    if dmaflow.returncode != 0:
        raise SystemExit(f"{name}: dmaflow fir exited {dmaflow.returncode}: {err}")
    y = np.array(got.data(), dtype=np.float32)
    if len(y) != N:
        raise SystemExit(f"{name}: GNU Radio received {len(y)} samples, not {N}\n{out}")
    scale = np.max(np.abs(reference))
    err_ref = float(np.max(np.abs(y - reference)) / scale)
    # fft_filter_fff leaves out its last (taps - 1) / 2 outputs (it stops
    # where its next block would start): compare what it gives.
    err_gr = float(np.max(np.abs(y[: len(GR_FILTERED)] - GR_FILTERED)) / scale)
    if err_ref > 1e-5 or err_gr > 1e-5:
        raise SystemExit(f"{name}: off by {err_ref:.2e} (lfilter), {err_gr:.2e} (fft_filter_fff)")
    if pass_tags:
        # The tag GNU Radio set on sample 1000 reached dmaflow there and went
        # back out on the same filtered sample.
        back = [(t.offset, pmt.symbol_to_string(t.key), pmt.to_python(t.value)) for t in got.tags()]
        if back != [(1000, "burst", True)]:
            raise SystemExit(f"{name}: GNU Radio got tags {back}, not [(1000, 'burst', True)]\n{out}")
        if "received" not in out or "tags burst=#t@1000" not in out:
            raise SystemExit(f"{name}: dmaflow did not report the tag it received:\n{out}")
    print("   ", out.strip().replace("\n", "\n    "))
    print(
        f"ok {name}: {N} samples GNU Radio -> dmaflow fir -> GNU Radio; "
        f"max error {err_ref:.1e} vs scipy lfilter, {err_gr:.1e} vs GNU Radio fft_filter_fff"
    )


GR_FILTERED = gnuradio_fft_filter()
run_case("push/pull", "push-pull", 5601, False)
run_case("push/pull with tag headers", "push-pull", 5611, True)
run_case("pub/sub", "pub-sub", 5621, False)
