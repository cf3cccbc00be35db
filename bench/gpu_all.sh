#!/usr/bin/env bash
# Both GPU scripts in one command of at most 6 minutes, on a bare GPU machine, from the repository root:
#
#     bash bench/gpu_all.sh
#
# bench/gpu_check.sh (sets up the environment from .whl/, runs bench/gpu_check.py with a 150 s
# budget) then bench/gpu_perf.py (docs/bench-gpu.json, copied to $OUT) and the README table.
# gpu_perf measures the policy trainer with packed micro-batches (the default) and padded ones
# (issue #49) and rewrites the JSON after every stage, so a run cut by its time limit keeps
# (and the table marks as partial) the stages it finished.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
export PYTHONPATH="/tmp/gpu_check_site:$PWD/libs:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
timeout 200 bash bench/gpu_check.sh --budget-seconds 120
check=$?
timeout 150 "$PY" bench/gpu_perf.py --steps 2
perf=$?
[ -f docs/bench-gpu.json ] && cp docs/bench-gpu.json "$OUT_DIR/" && "$PY" bench/gpu_table.py --write && cp README.md "$OUT_DIR/README.md"
echo "gpu_check exit $check, gpu_perf exit $perf"
exit $(( check != 0 || perf != 0 ))
