#!/usr/bin/env bash
# PYNQ 4.0, unmodified, against `dmaflow serve`: installs PYNQ into its own
# virtual environment (scripts/pynq-remote-venv.sh), builds the tool, and
# runs remote/tests/pynq with pytest from that environment.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/pynq-remote-venv.sh
cargo build --release -q -p dmaflow-cli --bin dmaflow
DMAFLOW_BIN="$PWD/target/release/dmaflow" target/pynq-venv/bin/pytest -q remote/tests/pynq "$@"
