#!/usr/bin/env bash
# Run HERE (a machine that reaches PyPI), in the repository root, before bench/gpu_check.sh runs on
# a GPU machine that reaches nothing: downloads into .whl/ (git-ignored through .git/info/exclude)
# the wheels of the project's pure dependencies that the GPU image may lack (its python3 is 3.12 and
# holds torch, transformers, safetensors, numpy, rich, pyyaml). Versions are requirements/constraints.txt's.
# The device run then names .whl in its carry list; gpu_check.sh installs only what is missing there.
set -euo pipefail
cd "$(dirname "$0")/.."
exclude="$(git rev-parse --git-path info/exclude)"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
pin() { grep -i "^$1==" requirements/constraints.txt; }
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
    "$(pin pydantic)" "$(pin pydantic_core)" "$(pin annotated-types)" "$(pin typing-inspection)" "$(pin typing_extensions)"
ls -l .whl
