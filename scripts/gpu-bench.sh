#!/usr/bin/env bash
# dmaflow's GPU experiment on a machine with an NVIDIA GPU.
#
#   scripts/gpu-bench.sh build     build the tool and the GPU tests here (needs
#                                  Rust) into .gpu/
#   scripts/gpu-bench.sh run [--quick]
#                                  on the GPU machine (needs no Rust): find the CUDA
#                                  driver and NVRTC, list the GPU, run the GPU tests
#                                  (tests/gpu.rs), run `dmaflow bench gpu` and
#                                  `dmaflow bench cnn` with `--device cuda:0`,
#                                  check that every transfer, kernel and layer
#                                  matched the CPU, and print the tables (report
#                                  under $OUT or report-gpu/)
#   scripts/gpu-bench.sh           both, on one machine that has Rust and a GPU
#
# The GPU machine has no Rust toolchain: build here, carry .gpu (ignored by git)
# and run `scripts/gpu-bench.sh run` there.
set -euo pipefail
cd "$(dirname "$0")/.."

build() {
    cargo build --release -p dmaflow-cli
    local tests
    tests=$(cargo test --release -p dmaflow --test gpu --no-run --message-format=json |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu":
        print(m["executable"])')
    mkdir -p .gpu
    # Without debug information: what travels is small.
    local src dst
    for pair in "target/release/dmaflow:.gpu/dmaflow" "$tests:.gpu/gpu-tests"; do
        src=${pair%%:*} dst=${pair#*:}
        objcopy --strip-debug "$src" "$dst" 2>/dev/null || cp "$src" "$dst"
    done
    ls -l .gpu
}

# Puts the directories holding libcuda and libnvrtc on the loader's path.
find_cuda() {
    local dirs=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu
        /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
    local d
    for d in /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib; do
        [ -d "$d" ] && dirs+=("$d")
    done
    # NVRTC from Python wheels (nvidia-cuda-nvrtc), where the toolkit has none.
    while IFS= read -r f; do
        dirs+=("$(dirname "$f")")
    done < <(find / -xdev -name 'libnvrtc.so*' -not -name '*builtins*' 2>/dev/null | head -5)
    local path=""
    for d in "${dirs[@]}"; do
        [ -d "$d" ] && path="${path:+$path:}$d"
    done
    export LD_LIBRARY_PATH="${path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

run() {
    local bin=.gpu/dmaflow
    [ -x "$bin" ] || bin=target/release/dmaflow
    [ -x "$bin" ] || { echo "no dmaflow binary: run '$0 build' first" >&2; exit 2; }
    find_cuda
    local out="${OUT:-report-gpu}"
    mkdir -p "$out"
    command -v nvidia-smi >/dev/null && nvidia-smi -L || true
    "$bin" info | grep -E '^(CUDA|sim)'
    set -o pipefail
    if [ -x .gpu/gpu-tests ]; then
        .gpu/gpu-tests --test-threads=1 2>&1 | tee "$out/gpu-tests.log"
    fi
    "$bin" bench gpu --device cuda:0 --out "$out" "$@" 2>&1 | tee "$out/gpu-bench.log"
    "$bin" bench cnn --device cuda:0 --out "$out" "$@" 2>&1 | tee -a "$out/gpu-bench.log"
    # Every transfer was checked byte for byte inside the run (a mismatch stops
    # it with an error); here every kernel row must say identical.
    python3 - "$out/gpu.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
if not rows:
    sys.exit("gpu.csv has no rows: no GPU was measured")
kernels = [r for r in rows if r.get("table") == "kernel"]
bad = [r["name"] for r in kernels if r.get("identical") != "true"]
if not kernels or bad:
    sys.exit(f"kernels differing from the CPU: {bad or 'no kernel rows'}")
print(f"verified: {len(kernels)} kernel results identical to the CPU's, "
      f"{sum(r.get('table') == 'transfer' for r in rows)} transfer points checked byte for byte")
PY
    python3 - "$out/cnn.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [f"{r['completion']} layer {r['layer']}" for r in rows if r.get("verified") != "true"]
if not rows or bad:
    sys.exit(f"cnn on the GPU: {bad or 'no rows'}")
print(f"verified: cnn on {rows[0]['device']}, {len(rows)} layer rows equal to the reference")
PY
}

case "${1:-all}" in
build) build ;;
run) shift; run "$@" ;;
all) build; run ;;
*) echo "usage: $0 [build|run [--quick]]" >&2; exit 2 ;;
esac
