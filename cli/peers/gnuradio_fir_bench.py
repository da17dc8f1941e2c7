"""GNU Radio's FIR filter for `dmaflow bench fir`: file source -> fft_filter_fff
(one thread) -> null sink (or, with OUT, a file sink whose file dmaflow checks
against its reference) over the same samples and taps.

Usage: SIGNAL TAPS [OUT] (files of little-endian f32). fft_filter_fff picks its
FFT length itself (twice the taps rounded up to a power of two); taps padded
with zeros give a longer one and the same output.

Prints one line: the seconds of `tb.run()` (the flowgraph's buffers made, its
threads started, run to the end and joined; the blocks and the filter's FFT
plans are made before), the process's CPU seconds over the same span, the
items the sink took and the filter's FFT length. Exits non-zero on any error.
"""

import sys
import time

import numpy as np
from gnuradio import blocks, filter as grfilter, gr

signal, taps = sys.argv[1], np.fromfile(sys.argv[2], dtype="<f4")
out = sys.argv[3] if len(sys.argv) > 3 else None
tb = gr.top_block()
src = blocks.file_source(gr.sizeof_float, signal, False)
fir = grfilter.fft_filter_fff(1, taps.tolist(), 1)
if out is None:
    sink = blocks.null_sink(gr.sizeof_float)
else:
    sink = blocks.file_sink(gr.sizeof_float, out, False)
    sink.set_unbuffered(False)
tb.connect(src, fir, sink)
cpu0, t0 = time.process_time(), time.perf_counter()
tb.run()
t1, cpu1 = time.perf_counter(), time.process_time()
if out is not None:
    sink.close()
# The filter's FFT length: it takes output in multiples of its hop, and the hop
# is the FFT length less the taps plus one.
fft_len = fir.output_multiple() + len(taps) - 1
print(
    t1 - t0,
    cpu1 - cpu0,
    sink.nitems_read(0),
    fft_len,
)
