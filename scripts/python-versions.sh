#!/usr/bin/env bash
# The Python package's tests on the oldest and the newest interpreter pyenv
# has (PYNQ 3.x images run Python 3.10), or on the versions given
# (`scripts/python-versions.sh 3.10`): each gets its own virtual
# environment under target/, the package built for it, and pytest. An
# interpreter that is not there is named and skipped, never passed silently.
set -euo pipefail
cd "$(dirname "$0")/.."
# The extension is built in the workspace's target directory: what cargo
# built for the tests is reused, only pyo3 is rebuilt per interpreter.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
root="${PYENV_ROOT:-$HOME/.pyenv}"
status=0
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(3.10 3.13)
for want in "${versions[@]}"; do
  py=$(ls -d "$root"/versions/"$want".*/bin/python 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$py" ]; then
    echo "python-versions: skipped Python $want: not installed under $root/versions"
    continue
  fi
  venv="target/venv-$want"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q ./python pytest
  if "$venv/bin/pytest" -q python/tests; then
    echo "python-versions: Python $("$py" -c 'import platform; print(platform.python_version())'): passed"
  else
    echo "python-versions: Python $want: FAILED" >&2
    status=1
  fi
done
exit $status
