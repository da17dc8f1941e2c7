"""One end of a GNU Radio ZeroMQ edge for `dmaflow bench net`, lean: each end
does what a dmaflow end does and nothing more. Run with Debian's python3.

  tx SIZE DATA ENDPOINT NBYTES
      file_source (the first NBYTES of the file DATA as SIZE-byte items, no
      repeat: read() into
      its buffer, no byte-by-byte copy) -> push_sink bound at ENDPOINT (high
      water mark 16, as dmaflow's; poll timeout 1 ms, see TIMEOUT_MS). Prints
      "sent" once the flowgraph has handed every item to ZeroMQ, then keeps
      its socket open until its standard input closes (ZeroMQ may still be
      sending).

  rx SIZE NBYTES ENDPOINT OUT DATA
      pull_source connected to ENDPOINT -> file_sink writing OUT (every byte
      written once), until NBYTES have arrived; then OUT is compared byte for
      byte with the first NBYTES of DATA. Prints the seconds from the first
      item the sink took to the last (the count is looked at every 0.5 ms),
      the process's CPU seconds over the same span, the items and 1 if the
      data was right (else 0).

Exits non-zero on any error.
"""

import sys
import time

import numpy as np
from gnuradio import blocks, gr, zeromq

# The blocks' poll timeout. gr-zeromq's default is 100 ms; with it, some runs
# of GNU Radio into GNU Radio at 64 B items stalled about one timeout (100 ms
# in a 20 ms transfer), and with 10 ms about 10-20 ms: 1 ms keeps that stall
# out of GNU Radio's figures (it favours GNU Radio).
TIMEOUT_MS = 1
HWM = 16


def tx(size: int, data: str, at: str, nbytes: int) -> None:
    tb = gr.top_block()
    src = blocks.file_source(size, data, False, 0, nbytes // size)
    tb.connect(src, zeromq.push_sink(1, size, at, TIMEOUT_MS, False, HWM))
    tb.start()
    tb.wait()
    print("sent", flush=True)
    sys.stdin.read()


def rx(size: int, nbytes: int, at: str, out: str, data: str) -> None:
    n = nbytes // size
    tb = gr.top_block()
    sink = blocks.file_sink(size, out, False)
    sink.set_unbuffered(False)
    tb.connect(zeromq.pull_source(1, size, at, TIMEOUT_MS, False, HWM), sink)
    tb.start()
    while sink.nitems_read(0) == 0:
        time.sleep(0.0005)
    t0, cpu0 = time.perf_counter(), time.process_time()
    while sink.nitems_read(0) < n:
        time.sleep(0.0005)
    t1, cpu1 = time.perf_counter(), time.process_time()
    got = sink.nitems_read(0)
    tb.stop()
    tb.wait()
    sink.close()
    a = np.memmap(out, dtype=np.uint8, mode="r")
    b = np.memmap(data, dtype=np.uint8, mode="r")
    ok = len(a) >= nbytes and np.array_equal(a[:nbytes], b[:nbytes])
    print(t1 - t0, cpu1 - cpu0, got, int(ok), flush=True)


if sys.argv[1] == "tx":
    tx(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
else:
    rx(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
