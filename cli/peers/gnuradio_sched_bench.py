"""GNU Radio's side of `dmaflow bench sched`: the pipes x stages flowgraph
of the SDR scheduler studies, PIPES parallel pipes, each
null_source -> head(SAMPLES) -> STAGES blocks -> null_sink, in one
top_block run by GNU Radio's default scheduler (one thread per block).

Usage: PIPES STAGES SAMPLES BLOCK [TAPS]
  BLOCK copy: blocks.copy (a memcpy per work call);
        fir:  filter.fir_filter_fff, time-domain, taps from TAPS;
        fft:  filter.fft_filter_fff, overlap-save with an FFT, taps from TAPS
  TAPS: a file of little-endian f32 taps.

Prints one JSON line: the seconds of `tb.run()` (buffers made, threads
started, run to the end and joined; the blocks are made before), the
process's CPU seconds over the same span, and the items each sink took.
Exits non-zero on any error.
"""

import json
import sys
import time

import numpy as np
from gnuradio import blocks, filter as grfilter, gr


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit("usage: PIPES STAGES SAMPLES copy|fir|fft [TAPS]")
    pipes, stages, samples = (int(a) for a in sys.argv[1:4])
    block = sys.argv[4]
    taps = None
    if block in ("fir", "fft"):
        if len(sys.argv) != 6:
            sys.exit(f"{block} needs a taps file")
        taps = np.fromfile(sys.argv[5], dtype="<f4").tolist()
    elif block != "copy":
        sys.exit(f"unknown block {block!r}: copy, fir or fft")

    def make():
        if block == "copy":
            return blocks.copy(gr.sizeof_float)
        if block == "fir":
            return grfilter.fir_filter_fff(1, taps)
        return grfilter.fft_filter_fff(1, taps, 1)

    tb = gr.top_block()
    sinks = []
    for _ in range(pipes):
        chain = [blocks.null_source(gr.sizeof_float), blocks.head(gr.sizeof_float, samples)]
        chain += [make() for _ in range(stages)]
        sink = blocks.null_sink(gr.sizeof_float)
        chain.append(sink)
        tb.connect(*chain)
        sinks.append(sink)
    cpu0, t0 = time.process_time(), time.perf_counter()
    tb.run()
    t1, cpu1 = time.perf_counter(), time.process_time()
    print(
        json.dumps(
            {
                "seconds": t1 - t0,
                "cpu_seconds": cpu1 - cpu0,
                "sink_items": [s.nitems_read(0) for s in sinks],
            }
        )
    )


main()
