"""The chart's image settings: one global registry and tag for both lecritique images (issue #29),
per-component overrides still possible, the default tag the chart's appVersion."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helm_support import CHART, launcher_defaults, one, render_objects, render_templates

COMPONENT_KEYS = (
    "orchestrator",
    "rollout",
    "environmentVerifier",
    "valueEvaluator",
    "valueTrainer",
    "policyTrainer",
)


def _images(values: dict[str, Any] | None = None) -> dict[str, str]:
    """Component values key -> image of its pods (the API's Deployment, the launcher's defaults)."""
    objects = render_objects(values)
    [api] = one(objects, "Deployment", "-api")["spec"]["template"]["spec"]["containers"]
    [redis] = one(objects, "StatefulSet", "-redis")["spec"]["template"]["spec"]["containers"]
    defaults = launcher_defaults(values)["components"]
    return {
        "api": api["image"],
        "redis": redis["image"],
        **{key: defaults[key]["image"] for key in COMPONENT_KEYS},
    }


def test_the_default_images_are_the_published_names_at_the_chart_version() -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    images = _images()
    assert images.pop("api") == f"ghcr.io/lecritique/api:{version}"
    assert images.pop("redis") == "docker.io/library/redis:7.4.2-bookworm"
    assert set(images.values()) == {f"ghcr.io/lecritique/services:{version}"}


def test_one_global_setting_moves_both_images_to_another_registry_and_tag() -> None:
    images = _images({"global": {"image": {"registry": "registry.example.com:5000/ml/", "tag": "2026.12.1"}}})
    assert images.pop("api") == "registry.example.com:5000/ml/api:2026.12.1"
    # Redis too, under its own tag (issue #41: it came from docker.io whatever the registry said).
    assert images.pop("redis") == "registry.example.com:5000/ml/redis:7.4.2-bookworm"
    assert set(images.values()) == {"registry.example.com:5000/ml/services:2026.12.1"}


def test_redis_names_its_own_repository_when_set_and_docker_hub_under_the_default_registry() -> None:
    mirrored = {"global": {"image": {"registry": "registry.example.com/ml"}}}
    own = _images(
        {**mirrored, "redis": {"image": {"repository": "mirror.example.com/redis", "tag": "7.4.3"}}}
    )
    assert own["redis"] == "mirror.example.com/redis:7.4.3"
    digest = "sha256:" + "cd" * 32
    pinned = _images({**mirrored, "redis": {"image": {"digest": digest}}})
    assert pinned["redis"] == f"registry.example.com/ml/redis@{digest}"
    default = _images({"global": {"image": {"registry": "ghcr.io/lecritique/", "tag": "1.0"}}})
    assert default["redis"] == "docker.io/library/redis:7.4.2-bookworm"


def test_a_component_still_overrides_its_repository_tag_or_digest() -> None:
    digest = "sha256:" + "ab" * 32
    images = _images(
        {
            "global": {"image": {"registry": "registry.example.com/ml", "tag": "1.0"}},
            "rollout": {"image": {"repository": "registry.example.com/ml/services-vllm", "tag": "1.0-cu129"}},
            "valueTrainer": {"image": {"tag": "1.1"}},
            "policyTrainer": {"image": {"digest": digest}},
            "api": {"image": {"repository": "mirror.example.com/api"}},
        }
    )
    assert images["rollout"] == "registry.example.com/ml/services-vllm:1.0-cu129"
    assert images["valueTrainer"] == "registry.example.com/ml/services:1.1"
    assert images["policyTrainer"] == f"registry.example.com/ml/services@{digest}"
    assert images["api"] == "mirror.example.com/api:1.0"
    assert images["valueEvaluator"] == "registry.example.com/ml/services:1.0"


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ({"tag": "latest"}, "global.image.tag: 'latest' is refused"),
        ({"tag": "a b"}, "global.image.tag"),
        ({"registry": "Registry.Example.com"}, "global.image.registry"),
        ({"registry": ""}, "global.image.registry"),
    ],
)
def test_a_bad_global_image_setting_is_refused_by_name(image: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message.replace(".", r"\.")):
        render_templates({"global": {"image": image}})
