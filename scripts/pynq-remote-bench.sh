#!/usr/bin/env bash
# The PYNQ.remote path measured (scripts/pynq_remote_bench.py): PYNQ 4.0's
# MMIO round trip and a 4 MiB loopback through its own DMA driver against
# `dmaflow serve`, beside dmaflow.pynq in process and a minimal Python
# PYNQ.remote server, in one process, taking turns round by round.
# ROUNDS=N (default 7); --json adds a JSON document.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/pynq-remote-venv.sh
if ! target/pynq-venv/bin/python -c 'import dmaflow.pynq' 2>/dev/null; then
  CARGO_TARGET_DIR="$PWD/target" target/pynq-venv/bin/pip install -q ./python
fi
cargo build --release -q -p dmaflow-cli --bin dmaflow
DMAFLOW_BIN="$PWD/target/release/dmaflow" target/pynq-venv/bin/python scripts/pynq_remote_bench.py "$@"
