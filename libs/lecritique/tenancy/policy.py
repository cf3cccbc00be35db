"""What a tenant may launch, decided on the server: allow-lists and quotas.

A spec is a tenant's wish; the server's policy bounds it. By default a tenant may use nothing
beyond its own prefix: Kubernetes Secrets named ``<tenant>-*`` (or, for the local launcher,
API-process environment variables named ``<TENANT>_*``), models under ``<models_root>/<tenant>``,
and no LLM endpoint at all. An operator widens this per tenant (or for every tenant, under the
key ``*``) in the chart's ``api.tenantPolicies`` / ``LECRITIQUE_API_TENANT_POLICIES``. The same
policy bounds what a spec names: python verifier entry points (none by default), dataset paths
(``<datasets_root>/<tenant>``), tracker folders (the run directory) and tracker servers (none);
the rules are in :mod:`lecritique.tenancy.spec_rules`. It also bounds the code sandbox's settings
(a spec may tighten them, never loosen them), where pods go (tolerations, node selectors and
affinities beyond the chart's own), and how much an experiment takes (:mod:`lecritique.tenancy.quotas`).

Environment variable names that the platform sets itself (``REDIS_URL``, ``LECRITIQUE_*``,
``PATH``, ...) are never accepted as ``api_key_env``: the key would overwrite them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from lecritique.tenancy.urls import normal_url

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


_POLICY_CONFIG = ConfigDict(
    extra="forbid",
    frozen=True,
    use_attribute_docstrings=True,
    allow_inf_nan=False,
    alias_generator=to_camel,
    populate_by_name=True,
)
NamespacesMode = Literal["off", "auto", "require"]
NAMESPACES_ORDER: tuple[NamespacesMode, ...] = ("off", "auto", "require")
"""The sandbox's namespaces modes, weakest first."""


class SandboxPolicy(BaseModel):
    """The operator's settings of a tenant's code sandbox (CodeIO's ``environment.sandbox``): a spec may
    tighten them, never loosen them. An unset limit is the sandbox's own default (``SandboxConfig``)."""

    model_config = _POLICY_CONFIG

    namespaces: NamespacesMode | None = None
    """The weakest namespaces mode a spec may choose (off < auto < require); None: the sandbox's default (auto)."""
    audit_hook: bool = True
    """The Python audit hook stays installed (false: a spec may turn it off)."""
    wall_seconds: float | None = Field(default=None, gt=0.0, le=86_400.0)
    """Most wall-clock seconds of one sandboxed call."""
    cpu_seconds: int | None = Field(default=None, ge=1, le=86_400)
    """Most CPU seconds (RLIMIT_CPU) of one call."""
    memory_mb: int | None = Field(default=None, ge=64, le=1_048_576)
    """Most address space (RLIMIT_AS) of one call, MiB."""
    file_size_mb: int | None = Field(default=None, ge=1, le=1_048_576)
    """Largest file (RLIMIT_FSIZE) one call may write, MiB."""
    disk_mb: int | None = Field(default=None, ge=1, le=1_048_576)
    """Largest work directory (a tmpfs, held in memory) of one call, MiB."""
    processes: int | None = Field(default=None, ge=1, le=1_048_576)
    """Most processes and threads (RLIMIT_NPROC) of one call."""
    open_files: int | None = Field(default=None, ge=16, le=1_048_576)
    """Most open descriptors (RLIMIT_NOFILE) of one call."""
    parallel_disk_mb: int = Field(default=128, ge=1, le=1_048_576)
    """Most ``disk_mb`` x ``parallel_executions``: the tmpfs memory of the calls one verifier runs at
    once (default: the defaults' 32 MiB x 4)."""


