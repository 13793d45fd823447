#!/usr/bin/env bash
# Run a pytest selection COUNT times in a row under an artificial CPU load (two busy processes
# per core by default), to show that its outcome does not depend on timing.
#   scripts/stress_tests.sh 20            # the stress check: `-m "slow or ray or signals" -n 2 -W default`
#   scripts/stress_tests.sh 20 tests/test_newcomer.py tests/sandboxes/test_pool.py -k 'interrupt or ctrl_c'
#   scripts/stress_tests.sh 3 -m slow
#   LOAD=8 scripts/stress_tests.sh 5 tests/sandboxes   # LOAD busy processes (default: 2 x cores)
# The load is `stress-ng --cpu LOAD` where stress-ng is installed (apt-get install -y stress-ng),
# else LOAD `python3 -c 'while 1: pass'`; it is started before the first round and stopped on
# any exit (Ctrl-C included). One line per round, then the totals (rounds and tests) as
# `N passed, M failed`; exit status 0 only if every round passed. Each round's pytest output
# is kept under STRESS_LOGS (default: a new folder under /tmp, named at the end).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
if [ $# -lt 1 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 COUNT [PYTEST SELECTION AND OPTIONS...]" >&2
  exit 2
fi
count=$1
shift
# With no selection, the stress check of the suite: the slow and end-to-end tests (`slow`, and
# `ray`: training runs, kill-and-resume) and those that send or await signals (`signals`).
[ $# -gt 0 ] || set -- -m "slow or ray or signals" -n 2 -W default
PY=${PY:-.venv/bin/python}
LOAD=${LOAD:-$((2 * $(nproc)))}
logs=${STRESS_LOGS:-$(mktemp -d /tmp/stress-tests.XXXXXX)}
mkdir -p "$logs"

load_pids=()
stop_load() {
  # Only the processes started here, by their ids.
  for pid in "${load_pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${load_pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  load_pids=()
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT
trap 'stop_load; exit 143' TERM

if command -v stress-ng >/dev/null; then
  stress-ng --cpu "$LOAD" --quiet &
  load_pids+=($!)
  load_what="stress-ng --cpu $LOAD"
else
  for _ in $(seq "$LOAD"); do
    python3 -c 'while 1: pass' &
    load_pids+=($!)
  done
  load_what="$LOAD x python3 -c 'while 1: pass'"
fi
echo "load: $load_what on $(nproc) cores; selection: $*; logs: $logs"

rounds_passed=0 rounds_failed=0 tests_passed=0 tests_failed=0 tests_skipped=0
# The count of one outcome ("passed", "failed", "error", "skipped") in pytest's summary line.
outcome() { grep -oE "[0-9]+ $1" <<<"$2" | head -1 | grep -oE '^[0-9]+' || echo 0; }

for round in $(seq "$count"); do
  log="$logs/round-$round.log"
  started=$SECONDS
  "$PY" -m pytest -q -p no:cacheprovider "$@" >"$log" 2>&1
  rc=$?
  summary=$(grep -E '^=*.* in [0-9.]+s' "$log" | tail -1 | sed -E 's/^=+ //; s/ =+$//')
  passed=$(outcome passed "$summary")
  failed=$(($(outcome failed "$summary") + $(outcome error "$summary")))
  skipped=$(outcome skipped "$summary")
  tests_passed=$((tests_passed + passed)) tests_failed=$((tests_failed + failed)) tests_skipped=$((tests_skipped + skipped))
  # A round passes when pytest says so and ran something (exit 5: nothing collected).
  if [ "$rc" -eq 0 ] && [ "$passed" -gt 0 ]; then
    rounds_passed=$((rounds_passed + 1)) verdict=passed
  else
    rounds_failed=$((rounds_failed + 1)) verdict="FAILED (exit $rc, $log)"
  fi
  echo "round $round/$count: $verdict: ${summary:-no pytest summary} [$((SECONDS - started)) s, load $(cut -d' ' -f1-3 /proc/loadavg)]"
done

echo "rounds: $rounds_passed passed, $rounds_failed failed; tests: $tests_passed passed, $tests_failed failed ($tests_skipped skipped)"
[ "$rounds_failed" -eq 0 ]
