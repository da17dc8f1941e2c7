#!/usr/bin/env bash
# Installs PYNQ 4.0 from PyPI, as a PYNQ user on a PC installs it, into a
# virtual environment of its own (target/pynq-venv): the client that
# `dmaflow serve`'s tests drive the server with. PYNQ 4.0 needs numpy < 2;
# grpcio is pinned to the version its generated stubs were made with.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pynq-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import pynq, pytest, grpc' 2>/dev/null; then
  "$venv/bin/pip" install -q pynq==4.0.0 'numpy<2' grpcio==1.64.0 pytest
fi
"$venv/bin/python" -c 'import pynq; print("PYNQ", pynq.__version__, "in", "'"$venv"'")'
