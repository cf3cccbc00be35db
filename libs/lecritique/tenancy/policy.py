"""What a tenant may launch, decided on the server: allow-lists and quotas.

A spec is a tenant's wish; the server's policy bounds it. By default a tenant may use nothing
beyond its own prefix: Kubernetes Secrets named ``<tenant>-*`` (or, for the local launcher,
API-process environment variables named ``<TENANT>_*``), models under ``<models_root>/<tenant>``,
and no LLM endpoint at all. An operator widens this per tenant (or for every tenant, under the
key ``*``) in the chart's ``api.tenantPolicies`` / ``LECRITIQUE_API_TENANT_POLICIES``. The same
policy bounds what a spec names: python verifier entry points (none by default), dataset paths
(``<datasets_root>/<tenant>``), tracker folders (the run directory) and tracker servers (none);
the rules are in :mod:`lecritique.tenancy.spec_rules`.

Environment variable names that the platform sets itself (``REDIS_URL``, ``LECRITIQUE_*``,
``PATH``, ...) are never accepted as ``api_key_env``: the key would overwrite them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

RESERVED_ENV_NAMES = frozenset(
    {
        "REDIS_URL",
        "HOME",
        "PATH",
        "USER",
        "SHELL",
        "TMPDIR",
        "POD_NAME",
        "XDG_CACHE_HOME",
        "HF_HOME",
        "TRITON_CACHE_DIR",
        "VLLM_CACHE_ROOT",
        "TOKENIZERS_PARALLELISM",
        "OMP_WAIT_POLICY",
    }
)
"""Variables the launchers set for every experiment process."""
RESERVED_ENV_PREFIXES = (
    "LECRITIQUE_",
    "REDIS",
    "PYTHON",
    "LD_",
    "KUBERNETES_",
    "VLLM_",
    "HF_",
    "TORCH",
    "CUDA",
    "NCCL_",
    "OMP_",
    "MKL_",
    "GRPC_",
    "SSL_",
    "REQUESTS_",
    "CURL_",
    "HTTP_",
    "HTTPS_",
    "NO_PROXY",
    "ALL_PROXY",
)
"""Prefixes of variables that change how the platform, Python, the loader or the network behave."""
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
"""What ``api_key_env`` may look like (matched whole)."""

ViolationKind = Literal["forbidden", "limit"]


@dataclass(frozen=True)
class Violation:
    field: str
    """Dotted path of the spec field at fault (``critic.llm.api_key_secret``)."""
    message: str
    """What the policy allows instead."""
    kind: ViolationKind
    """``forbidden``: an allow-list refuses it (403); ``limit``: a quota is exceeded (422)."""


class TenantPolicy(BaseModel):
    """One tenant's allow-lists and quotas (fields not set fall back to the ``*`` entry, then to these defaults)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
        alias_generator=to_camel,
        populate_by_name=True,
    )

    secrets: tuple[str, ...] = ()
    """Kubernetes Secrets (kubernetes launcher) or API-process environment variables (local launcher)
    the tenant may name as its LLM API key, besides ``<tenant>-*`` Secrets / ``<TENANT>_*`` variables."""
    model_roots: tuple[str, ...] = ()
    """Absolute directories under which the tenant's model paths may lie, besides ``<models_root>/<tenant>``."""
    llm_endpoints: tuple[str, ...] = ()
    """Base URLs the tenant's frozen LLM critic may call (a ``base_url`` must start with one, on a path boundary)."""
    llm_egress: tuple[dict[str, Any], ...] = ()
    """NetworkPolicy egress rules (Kubernetes form) given to the value-evaluator pods of this tenant's
    experiments: the addresses of ``llm_endpoints``. Kubernetes launcher only."""
    verifier_entry_points: tuple[str, ...] = ()
    """Exact ``module:function`` names the tenant's ``python`` dataset verifiers may call (default: none)."""
    dataset_roots: tuple[str, ...] = ()
    """Absolute directories under which the tenant's dataset paths may lie, besides ``<datasets_root>/<tenant>``."""
    tracker_endpoints: tuple[str, ...] = ()
    """Base URLs of tracker servers the tenant's experiments may send to (an MLflow ``tracking_uri``;
    ``https://api.wandb.ai`` for W&B ``mode: online``); default: none, only files in the run directory."""
    tracker_egress: tuple[dict[str, Any], ...] = ()
    """NetworkPolicy egress rules (Kubernetes form) given to the orchestrator pods of this tenant's
    experiments, which feed the trackers: the addresses of ``tracker_endpoints``. Kubernetes launcher only."""
    sandbox_packages: tuple[str, ...] = ()
    """Site-packages modules the tenant's sandboxed code may import besides the sandbox's defaults."""
    max_running_experiments: int = Field(default=4, ge=0, le=10_000)
    """Experiments not yet finished at once; more get 429."""
    max_replicas: int = Field(default=8, ge=1, le=1024)
    """Most replicas (or torchrun processes) of any one component of an experiment."""
    max_gpus: int = Field(default=8, ge=0, le=65_536)
    """Most GPUs one experiment requests, over all its pods (kubernetes launcher)."""
    max_steps: int = Field(default=100_000, ge=1, le=10_000_000)
    """Most policy steps (``orchestrator.steps``) of one experiment."""


