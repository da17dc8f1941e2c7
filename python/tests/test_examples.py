"""The examples run as they are."""

import pathlib
import runpy

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_pynq_dma_example_runs(capsys):
    runpy.run_path(str(EXAMPLES / "pynq_dma.py"), run_name="__main__")
    assert "received: [0 1 2 3 4]" in capsys.readouterr().out


def test_fir_pipeline_example_runs(capsys):
    runpy.run_path(str(EXAMPLES / "fir_pipeline.py"), run_name="__main__")
    assert "through the FIR core" in capsys.readouterr().out