class TenantPolicy(BaseModel):
    """One tenant's allow-lists and quotas (fields not set fall back to the ``*`` entry, then to these
    defaults; within ``sandbox``, key by key)."""

    model_config = _POLICY_CONFIG

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
    sandbox: SandboxPolicy = Field(default_factory=SandboxPolicy)
    """The weakest isolation and the largest limits the tenant's code sandbox may have."""
    tolerations: tuple[dict[str, Any], ...] = ()
    """Tolerations (Kubernetes form, compared whole) the tenant's placement may give any component,
    besides the chart's own for that component."""
    node_selectors: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Node labels the tenant's placement may select, label -> allowed values, besides the chart's own
    node selector of each component (whose labels a spec's node selector keeps)."""
    affinities: tuple[dict[str, Any], ...] = ()
    """Affinity objects (Kubernetes form, compared whole) the tenant's placement may give any
    component, besides the chart's own for that component."""
    max_cpus: float = Field(default=256.0, gt=0.0, le=10_000_000.0)
    """Most CPU cores one experiment requests, and most its limits add up to, over all its pods
    (replicas x per pod; kubernetes launcher)."""
    max_memory_gib: float = Field(default=2048.0, gt=0.0, le=1e9)
    """Most memory (GiB) one experiment requests, and most its limits add up to, over all its pods."""
    max_critic_parameters: int = Field(default=10**9, ge=0, le=10**15)
    """Most parameters of a critic of its own shape (``critic.tiny``): layers x 16 x hidden squared
    (a Llama layer: attention 4 h^2, MLP 3 h x 4h; embeddings aside)."""
    max_tokens_per_step: int = Field(default=2**25, ge=1, le=10**15)
    """Most tokens one step may generate, each model on its own and all of them together: the
    policy's rollouts (``rollout.tasks_per_step`` x ``group_size`` x ``sampling.max_tokens``), a
    generative or frozen LLM critic's completions, a critic probe's continuations and the held-out
    evaluation (:mod:`lecritique.tenancy.work`)."""
    max_replay_memory_gib: float = Field(default=4.0, gt=0.0, le=1e6)
    """Most Redis memory (GiB) one experiment's replay buffer may hold when full: ``critic.replay.capacity``
    x the bytes of its longest trajectory (:mod:`lecritique.replay.memory`)."""
    max_probe_episodes: int = Field(default=16_384, ge=0, le=10**12)
    """Most continuations one critic probe plays: ``critic_probe.states`` x ``continuations``."""
    max_eval_tasks_per_step: float = Field(default=1024.0, ge=0.0, le=1e12)
    """Most held-out evaluation tasks per policy step: ``orchestrator.eval_tasks`` / ``eval_every``."""
    max_generator_scale: float = Field(default=10.0, ge=1.0, le=1e12)
    """How many times its dataset's default a number in a reasoning-gym ``config`` may be (times 1
    where the default holds no number)."""


def _set_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The fields an entry sets (keys in the chart's camelCase or in snake_case); of ``sandbox``, the
    keys it sets."""
    policy = TenantPolicy.model_validate(entry)
    found = {name: getattr(policy, name) for name in policy.model_fields_set}
    if "sandbox" in found:
        found["sandbox"] = {name: getattr(policy.sandbox, name) for name in policy.sandbox.model_fields_set}
    return found


def resolve_policy(policies: Mapping[str, Mapping[str, Any]], tenant: str) -> TenantPolicy:
    """The tenant's entry over the ``*`` entry over the defaults (field by field; ``sandbox`` key by key)."""
    common, own = _set_fields(policies.get("*", {})), _set_fields(policies.get(tenant, {}))
    merged = {**common, **own}
    if "sandbox" in merged:
        merged["sandbox"] = {**common.get("sandbox", {}), **own.get("sandbox", {})}
    return TenantPolicy(**merged)


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
            if normal_url(url) is None:
                raise ValueError(
                    f"tenant policy {tenant!r}: endpoint {url!r} must be an http(s) base URL without user info, "
                    "query, encoded slashes or empty segments"
                )


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


def raised_with(key: str) -> str:
    """How the operator raises a quota or widens an allow-list: its key in the tenant's policy."""
    return f"the operator raises it with {key} in the tenant's policy (the chart's api.tenantPolicies)"
