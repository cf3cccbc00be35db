"""bench/gpu_perf.py's CPU dry run and the README's GPU table generated from docs/bench-gpu.json (issue #38)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_perf  # noqa: E402
import gpu_table  # noqa: E402

TINY = [
    "--device", "cpu", "--hidden", "32", "--layers", "1", "--rows", "4", "--prompt", "6",
    "--response-min", "8", "--response-max", "40", "--micro-batch-tokens", "96",
    "--predict-batch-tokens", "512", "--generate-rows", "2", "--generate-tokens", "4",
    "--matmul-size", "128", "--steps", "1",
]  # fmt: skip


def test_readme_gpu_table_is_the_generated_one() -> None:
    data = gpu_table.load()
    table = gpu_table.readme_table((ROOT / "README.md").read_text())
    assert table == gpu_table.render(data)
    if data is None:
        assert table.startswith("Not yet measured")
    else:
        assert data["environment"]["device"] == "cuda", "docs/bench-gpu.json must come from a GPU run"


def test_a_cpu_run_never_writes_under_docs() -> None:
    with pytest.raises(SystemExit):
        gpu_perf.main([*TINY, "--out", str(ROOT / "docs" / "bench-gpu.json")])


@pytest.mark.slow(seconds=90)
def test_cpu_dry_run_measures_every_stage(tmp_path: Path) -> None:
    out = gpu_perf.main([*TINY, "--out", str(tmp_path / "perf.json")])
    data = json.loads(out.read_text())
    assert data["environment"]["device"] == "cpu" and data["peak"]["dtype"] == "float32"
    assert "partial" not in data  # written after every stage as partial, then whole
    stages = {stage["stage"]: stage for stage in data["stages"]}
    assert len(stages) == 8, list(stages)
    for name, stage in stages.items():
        if "gb_per_s" in stage:
            assert stage["gb_per_s"] > 0, name
        else:
            assert stage["tokens_per_s"] > 0 and stage["fraction_of_peak"] > 0, name
    sharded = stages["policy trainer, FSDP2 + checkpointing"]
    assert 0 <= sharded["padding_fraction"] < 1 and "attention backend math" in sharded["attention"]
    assert stages["weights to a replica, broadcast over gloo"]["replica_equal"] is True
    packed, padded = stages["policy trainer, plain"], stages["policy trainer, plain, padded"]
    assert "packed rows" in packed["layout"] and padded["layout"] == "padded rows (packing off)"
    assert packed["padding_fraction"] <= padded["padding_fraction"]
    table = gpu_table.render(data)
    assert table.count("\n| ") == 1 + 8 and "matmul peak" in table  # the header and one row a stage
