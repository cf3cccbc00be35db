"""The chart's stage-model Job, run for real in the services image (issue #41, item 5).

The Job the chart renders (``weights.stageModel``) is run with podman as the chart runs it: the
services image, its container's arguments, uid 10001 on a read-only root filesystem, no network,
the source folder read-only at ``/source``, the weight volume at ``/weights`` and a small ``/tmp``.
The model it stages (a tiny random policy saved with ``save_pretrained``) must land whole under
``models/<tenant>/<name>`` and load from there with the normal ``from_pretrained`` path.
"""

from __future__ import annotations

import filecmp
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lecritique.models.policy import load_policy
from lecritique.models.tiny_arch import TinyArchitecture, write_random_tiny_policy
from tests.helm_support import find, render_objects
from tests.integration.containers.kube_play import podman
from tests.integration.containers.test_images_and_pods import REGISTRY, SERVICES, TAG, images  # noqa: F401

pytestmark = [pytest.mark.slow(seconds=900), pytest.mark.timeout(2700)]

TENANT, NAME = "alice", "tiny-staged"


@pytest.fixture
def folders() -> Iterator[tuple[Path, Path]]:
    """A source volume holding a tiny model, and an empty weight volume (both readable, the weight
    volume writable, by the container's uid 10001, as a volume's permissions would allow)."""
    with tempfile.TemporaryDirectory(prefix="stage-model-") as root:
        os.chmod(root, 0o755)
        source, weights = Path(root) / "source", Path(root) / "weights"
        architecture = TinyArchitecture(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        write_random_tiny_policy(source / "tiny-policy", "0123456789+-=", architecture=architecture)
        for path in [source, *source.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        weights.mkdir(mode=0o777)
        os.chmod(weights, 0o777)
        yield source, weights


def _job_container() -> dict[str, Any]:
    values = {
        "global": {"image": {"registry": REGISTRY, "tag": TAG}},
        "weights": {
            "stageModel": {
                "enabled": True,
                "tenant": TENANT,
                "name": NAME,
                "source": {"persistentVolumeClaim": {"claimName": "hf-models"}},
                "sourcePath": "tiny-policy",
                "image": {"pullPolicy": "Never"},
            }
        },
    }
    (job,) = find(render_objects(values), "Job", "stage-model")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def test_the_rendered_job_stages_a_model_that_loads(images, folders) -> None:  # noqa: F811
    source, weights = folders
    container = _job_container()
    assert container["image"] == SERVICES and container["securityContext"]["readOnlyRootFilesystem"]
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    assert mounts["/source"]["readOnly"] and set(mounts) == {"/source", "/weights", "/tmp"}
    environment = [f"{item['name']}={item['value']}" for item in container["env"]]
    podman(
        "run", "--rm", "--read-only", "--network", "none", "--user", "10001:10001",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "-v", f"{source}:/source:ro", "-v", f"{weights}:/weights", "--tmpfs", "/tmp:size=64m",
        *[flag for pair in environment for flag in ("-e", pair)],
        container["image"], *container["args"],
    )  # fmt: skip
    staged = weights / "models" / TENANT / NAME
    assert sorted(p.name for p in staged.iterdir()) == sorted(
        p.name for p in (source / "tiny-policy").iterdir()
    )
    assert all(
        filecmp.cmp(staged / p.name, source / "tiny-policy" / p.name, shallow=False) for p in staged.iterdir()
    )
    assert not [p for p in staged.parent.iterdir() if p.name.startswith(".")], "no half-copied folder left"
    model, tokenizer = load_policy(staged)
    assert model.config.hidden_size == 32 and tokenizer is not None
