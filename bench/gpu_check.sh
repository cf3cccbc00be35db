#!/usr/bin/env bash
# The GPU check of issue #16 in one command, on a bare GPU machine, from the repository root:
#
#     bash bench/gpu_check.sh [extra bench/gpu_check.py flags]
#
# Writes $OUT/gpu_check.json (OUT: the device tool's output folder; ./gpu_check_out elsewhere).
# Uses the machine's python3 and its torch (CUDA build) when it has one; otherwise tries
# `pip install torch==2.13.0` (needs a reachable registry). Project dependencies the image lacks
# are installed from .whl/ (made by bench/gpu_check_wheels.sh, carried along) or, failing that, from
# the registry. Every stage has a timeout; the whole stays under 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT_DIR"
PY="${PYTHON:-python3}"
SITE=/tmp/gpu_check_site
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

if ! timeout 60 "$PY" -c "import torch" 2>/dev/null; then
    echo "no torch in $PY: installing torch==2.13.0"
    timeout 240 "$PY" -m pip install -q --target "$SITE" torch==2.13.0 || echo "could not install torch (no registry?)"
fi
export PYTHONPATH="$SITE:$PWD/libs:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"

# Distributions bench/gpu_check.py imports, with the least version that works; prints the missing ones.
missing() {
    timeout 60 "$PY" - <<'PYEOF'
from importlib.metadata import PackageNotFoundError, version
needs = {"pydantic": "2.14", "pydantic_core": "2.50", "annotated-types": "0.6", "typing-inspection": "0.4.4",
         "typing_extensions": "4.16", "transformers": "5.0", "safetensors": "0.4", "numpy": "2.0", "rich": "13",
         "pyyaml": "6", "tokenizers": "0.20"}
def key(text):
    return tuple(int(part) for part in text.split("+")[0].split(".")[:3] if part.isdigit())
for name, least in needs.items():
    try:
        if key(version(name)) < key(least):
            print(name)
    except PackageNotFoundError:
        print(name)
PYEOF
}
lacking=$(missing)
if [ -n "$lacking" ]; then
    echo "missing or too old: $(echo $lacking)"
    wheels=()
    for name in $lacking; do
        stem=$(echo "$name" | tr - _)
        for wheel in .whl/${stem}-*.whl .whl/${name}-*.whl; do [ -f "$wheel" ] && wheels+=("$wheel"); done
    done
    if [ ${#wheels[@]} -gt 0 ]; then
        timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
            $(printf '%s\n' "${wheels[@]}" | sort -u) || echo "could not install the carried wheels"
        lacking=$(missing)
    fi
fi
if [ -n "$lacking" ]; then
    pins=$(for name in $lacking; do grep -i "^$(echo "$name" | sed 's/[-_]/[-_]/g')==" requirements/constraints.txt; done)
    echo "from the registry: $(echo $pins)"
    timeout 180 "$PY" -m pip install -q -c requirements/constraints.txt --target "$SITE" $pins || echo "could not install: $(echo $pins)"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import torch, pydantic, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'pydantic', pydantic.VERSION, 'transformers', transformers.__version__)"
timeout 330 "$PY" bench/gpu_check.py "$OUT_DIR" --budget-seconds 240 "$@"
status=$?
[ -f "$OUT_DIR/gpu_check.json" ] || echo "{\"error\": \"bench/gpu_check.py exited $status without a summary\"}" > "$OUT_DIR/gpu_check.json"
exit $status
