"""PYNQ's ``pynq.lib``: the drivers of the IP dmaflow drives."""

from .dma import DMA

__all__ = ["DMA"]
