#!/usr/bin/env bash
# Renders a dmaflow bench report in headless Chromium (Debian's `chromium`
# package) to PNG at desktop and phone width, to look at what a reader sees.
#   scripts/report-screenshot.sh [REPORT_DIR] [OUT_DIR]
set -euo pipefail
report=${1:-report}
out=${2:-$report}
index="$(cd "$report" && pwd)/index.html"
if [ ! -f "$index" ]; then
  echo "no $index: run 'cargo run --release -- bench' first" >&2
  exit 2
fi
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "no chromium: apt-get install chromium" >&2
  exit 2
fi
mkdir -p "$out"
for size in desktop:1280,2400 phone:390,2400; do
  name=${size%%:*}
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="${size#*:}" --screenshot="$out/report-$name.png" "file://$index" \
    >/dev/null 2>&1
  echo "$out/report-$name.png"
done
