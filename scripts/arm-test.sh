#!/usr/bin/env bash
# dmaflow for the boards' ARM cores, built here and tested under emulation:
# aarch64 (Zynq UltraScale+, Kria, RFSoC) and armv7l (Zynq-7000: PYNQ-Z1/Z2).
#
#   scripts/arm-test.sh [--build-only] [--strict] [aarch64] [armv7]   (default: both)
#
# Builds, with maturin and cargo-zigbuild (zig from PyPI's `ziglang` as the
# cross linker and C/C++ compiler: one pip install, any glibc target, and the
# CLI's vendored libzmq builds with it; Debian's cross compilers would need a
# toolchain and a libc per architecture):
#   target/wheels/dmaflow-*-cp310-*_{aarch64,armv7l}.whl  (PYNQ 3.x images: Python 3.10)
#   target/wheels/dmaflow-*-cp311-*_{aarch64,armv7l}.whl  (Debian bookworm: Python 3.11)
#   target/arm/<triple>/release/dmaflow                   (the command-line tool)
# then makes a Debian bookworm root per architecture (mmdebstrap from this
# machine's configured Debian archive, with python3, pip, numpy and pytest;
# cached in target/arm-roots), installs the cp311 wheel there with pip and
# copies the tool in, and runs, through qemu-user (binfmt_misc): PYNQ's DMA
# tutorial cell (python/examples/pynq_dma.py) from the installed package, the
# Python tests, `dmaflow info` and `dmaflow bench ring --quick`. Where the
# machine cannot emulate (no binfmt_misc, not root, no qemu-user-static), it
# says so and skips the emulated part, never silently; with --strict (CI) it
# says so and fails, so a skipped ARM check is never read as a pass.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

build_only=0
strict=0
arches=()
for a in "$@"; do
  case $a in
    --build-only) build_only=1 ;;
    --strict) strict=1 ;;
    aarch64 | armv7) arches+=("$a") ;;
    *) echo "arm-test.sh: unknown argument $a (aarch64, armv7, --build-only, --strict)" >&2; exit 2 ;;
  esac
done
[ ${#arches[@]} -eq 0 ] && arches=(aarch64 armv7)

triple() { case $1 in aarch64) echo aarch64-unknown-linux-gnu ;; armv7) echo armv7-unknown-linux-gnueabihf ;; esac; }
debarch() { case $1 in aarch64) echo arm64 ;; armv7) echo armhf ;; esac; }
wheeltag() { case $1 in aarch64) echo aarch64 ;; armv7) echo armv7l ;; esac; }
qemu() { case $1 in aarch64) echo qemu-aarch64 ;; armv7) echo qemu-arm ;; esac; }

# The cross tools, in a virtual environment of their own.
tools=target/armtools
if [ ! -x $tools/bin/cargo-zigbuild ]; then
  python3 -m venv $tools
  $tools/bin/pip install -q 'ziglang>=0.13' 'maturin>=1.16,<2' 'cargo-zigbuild>=0.19'
fi
export PATH=$repo/$tools/bin:$PATH

for a in "${arches[@]}"; do
  t=$(triple "$a")
  rustup target add "$t" >/dev/null
  echo "== $a: wheels for CPython 3.10 and 3.11"
  maturin build -q --release --manifest-path python/Cargo.toml --target "$t" --zig \
    -i python3.10 -i python3.11 --out target/wheels --target-dir target/arm
  echo "== $a: the dmaflow tool"
  cargo zigbuild -q --release -p dmaflow-cli --target "$t" --target-dir target/arm
done
[ $build_only = 1 ] && exit 0

# Emulation: binfmt_misc with qemu-user-static's interpreters (F flag, so a
# chroot needs no copy of qemu inside).
skip() {
  if [ $strict = 1 ]; then
    echo "arm-test.sh: FAILED: the emulated ARM tests cannot run on this machine: $1" >&2
    exit 1
  fi
  echo "arm-test.sh: SKIPPED the emulated tests: $1" >&2
  exit 0
}

