#!/usr/bin/env bash
# Run the test suite in the orders other than the README's command, to show that no test's
# result depends on which tests ran before it in the same process.
#
#   tools/suite_orders.sh alone [PATH...]     each test file in a pytest process of its own
#   tools/suite_orders.sh reversed [PATH...]  all the files in one process, last file first
#
# PATH: test files (default: every tests/**/test_*.py, then the package's doctests). Both
# orders run in one process each (`-n 0`: no pytest-xdist workers, so the order is the one
# given). `alone` prints one line per file: its status, its wall time and the CPU seconds of
# the process and its children (what a file costs whatever else runs on the machine), and at
# the end the files that failed. Extra pytest arguments go in PYTEST_ARGS.
#
# Environment:
#   PYTHON       the interpreter (default: the checkout's .venv/bin/python, else python3)
#   PYTEST_ARGS  more pytest arguments (e.g. "-x" or "--durations=20")
#   LOG_DIR      `alone` keeps each file's pytest output there (FILE's path, / as __, .txt)
# Exit status: non-zero when a file (or the reversed run) failed; a file without tests is
# `none`, not a failure.
set -uo pipefail

mode="${1:-}"
case "$mode" in
  alone|reversed) shift ;;
  *) echo "usage: $0 alone|reversed [test files...]" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi
read -r -a extra <<< "${PYTEST_ARGS:-}"

if (( $# )); then
  files=("$@")
else
  mapfile -t files < <(find tests -name 'test_*.py' | LC_ALL=C sort)
  files+=(flax_optim_compat)   # the doctests (--doctest-modules)
fi

if [[ "$mode" == reversed ]]; then
  reversed=()
  for (( i = ${#files[@]} - 1; i >= 0; i-- )); do reversed+=("${files[i]}"); done
  start=$SECONDS
  "$python" -m pytest -q -n 0 "${extra[@]}" "${reversed[@]}"
  status=$?
  echo "== reversed: ${#files[@]} paths, pytest exit $status, $((SECONDS - start)) s"
  exit "$status"
fi

failed=()
start=$SECONDS
timing="$(mktemp)"
trap 'rm -f "$timing"' EXIT
for file in "${files[@]}"; do
  # %e wall, %U + %S CPU of pytest and every child it waited for.
  /usr/bin/time -o "$timing" -f '%e %U %S' \
    "$python" -m pytest -q -n 0 "${extra[@]}" "$file" > "$timing.out" 2>&1
  status=$?
  read -r wall user sys < <(tail -n 1 "$timing")
  summary="$(grep -E '(passed|failed|error|skipped|no tests ran)' "$timing.out" | tail -n 1)"
  cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')"
  # Exit 5: the file holds no test (a rule's test module that only lists its examples).
  case "$status" in 0) word=ok ;; 5) word=none ;; *) word=FAIL ;; esac
  printf '%-4s %7s s wall %7s s cpu  %s  (%s)\n' "$word" "$wall" "$cpu" "$file" "$summary"
  if [[ -n "${LOG_DIR:-}" ]]; then
    mkdir -p "$LOG_DIR" && cp "$timing.out" "$LOG_DIR/${file//\//__}.txt"
  fi
  if [[ $word == FAIL ]]; then
    failed+=("$file")
    tail -n 30 "$timing.out" | sed 's/^/    /'
  fi
done
rm -f "$timing.out"
echo "== alone: ${#files[@]} paths in $((SECONDS - start)) s, ${#failed[@]} failed${failed:+: ${failed[*]}}"
(( ${#failed[@]} == 0 ))
