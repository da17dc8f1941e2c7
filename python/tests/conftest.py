"""Shared fixtures: a fresh emulated board per test."""

import pytest

from dmaflow.pynq import Overlay


@pytest.fixture(params=["loopback", "loopback-sg"])
def overlay(request):
    """Each DMA design in turn (direct register mode, scatter-gather)."""
    return Overlay(request.param)
