#!/usr/bin/env bash
# Run the test suite against the dependency floors or against the newest releases, each in a
# fresh venv, away from the repository's .venv.
#
#   tools/lanes.sh floors [pytest args...]   exactly the lower bounds of setup.cfg's
#                                            install_requires (`>=` read as `==`), plus FLOOR_PINS
#   tools/lanes.sh latest [pytest args...]   the newest releases (`pip install --upgrade`)
#
# Environment:
#   PYTHON     interpreter for the venv. Default: for `floors` the oldest supported Python (3.10,
#              as `python3.10` or from pyenv) when there is one, else python3; for `latest`,
#              python3.
#   LANES_DIR  where the venvs go (default: ${TMPDIR:-/tmp}/flax_optim_compat-lanes); each run
#              deletes and recreates its own venv there.
#
# The package is installed editable (with its `flax.optim` alias .pth) from a copy of the working
# tree's build files taken at the start, so nothing is written into the checkout; the suite then
# runs from the checkout with the README's test command (`python -m pytest`). Editable, as in the
# development setup (tests/test_import_alias.py's fresh venvs see this venv's site-packages
# without this package, so the suite passes with a regular install here too).
# Exit status: pytest's (5, no test collected, counts as a failure like any other non-zero one).
#
# Python 3.10 gets at most jax 0.6.2 (jax >= 0.7 requires Python >= 3.11). On the floors
# tests/test_multiprocess.py skips its two-process run (jaxlib < 0.6.2: gloo aborts at random)
# and its failure runs wait out jax's default heartbeat timeout (about 100 s; jax >= 0.7 lets
# the worker shorten it).
set -euo pipefail

# Releases the floors need that are not ours to declare: flax requires orbax-checkpoint without
# a bound, and pip's newest orbax-checkpoint needs a newer jax than our floor (jax >= 0.6.0 from
# 0.11.25 on). 0.11.13 is the oldest one whose restore without a target does not warn
# "Couldn't find sharding info under RestoreArgs" (an error under the suite's
# filterwarnings=error: tests/test_restore_strict.py's orbax cases fail on 0.11.6 .. 0.11.12).
FLOOR_PINS=(orbax-checkpoint==0.11.13)

lane="${1:-}"
case "$lane" in
  floors|latest) shift ;;
  *) echo "usage: $0 floors|latest [pytest args...]" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
lanes_dir="${LANES_DIR:-${TMPDIR:-/tmp}/flax_optim_compat-lanes}"
venv="$lanes_dir/$lane"
src="$lanes_dir/$lane-src"

python="${PYTHON:-}"
if [[ -z "$python" && "$lane" == floors ]]; then
  if python3.10 -c pass 2>/dev/null; then
    python=python3.10
  elif command -v pyenv >/dev/null && pyenv prefix 3.10 >/dev/null 2>&1; then
    python="$(pyenv prefix 3.10)/bin/python3.10"
  fi
fi
python="${python:-python3}"

start=$SECONDS
echo "== lane $lane: $("$python" -V 2>&1) ($python), venv $venv"
rm -rf "$venv" "$src"
mkdir -p "$lanes_dir" "$src"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
# The pip bundled with older Pythons backtracks for many minutes on this dependency set.
"${pip[@]}" install --upgrade pip

for name in setup.py setup.cfg MANIFEST.in README.md LICENSE \
    _flax_optim_compat_alias.py; do
  cp "$repo/$name" "$src/"
done
cp -r "$repo/flax_optim_compat" "$repo/docs" "$src/"

if [[ "$lane" == floors ]]; then
  mapfile -t floors < <("$venv/bin/python" - "$repo/setup.cfg" <<'EOF'
import configparser, re, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[1])
for req in cfg['options']['install_requires'].split('\n'):
  req = req.split('#')[0].strip()
  if not req:
    continue
  m = re.fullmatch(r'([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)', req)
  if not m:
    sys.exit(f'setup.cfg install_requires: {req!r} has no plain `>=` floor')
  print(f'{m[1]}=={m[2]}')
EOF
  )
  echo "== pins: ${floors[*]} ${FLOOR_PINS[*]}"
  "${pip[@]}" install "${floors[@]}" "${FLOOR_PINS[@]}" -e "$src[test]"
else
  "${pip[@]}" install --upgrade --upgrade-strategy eager -e "$src[test]"
fi
"$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
  | grep -iE '^(jax|jaxlib|optax|flax|orbax-checkpoint|numpy|msgpack|ml[-_]dtypes|tensorstore|pytest) ' \
  | sed 's/^/   /'
echo "== installed in $((SECONDS - start)) s"

cd "$repo"
set +e
# The lanes also run the slow large-file tests (tests/test_orbax_large.py's 256 MiB leaf).
FLAX_OPTIM_COMPAT_LARGE_TESTS=1 "$venv/bin/python" -m pytest "$@"
status=$?
set -e
echo "== lane $lane: pytest exit $status, $((SECONDS - start)) s in all"
exit "$status"
