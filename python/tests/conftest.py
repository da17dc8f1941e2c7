"""Shared fixtures: a fresh emulated board per test."""

import os

import pytest

from dmaflow.pynq import Overlay


@pytest.fixture(params=["loopback", "loopback-sg"])
def overlay(request):
    """Each DMA design in turn (direct register mode, scatter-gather)."""
    return Overlay(request.param)


#: How much slower than native this machine runs the tests (the ARM tests run
#: under qemu-user with ``DMAFLOW_TIME_SCALE=10``): waits that bound how long
#: something may take scale by it, so a slow machine is never a failure and a
#: hang still is.
TIME_SCALE = float(os.environ.get("DMAFLOW_TIME_SCALE", "1"))


def scaled(seconds: float) -> float:
    """``seconds`` on this machine (see ``TIME_SCALE``)."""
    return seconds * TIME_SCALE
