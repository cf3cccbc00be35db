"""The ceiling probe's critic when the last step's was pruned (issue #45, found running critic-pays.yaml).

The last step's metrics row is written after the run's final held-out evaluation; an asynchronous
critic can publish more than ``critic.keep_versions`` versions meanwhile, so the runner finds the
last step's critic already pruned. The probe then measures the newest critic the runner kept for an
earlier step, and says so; with none kept it says why there is no probe."""

from __future__ import annotations

import json
from pathlib import Path

from lecritique.study.ceiling_probe import last_step_critic, substituted_critic
from lecritique.study.runner import KEPT, keep_scoring_critic
from lecritique.weights.store import version_dirname


def _run(folder: Path, versions: list[int], in_store: list[int]) -> None:
    rows = [{"step": step, "value_version": version} for step, version in enumerate(versions, start=1)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for version in in_store:
        path = folder / "weights" / "critic" / version_dirname(version)
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(b"weights")


def test_the_last_steps_critic_is_probed_when_it_was_kept(tmp_path):
    _run(tmp_path, [153, 154, 155], in_store=[155, 156])
    keep_scoring_critic(tmp_path, 155)
    version, path, why = last_step_critic(tmp_path)
    assert (version, why) == (155, None) and path == tmp_path / KEPT / version_dirname(155)
    assert substituted_critic(tmp_path, version) is None


def test_an_earlier_steps_kept_critic_stands_in_for_a_pruned_last_one_and_is_named(tmp_path):
    _run(tmp_path, [153, 154, 155], in_store=[154])
    keep_scoring_critic(tmp_path, 154)  # the row of step 2 came at once
    (tmp_path / "weights" / "critic" / version_dirname(154)).rename(tmp_path / "pruned")
    keep_scoring_critic(tmp_path, 155)  # the last row came after 155 was pruned: nothing kept
    version, path, why = last_step_critic(tmp_path)
    assert (version, why) == (154, None) and path == tmp_path / KEPT / version_dirname(154)
    note = substituted_critic(tmp_path, version)
    assert note is not None and "154" in note and "155" in note and "pruned" in note


def test_no_kept_critic_at_all_says_why_there_is_no_probe(tmp_path):
    _run(tmp_path, [153, 154, 155], in_store=[])
    version, path, why = last_step_critic(tmp_path)
    assert version == 155 and path is None and why is not None and "pruned" in why
