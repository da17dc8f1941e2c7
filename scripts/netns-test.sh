#!/bin/sh
# A dmaflow graph edge across a real network stack: two network namespaces
# joined by a veth pair (made and removed here), `dmaflow fir` in each, the
# first filtering a file and serving it over TCP, the second receiving it and
# filtering again; the result must equal the same two filters through files.
# Skipped, with a message, where namespaces cannot be created (not root, no
# iproute2, a container without the capability).
set -eu
cd "$(dirname "$0")/.."
dmaflow="$PWD/target/release/dmaflow"
a=dmaflow-a-$$
b=dmaflow-b-$$
if ! command -v ip >/dev/null 2>&1 || ! ip netns add "$a" 2>/dev/null; then
    echo "netns-test: skipped: network namespaces cannot be created here"
    exit 0
fi
work=$(mktemp -d)
cleanup() {
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$b" 2>/dev/null || ! ip link add "va$$" type veth peer name "vb$$" 2>/dev/null; then
    echo "netns-test: skipped: no veth pair can be made here"
    exit 0
fi
ip link set "va$$" netns "$a"
ip link set "vb$$" netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev "va$$"
ip -n "$b" addr add 10.77.0.2/24 dev "vb$$"
for n in "$a" "$b"; do
    ip -n "$n" link set lo up
done
ip -n "$a" link set "va$$" up
ip -n "$b" link set "vb$$" up
cargo build --release -q -p dmaflow-cli
# Samples and taps, little-endian f32, deterministic.
python3 - "$work" <<'PY'
import struct, sys, math
w = sys.argv[1]
x = [math.sin(i * 0.01) + 0.5 * math.cos(i * 0.37) for i in range(400_000)]
open(f"{w}/x.f32", "wb").write(struct.pack(f"<{len(x)}f", *x))
open(f"{w}/h1.f32", "wb").write(struct.pack("<3f", 0.5, -0.25, 0.125))
h2 = [math.sin(i * 0.3) for i in range(40)]
open(f"{w}/h2.f32", "wb").write(struct.pack(f"<{len(h2)}f", *h2))
PY
"$dmaflow" fir --taps "$work/h1.f32" --input "$work/x.f32" --output "$work/mid.f32"
"$dmaflow" fir --taps "$work/h2.f32" --input "$work/mid.f32" --output "$work/want.f32"
ip netns exec "$a" "$dmaflow" fir --taps "$work/h1.f32" --input "$work/x.f32" \
    --output tcp://10.77.0.1:5601 >/dev/null &
sender=$!
ip netns exec "$b" "$dmaflow" fir --taps "$work/h2.f32" --input tcp://10.77.0.1:5601 \
    --output "$work/got.f32"
wait "$sender"
cmp "$work/got.f32" "$work/want.f32"
echo "netns-test: ok: 400000 samples across a veth pair between two network namespaces, identical to the file path"
