"""GNU Radio's FIR filter for `dmaflow bench fir`: file source -> fft_filter_fff
(one thread) -> null sink over the same samples and taps. Usage: SIGNAL TAPS
(files of little-endian f32). Prints the flowgraph's seconds."""

import sys
import time

import numpy as np
from gnuradio import blocks, filter as grfilter, gr

signal, taps = sys.argv[1], np.fromfile(sys.argv[2], dtype="<f4")
tb = gr.top_block()
src = blocks.file_source(gr.sizeof_float, signal, False)
fir = grfilter.fft_filter_fff(1, taps.tolist(), 1)
tb.connect(src, fir, blocks.null_sink(gr.sizeof_float))
t0 = time.perf_counter()
tb.run()
print(time.perf_counter() - t0)