# The roots come from this machine's own Debian archive (its apt sources), the
# main archive only: a security mirror's index is sometimes caught mid-sync,
# and nothing here needs its updates.
host_archive() {
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk 'BEGIN { RS = ""; FS = "\n" }
      /(^|\n)Types:([^\n]*[ \t])?deb([ \t\n]|$)/ && !/Suites:[^\n]*-security/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, " "); print u[1]; exit }
      }')
  if [ -z "$uri" ]; then
    uri=$(grep -hE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      grep -v -- '-security' | grep -E '[[:space:]]main([[:space:]]|$)' |
      awk '{ for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { print $i; exit } }' | head -n1)
  fi
  [ -n "$uri" ] || { echo "arm-test.sh: no Debian archive in this machine's apt sources" >&2; return 1; }
  echo "$uri"
}
[ "$(id -u)" = 0 ] || skip "not root (chroot and binfmt_misc need it)"
if ! command -v mmdebstrap >/dev/null || [ ! -x /usr/bin/qemu-aarch64-static ]; then
  command -v apt-get >/dev/null || skip "no qemu-user-static or mmdebstrap, and no apt-get to install them"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    qemu-user-static binfmt-support mmdebstrap >/dev/null) ||
    skip "qemu-user-static and mmdebstrap could not be installed"
fi
if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
  mount binfmt_misc -t binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null ||
    skip "binfmt_misc cannot be mounted here"
fi

for a in "${arches[@]}"; do
  t=$(triple "$a")
  update-binfmts --enable "$(qemu "$a")" >/dev/null 2>&1 || true
  [ -e "/proc/sys/fs/binfmt_misc/$(qemu "$a")" ] ||
    skip "no binfmt_misc entry for $(qemu "$a")"
  root=target/arm-roots/$(debarch "$a")
  if [ ! -x "$root/usr/bin/pip3" ]; then
    echo "== $a: a Debian bookworm root (mmdebstrap)"
    mkdir -p target/arm-roots
    rm -rf "$root.tmp"
    archive=$(host_archive)
    echo "   from $archive"
    mmdebstrap --quiet --arch="$(debarch "$a")" --variant=apt \
      --aptopt='Acquire::Check-Valid-Until "false"' \
      --include=python3,python3-pip,python3-numpy,python3-pytest bookworm "$root.tmp" \
      "deb $archive bookworm main"
    mv "$root.tmp" "$root"
  fi
  opt=$root/opt/dmaflow
  rm -rf "$opt"
  mkdir -p "$opt/bin"
  wheel=$(ls target/wheels/dmaflow-*-cp311-cp311-*_"$(wheeltag "$a")".whl | head -n1)
  cp "$wheel" "$opt/"
  cp "target/arm/$t/release/dmaflow" "$opt/bin/"
  cp -r python/tests python/examples README.md docs "$opt/"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
  trap 'umount "$root/proc" "$root/dev" 2>/dev/null || true' EXIT
  run() {
    chroot "$root" /usr/bin/env DMAFLOW_EXE=/opt/dmaflow/bin/dmaflow \
      DMAFLOW_TIME_SCALE=10 "$@"
  }
  echo "== $a: the cp311 wheel installed with pip"
  run /usr/bin/python3 -m pip install -q --no-deps --no-index --force-reinstall --root-user-action=ignore \
    --break-system-packages "/opt/dmaflow/$(basename "$wheel")"
  echo "== $a: the dmaflow tool under emulation"
  run uname -m
  run /opt/dmaflow/bin/dmaflow info --root /opt/dmaflow/no-board | sed 's/^/   /'
  run /opt/dmaflow/bin/dmaflow bench ring --quick --out /tmp/bench-ring | tail -n 12 | sed 's/^/   /'
  echo "== $a: PYNQ's DMA tutorial cell from the installed package"
  run /usr/bin/python3 /opt/dmaflow/examples/pynq_dma.py | sed 's/^/   /'
  echo "== $a: the Python tests under emulation ($wheel)"
  run /usr/bin/python3 -m pytest -q -p no:cacheprovider /opt/dmaflow/tests
  umount "$root/proc" "$root/dev"
  trap - EXIT
done
