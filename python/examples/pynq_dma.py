"""PYNQ's DMA tutorial cell on dmaflow's emulated board: only the import line
differs from a notebook on a Zynq (``from pynq import Overlay, allocate``)."""

import numpy as np

from dmaflow.pynq import MMIO, Overlay, allocate

ol = Overlay("loopback")
dma = ol.axi_dma_0

input_buffer = allocate(shape=(5,), dtype=np.uint32)
output_buffer = allocate(shape=(5,), dtype=np.uint32)
for i in range(5):
    input_buffer[i] = i

dma.sendchannel.transfer(input_buffer)
dma.recvchannel.transfer(output_buffer)
dma.sendchannel.wait()
dma.recvchannel.wait()

print("received:", output_buffer)
print("input at physical address", hex(input_buffer.physical_address))
mmio = MMIO(ol.ip_dict["axi_dma_0"]["phys_addr"], ol.ip_dict["axi_dma_0"]["addr_range"])
print("MM2S DMASR:", hex(mmio.read(0x04)))
assert list(output_buffer) == [0, 1, 2, 3, 4]

input_buffer.freebuffer()
output_buffer.freebuffer()
