"""A reader's pin keeps its version through the publisher's retention (the critic a step used)."""

from __future__ import annotations

import pytest

from lecritique.weights.store import WeightStore


def _publish(store: WeightStore, count: int, keep_last: int | None = None) -> None:
    for _ in range(count):
        store.publish(
            "critic", lambda path: (path / "model.safetensors").write_bytes(b"w"), keep_last=keep_last
        )


def test_a_pinned_version_survives_pruning_and_the_newest_are_kept_beside_it(tmp_path):
    store = WeightStore(tmp_path)
    _publish(store, 4)
    assert store.pin("critic", 1, holder="orchestrator")
    _publish(store, 6, keep_last=2)
    assert store.versions("critic") == [1, 8, 9]
    assert store.pinned("critic") == {"orchestrator": 1}


def test_one_pin_per_holder_a_new_pin_releases_the_old_version(tmp_path):
    store = WeightStore(tmp_path)
    _publish(store, 4)
    assert store.pin("critic", 0, holder="orchestrator")
    assert store.pin("critic", 1, holder="critic-eval")
    assert store.pin("critic", 2, holder="orchestrator")
    assert store.prune("critic", keep_last=1) == [0]
    assert store.versions("critic") == [1, 2, 3]


def test_a_version_already_pruned_cannot_be_pinned(tmp_path):
    store = WeightStore(tmp_path)
    _publish(store, 5, keep_last=2)
    assert not store.pin("critic", 0, holder="orchestrator")
    assert store.pinned("critic") == {}


def test_pins_are_not_versions_and_a_malformed_pin_pins_nothing(tmp_path):
    store = WeightStore(tmp_path)
    _publish(store, 3)
    assert store.pin("critic", 0, holder="orchestrator")
    (store.role_dir("critic") / ".pins" / "by-hand").write_text("not a version\n")
    assert store.versions("critic") == [0, 1, 2]
    assert store.latest("critic")[0] == 2
    assert store.pinned("critic") == {"orchestrator": 0}
    assert store.prune("critic", keep_last=1) == [1]


@pytest.mark.parametrize("holder", ["", "../up", "a/b", ".hidden"])
def test_a_holder_name_that_is_not_a_plain_name_is_refused(tmp_path, holder):
    store = WeightStore(tmp_path)
    _publish(store, 1)
    with pytest.raises(ValueError, match="pin holder"):
        store.pin("critic", 0, holder=holder)
