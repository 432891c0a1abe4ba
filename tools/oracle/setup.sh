#!/usr/bin/env bash
# Builds the legacy oracle: a venv with the real flax.optim (flax 0.5.3 on jax 0.4.13), in which
# `python -m tools.oracle` regenerates the golden fixtures under tests/fixtures.
#
#   usage: tools/oracle/setup.sh [VENV_DIR]   (default: $LEGACY_ORACLE_VENV or
#                                              $HOME/.cache/legacy-flax-oracle)
#
# Needs a Python 3.11 interpreter ($PYTHON, default python3.11, else python3 if it is 3.11) and
# the package index. Does nothing if the venv already imports flax.optim with these shims.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-${LEGACY_ORACLE_VENV:-$HOME/.cache/legacy-flax-oracle}}
check='import flax, jax; from flax import optim; from flax.training import checkpoints; print("legacy oracle:", "flax", flax.__version__, "jax", jax.__version__)'

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -W ignore -c "$check" 2>/dev/null; then
  echo "python: $venv/bin/python"; exit 0
fi
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' || {
  echo "need Python 3.11 (jaxlib 0.4.13 wheels); set PYTHON=/path/to/python3.11" >&2; exit 1; }
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp "$here/sitecustomize.py" "$site/sitecustomize.py"
"$venv/bin/python" -W ignore -c "$check"
echo "python: $venv/bin/python"
