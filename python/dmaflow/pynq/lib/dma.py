"""PYNQ's ``pynq.lib.dma``: ``from pynq.lib.dma import DMA`` becomes
``from dmaflow.pynq.lib.dma import DMA``; ``DMA(ol.ip_dict["axi_dma_0"])``
drives that engine with dmaflow's driver."""

from .. import DMA

__all__ = ["DMA"]
