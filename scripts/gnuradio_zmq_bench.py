"""GNU Radio's push_sink -> pull_source between two flowgraphs of one process
on this machine, for `dmaflow bench net`. Usage: SIZE BYTES PORT. Prints the
receiving flowgraph's seconds (from start to its last item) and the
process's CPU seconds meanwhile (both flowgraphs)."""

import os
import sys
import time

from gnuradio import blocks, gr, zeromq

size, nbytes, port = (int(a) for a in sys.argv[1:4])
n = nbytes // size
at = f"tcp://127.0.0.1:{port}"
tx, rx = gr.top_block(), gr.top_block()
src = blocks.vector_source_b([i & 0xFF for i in range(size)], True, size)
tx.connect(src, blocks.head(size, n), zeromq.push_sink(1, size, at, 100, False, 16))
done = blocks.head(size, n)
rx.connect(zeromq.pull_source(1, size, at, 100, False, 16), done, blocks.null_sink(size))
rx.start()
cpu0, t0 = os.times(), time.perf_counter()
tx.start()
# A flowgraph with a ZeroMQ source does not end by itself when its head is
# done: watch the count (every 0.2 ms) and stop it.
while done.nitems_written(0) < n:
    time.sleep(0.0002)
t1, cpu1 = time.perf_counter(), os.times()
for tb in (tx, rx):
    tb.stop()
    tb.wait()
print(t1 - t0, (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system))