def _set_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The fields an entry sets (keys in the chart's camelCase or in snake_case)."""
    policy = TenantPolicy.model_validate(entry)
    return {name: getattr(policy, name) for name in policy.model_fields_set}


def resolve_policy(policies: Mapping[str, Mapping[str, Any]], tenant: str) -> TenantPolicy:
    """The tenant's entry over the ``*`` entry over the defaults (field by field)."""
    return TenantPolicy(**{**_set_fields(policies.get("*", {})), **_set_fields(policies.get(tenant, {}))})


def validate_policies(policies: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise ValueError naming the first invalid entry (checked at start-up, not per request)."""
    for tenant in policies:
        try:
            policy = resolve_policy(policies, tenant)
        except ValueError as error:
            raise ValueError(f"tenant policy {tenant!r}: {error}") from None
        for kind, roots in (("model", policy.model_roots), ("dataset", policy.dataset_roots)):
            for root in roots:
                if not _is_clean_absolute(root):
                    raise ValueError(
                        f"tenant policy {tenant!r}: {kind} root {root!r} must be an absolute, normalised path"
                    )
        for url in (*policy.llm_endpoints, *policy.tracker_endpoints):
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"tenant policy {tenant!r}: endpoint {url!r} must be an http(s) base URL")


def env_prefix(tenant: str) -> str:
    """The environment-variable prefix that belongs to a tenant (``team.a-1`` -> ``TEAM_A_1_``)."""
    return re.sub(r"[^A-Z0-9]", "_", tenant.upper()) + "_"


def is_reserved_env(name: str) -> bool:
    return name in RESERVED_ENV_NAMES or name.startswith(RESERVED_ENV_PREFIXES)


def _is_clean_absolute(path: str) -> bool:
    return (path.startswith("/") and posixpath.normpath(path) == path.rstrip("/")) or path == "/"


def path_under(path: str, roots: list[str]) -> bool:
    """Whether ``path`` (absolute, no ``..``, normalised) lies in or under one of ``roots``."""
    if not _is_clean_absolute(path) or "\x00" in path:
        return False
    normal = posixpath.normpath(path)
    return any(
        normal == root.rstrip("/") or normal.startswith(root.rstrip("/") + "/") for root in roots if root
    )


def endpoint_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    """``url`` starts with an allowed base URL: same scheme, host and port, path on a segment boundary."""
    try:
        target = urlsplit(url)
        target_port = target.port
    except ValueError:
        return False
    if target.username is not None or target.password is not None or target.query or target.fragment:
        return False
    for base in allowed:
        try:
            prefix = urlsplit(base.rstrip("/"))
            prefix_port = prefix.port
        except ValueError:
            continue
        same_origin = (target.scheme, target.hostname, target_port) == (
            prefix.scheme,
            prefix.hostname,
            prefix_port,
        )
        path, root = posixpath.normpath(target.path or "/"), prefix.path.rstrip("/")
        if (
            same_origin
            and ".." not in target.path.split("/")
            and (path == (root or "/") or path.startswith(root + "/"))
        ):
            return True
    return False


def _replica_fields(data: dict[str, Any]) -> list[tuple[str, int]]:
    critic = data.get("critic") or {}
    placed = (data.get("placement") or {}).get("environment_verifier") or {}
    found = [
        ("rollout.replicas", data.get("rollout", {}).get("replicas")),
        ("critic.evaluator_replicas", critic.get("evaluator_replicas")),
        ("placement.environment_verifier.replicas", placed.get("replicas")),
        ("policy_trainer.processes", data.get("policy_trainer", {}).get("processes")),
        ("critic.processes", critic.get("processes")),
    ]
    return [(field, int(value)) for field, value in found if isinstance(value, int)]


def quota_violations(spec_data: dict[str, Any], policy: TenantPolicy) -> list[Violation]:
    """Replicas and steps over the tenant's quotas in a dumped spec (``spec.model_dump(mode="json")``).

    What the spec names (paths, modules, URLs, Secrets) is checked by
    :func:`lecritique.tenancy.spec_rules.spec_violations`, which calls this too.
    """
    found: list[Violation] = []
    for field, replicas in _replica_fields(spec_data):
        if replicas > policy.max_replicas:
            found.append(
                Violation(field, f"{replicas} exceeds this tenant's limit of {policy.max_replicas}", "limit")
            )
    steps = spec_data.get("orchestrator", {}).get("steps")
    if isinstance(steps, int) and steps > policy.max_steps:
        found.append(
            Violation(
                "orchestrator.steps", f"{steps} exceeds this tenant's limit of {policy.max_steps}", "limit"
            )
        )
    return found


def gpu_violation(gpus: int, policy: TenantPolicy) -> Violation | None:
    """The GPU quota, for the total a launcher computed from its rendering."""
    if gpus > policy.max_gpus:
        return Violation(
            "placement",
            f"the experiment requests {gpus} GPUs; this tenant's limit is {policy.max_gpus}",
            "limit",
        )
    return None
