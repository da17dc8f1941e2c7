#!/bin/sh
# GNU Radio 3.10's gr-zeromq blocks <-> dmaflow over ZeroMQ (see
# scripts/gnuradio_interop.py). Installs GNU Radio (Debian's package) when it
# is missing, unless --no-install is given: then it says it skipped.
set -eu
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c "import gnuradio.zeromq, scipy" 2>/dev/null; then
    if [ "${1:-}" = "--no-install" ]; then
        echo "gnuradio-interop: skipped: GNU Radio not installed"
        exit 0
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuradio python3-scipy >/dev/null
fi
cargo build --release -q -p dmaflow-cli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 scripts/gnuradio_interop.py "$PWD/target/release/dmaflow" "$work"
