"""Each policy step pins the critic version that scored its batch, so the value trainer's retention
cannot prune it while the step is pending (the final held-out evaluation, during which an
asynchronous critic goes on publishing): the study's ceiling probe measures that exact critic."""

from __future__ import annotations

from typing import Any

from lecritique.weights.store import WeightStore
from tests.unit.orchestrator.test_degraded_critic import _Batches, _orchestrator


def test_every_step_pins_the_critic_that_scored_it_and_a_degraded_batch_pins_nothing(tmp_path):
    store = WeightStore(tmp_path / "weights")
    for _ in range(5):
        store.publish("critic", lambda path: (path / "model.safetensors").write_bytes(b"w"))
    pins: list[int] = []

    def pin(version: int) -> bool:
        pins.append(version)
        return store.pin("critic", version, holder="orchestrator")

    orchestrator, _ = _orchestrator(tmp_path, degraded={1, 2}, experiment_id="pin-test")
    orchestrator.pin_critic = pin
    rows: list[dict[str, Any]] = []
    orchestrator.run(rows.append)
    assert len(rows) == 6
    assert pins == [3, 3, 3, 3]  # the stand-in scores every batch with version 3; 2 are degraded
    for _ in range(10):  # the value trainer publishing on after the last step
        store.publish("critic", lambda path: (path / "model.safetensors").write_bytes(b"w"), keep_last=2)
    assert store.versions("critic") == [3, 13, 14]


def test_a_failing_pin_does_not_stop_a_step(tmp_path, caplog):
    def pin(version: int) -> bool:
        raise PermissionError(f"read-only weight store (version {version})")

    orchestrator, _ = _orchestrator(tmp_path, degraded=set(), experiment_id="pin-fails")
    orchestrator.pin_critic = pin
    rows: list[dict[str, Any]] = []
    orchestrator.run(rows.append)
    assert len(rows) == 6
    assert "could not pin critic version 3" in caplog.text


def test_the_batches_stand_in_scores_with_version_three():
    assert _Batches(set()).next(0).scored.value_version == 3
