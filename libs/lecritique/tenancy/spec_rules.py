"""What a tenant's spec may make the platform run, read, write or call: one rule per kind of field.

Every spec field that names a path, a module, a URL, a Secret or a variable carries a marker,
``json_schema_extra={"x-tenant-rule": <rule>}``, and the server checks its value under that rule
(:func:`spec_violations` walks the validated spec model, so a marked field in any section is
checked without being listed here). ``tests/unit/tenancy/test_spec_rules.py`` walks the spec schema
and fails when a field that looks like a path, module or URL carries no marker, or a marker that
has no rule below. The local CLI (``lecritique run``) applies none of this: there the user is the
operator.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lecritique.tenancy.policy import (
    ENV_NAME,
    TenantPolicy,
    Violation,
    env_prefix,
    is_reserved_env,
    path_under,
)
from lecritique.tenancy.quotas import quota_violations
from lecritique.tenancy.sandbox_settings import sandbox_violations
from lecritique.tenancy.tracker_names import tracker_name_violations
from lecritique.tenancy.urls import endpoint_allowed
from lecritique.tenancy.work import ONE_TURN, Sizes

RULE_KEY = "x-tenant-rule"
"""The marker key in a field's ``json_schema_extra`` (also visible in the API's OpenAPI schema)."""
UNSET_OUTSIDE_KEY = "x-unset-is-outside-run-dir"
"""Marker: leaving this folder unset writes outside the run directory (trackio's shared store)."""
WANDB_SERVER = "https://api.wandb.ai"
"""Where W&B ``mode: online`` sends metrics; a tenant needs it among its ``tracker_endpoints``."""
DATASET_ROOTS_ENV = "LECRITIQUE_DATASET_ROOTS"
"""The variable launchers give a run's environment verifier: its tenant's dataset roots, which
:mod:`lecritique.envs.dataset_files` (``ROOTS_ENV``, the same name) checks where a file is opened."""
ROOTS_WIDENED_BY: dict[str, str] = {
    "model_path": "an operator widens them with modelRoots in the tenant's policy "
    "(LECRITIQUE_API_TENANT_POLICIES, or the chart's api.tenantPolicies)",
    "dataset_path": "an operator widens them with datasetRoots in the tenant's policy "
    "(LECRITIQUE_API_TENANT_POLICIES, or the chart's api.tenantPolicies)",
}
"""How each kind of root is widened, as a refusal names it (an API the chart or variables configure)."""
DEV_ROOTS_WIDENED_BY: dict[str, str] = {
    "model_path": "widen them by restarting with `lecritique api serve --dev --model-root PATH` "
    "(repeatable), or put the model under the first one (`lecritique models stage DIR --tenant dev "
    "--root RUNS`, RUNS the server's runs folder, `runs` by default)",
    "dataset_path": "widen them by restarting with `lecritique api serve --dev --dataset-root PATH` "
    "(repeatable), or copy the file under the first one",
}
"""The same for ``lecritique api serve --dev``, whose own flags widen them."""
RUN_DIR_FOLDER = (
    "folders must be inside the experiment's run directory: a relative path without '..' (e.g. 'tensorboard')"
)

RULES: dict[str, str] = {
    "model_path": "a model directory under <models_root>/<tenant> or the policy's model_roots",
    "dataset_path": "an absolute dataset path under <datasets_root>/<tenant> or the policy's dataset_roots, "
    "symlinks resolved at submission and again where the file is opened",
    "verifier_entry_point": "a python verifier 'module:function' named exactly in the policy's verifier_entry_points (default: none)",
    "sandbox_package": "sandboxed code imports only the default packages and the policy's sandbox_packages",
    "sandbox_settings": "the code sandbox's isolation and limits: at least the policy's sandbox.namespaces mode and "
    "audit hook, each limit at most the policy's sandbox maximum (default: the sandbox's own defaults)",
    "tracker_dir": "a tracker folder relative to (inside) the experiment's run directory",
    "tracker_uri": "unset (a file store in the run directory) or an http(s) URL under the policy's tracker_endpoints, "
    "compared once normalised",
    "wandb_mode": f"offline or disabled, or online when {WANDB_SERVER} is among the policy's tracker_endpoints",
    "llm_endpoint": "an LLM base URL under the policy's llm_endpoints, compared once normalised (default: none)",
    "secret_name": "a Kubernetes Secret named <tenant>-* or in the policy's secrets",
    "env_name": "a variable named <TENANT>_* or in the policy's secrets, never one the platform sets",
}
"""Every rule a marker may name -> what it allows (the threat model in docs/security.md lists them)."""


@dataclass(frozen=True)
class Context:
    """What the rules compare a tenant's values with."""

    tenant: str
    policy: TenantPolicy
    model_roots: list[str]
    dataset_roots: list[str]
    secrets_are: Literal["kubernetes", "environment"]
    roots_widened_by: Mapping[str, str] = dataclass_field(default_factory=lambda: ROOTS_WIDENED_BY)
    """Rule (``model_path``, ``dataset_path``) -> how its roots are widened, appended to a refusal."""


def rule_of(info: FieldInfo) -> str | None:
    extra = info.json_schema_extra
    return str(extra[RULE_KEY]) if isinstance(extra, dict) and RULE_KEY in extra else None


def model_rule_of(model: type[BaseModel]) -> str | None:
    """The rule a model class carries itself (``model_config["json_schema_extra"]``): every field
    holding one is checked under it."""
    extra = model.model_config.get("json_schema_extra")
    return str(extra[RULE_KEY]) if isinstance(extra, dict) and RULE_KEY in extra else None


def marked_fields(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, str, Any, FieldInfo]]:
    """(dotted path, rule, value, field) of every marked field of a validated model, at any depth
    (a field whose value is of a marked model class counts as marked)."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        here = f"{prefix}{name}"
        for rule in (rule_of(info), model_rule_of(type(value)) if isinstance(value, BaseModel) else None):
            if rule is not None:
                yield here, rule, value, info
        yield from _nested(value, here)


def _nested(value: Any, here: str) -> Iterator[tuple[str, str, Any, FieldInfo]]:
    if isinstance(value, BaseModel):
        yield from marked_fields(value, here + ".")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _nested(item, f"{here}.{index}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _nested(item, f"{here}.{key}")


def marked_values(model: BaseModel, rule: str) -> list[tuple[str, str]]:
    """(dotted path, value) of every string a spec holds under one rule (launchers re-check them)."""
    return [
        (field, value)
        for field, found, value, _ in marked_fields(model)
        if found == rule and isinstance(value, str)
    ]


def _model_path(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if value is None or path_under(value, ctx.model_roots):
        return []
    return [
        Violation(
            field,
            f"model paths must lie under {ctx.model_roots}; {ctx.roots_widened_by['model_path']}",
            "forbidden",
        )
    ]


def _dataset_path(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if path_under(value, ctx.dataset_roots):
        return []
    return [
        Violation(
            field,
            f"dataset paths must be absolute and lie under {ctx.dataset_roots}; "
            f"{ctx.roots_widened_by['dataset_path']}",
            "forbidden",
        )
    ]


def _entry_point(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if value in ctx.policy.verifier_entry_points:
        return []
    allowed = list(ctx.policy.verifier_entry_points)
    return [
        Violation(
            field,
            f"verifier entry points this tenant may use: {allowed} (an operator allows exact "
            "'module:function' names per tenant)",
            "forbidden",
        )
    ]


def _sandbox_packages(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    allowed = sorted({*(info.default or ()), *ctx.policy.sandbox_packages})
    if set(value) <= set(allowed):
        return []
    return [Violation(field, f"sandbox packages this tenant may use: {allowed}", "forbidden")]


def _sandbox_settings(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    return sandbox_violations(field, value, ctx.policy)


def _tracker_dir(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if value is None:
        outside = isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get(UNSET_OUTSIDE_KEY)
        return (
            [Violation(field, f"{RUN_DIR_FOLDER}; unset, it is a store shared by every run", "forbidden")]
            if outside
            else []
        )
    parts = value.replace("\\", "/").split("/")
    clean = value.strip() and not value.startswith(("/", "~")) and ".." not in parts and value.isprintable()
    return [] if clean else [Violation(field, RUN_DIR_FOLDER, "forbidden")]


def _tracker_servers(ctx: Context) -> str:
    return f"tracker servers this tenant may use: {list(ctx.policy.tracker_endpoints)}"


def _tracker_uri(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if value is None or endpoint_allowed(value, ctx.policy.tracker_endpoints):
        return []
    return [
        Violation(
            field,
            f"{_tracker_servers(ctx)}; unset, MLflow keeps a file store in the run directory",
            "forbidden",
        )
    ]


def _wandb_mode(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if value in ("offline", "disabled") or endpoint_allowed(WANDB_SERVER, ctx.policy.tracker_endpoints):
        return []
    return [
        Violation(
            field,
            f"{_tracker_servers(ctx)}; online (or unset) sends to {WANDB_SERVER}: set mode offline",
            "forbidden",
        )
    ]


def _llm_endpoint(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if endpoint_allowed(value, ctx.policy.llm_endpoints):
        return []
    return [
        Violation(field, f"LLM endpoints this tenant may call: {list(ctx.policy.llm_endpoints)}", "forbidden")
    ]


def _secret_name(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if (
        value is None
        or ctx.secrets_are != "kubernetes"
        or value.startswith(f"{ctx.tenant}-")
        or value in ctx.policy.secrets
    ):
        return []
    return [
        Violation(
            field, f"Secrets this tenant may use: {ctx.tenant}-* and {list(ctx.policy.secrets)}", "forbidden"
        )
    ]


def _env_name(field: str, value: Any, info: FieldInfo, ctx: Context) -> list[Violation]:
    if value is None:
        return []
    if not ENV_NAME.fullmatch(value) or is_reserved_env(value):
        return [
            Violation(
                field,
                "must be an upper-case variable name that the platform does not set itself "
                "(REDIS_URL, PATH, LECRITIQUE_*, PYTHON*, ... are reserved)",
                "forbidden",
            )
        ]
    prefix = env_prefix(ctx.tenant)
    if ctx.secrets_are == "environment" and not (value.startswith(prefix) or value in ctx.policy.secrets):
        return [
            Violation(
                field, f"variables this tenant may use: {prefix}* and {list(ctx.policy.secrets)}", "forbidden"
            )
        ]
    return []


CHECKS: dict[str, Callable[[str, Any, FieldInfo, Context], list[Violation]]] = {
    "model_path": _model_path,
    "dataset_path": _dataset_path,
    "verifier_entry_point": _entry_point,
    "sandbox_package": _sandbox_packages,
    "sandbox_settings": _sandbox_settings,
    "tracker_dir": _tracker_dir,
    "tracker_uri": _tracker_uri,
    "wandb_mode": _wandb_mode,
    "llm_endpoint": _llm_endpoint,
    "secret_name": _secret_name,
    "env_name": _env_name,
}
assert CHECKS.keys() == RULES.keys()


def tenant_dataset_roots(tenant: str, policy: TenantPolicy, datasets_root: str) -> list[str]:
    """``<datasets_root>/<tenant>`` and the policy's ``dataset_roots``."""
    return [posixpath.join(datasets_root, tenant), *policy.dataset_roots]


def spec_violations(
    spec: BaseModel,
    tenant: str,
    policy: TenantPolicy,
    *,
    models_root: str,
    datasets_root: str,
    secrets_are: Literal["kubernetes", "environment"],
    roots_widened_by: Mapping[str, str] = ROOTS_WIDENED_BY,
    sizes: Sizes = ONE_TURN,
) -> list[Violation]:
    """Everything in a validated spec this tenant may not do: each marked field under its rule, the
    names its runs take on shared tracker servers, then the quotas (``roots_widened_by``: how a
    refusal of a model or dataset path says its roots are widened; ``sizes``: the spec's longest
    episode, which tokens per step and replay memory are counted with)."""
    ctx = Context(
        tenant,
        policy,
        [posixpath.join(models_root, tenant), *policy.model_roots],
        tenant_dataset_roots(tenant, policy, datasets_root),
        secrets_are,
        roots_widened_by,
    )
    found: list[Violation] = []
    for field, rule, value, info in marked_fields(spec):
        found.extend(CHECKS[rule](field, value, info, ctx))
    data = spec.model_dump(mode="json")
    return found + tracker_name_violations(data, tenant) + quota_violations(data, policy, sizes)
