"""The spec's placement section: quantities, tolerations, affinity and GPU requests are checked on input."""

from __future__ import annotations

from decimal import Decimal

import pytest

from lecritique.config.placement import (
    ComponentPlacement,
    PlacementSpec,
    ResourceRequirements,
    Toleration,
    is_extended_resource,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", Decimal(2)),
        ("500m", Decimal("0.5")),
        ("1Gi", Decimal(2**30)),
        ("1.5G", Decimal("1.5e9")),
        ("1e3", Decimal(1000)),
        ("64Mi", Decimal(64 * 2**20)),
        ("100n", Decimal("1e-7")),
    ],
)
def test_quantities_parse_like_kubernetes(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "lots", "1GB", "1.2.3", "Gi", "1 Gi"])
def test_bad_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def test_resources_name_the_bad_entry() -> None:
    with pytest.raises(ValueError, match="memory"):
        ResourceRequirements.model_validate({"limits": {"memory": "big"}})
    with pytest.raises(ValueError, match="resource name"):
        ResourceRequirements.model_validate({"limits": {"nvidia.com/gpu!": "1"}})
    with pytest.raises(ValueError, match="must not be negative"):
        ResourceRequirements.model_validate({"requests": {"cpu": "-1"}})
    with pytest.raises(ValueError, match="cannot be overcommitted"):
        ResourceRequirements.model_validate(
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}
        )
    assert ResourceRequirements.model_validate({"limits": {"nvidia.com/gpu": 2, "cpu": 1.5}}).limits == {
        "nvidia.com/gpu": "2",
        "cpu": "1.5",
    }
    assert is_extended_resource("nvidia.com/gpu") and not is_extended_resource("memory")


def test_tolerations_are_consistent_and_render_in_api_form() -> None:
    toleration = Toleration(key="pool", value="gpu", effect="NoSchedule", toleration_seconds=30)
    assert toleration.to_kubernetes() == {
        "operator": "Equal",
        "key": "pool",
        "value": "gpu",
        "effect": "NoSchedule",
        "tolerationSeconds": 30,
    }
    assert Toleration(operator="Exists").to_kubernetes() == {"operator": "Exists"}
    with pytest.raises(ValueError, match="operator is 'Exists'"):
        Toleration(key="a", operator="Exists", value="b")
    with pytest.raises(ValueError, match="empty key"):
        Toleration(value="b")
    with pytest.raises(ValueError):
        Toleration.model_validate({"key": "a", "effect": "Sometimes"})


def test_placement_forbids_unknown_fields_and_affinity_kinds() -> None:
    with pytest.raises(ValueError, match="node_selecter"):
        PlacementSpec.model_validate({"rollout": {"node_selecter": {}}})
    with pytest.raises(ValueError, match="unknown affinity kind"):
        ComponentPlacement.model_validate({"affinity": {"nodeAfinity": {}}})
    with pytest.raises(ValueError, match="replicas"):
        PlacementSpec.model_validate({"environment_verifier": {"replicas": 0}})
    with pytest.raises(ValueError, match="replicas"):
        PlacementSpec.model_validate(
            {"rollout": {"replicas": 2}}
        )  # rollout.replicas lives in the rollout section
    assert PlacementSpec().rollout.node_selector is None


def test_experiment_spec_reports_placement_errors_by_full_path() -> None:
    from lecritique.config.experiment import SpecError, parse_spec
    from tests.helm_support import spec_data

    with pytest.raises(SpecError, match=r"placement\.value_trainer\.resources\.limits"):
        parse_spec(spec_data(placement={"value_trainer": {"resources": {"limits": {"memory": "a lot"}}}}))
    spec = parse_spec(spec_data(placement={"rollout": {"node_selector": {"pool": "inference"}}}))
    assert spec.placement.rollout.node_selector == {"pool": "inference"}
