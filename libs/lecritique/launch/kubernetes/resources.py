"""Requests and limits of one experiment container: the chart's defaults merged with the spec's placement."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from lecritique.config.experiment import ExperimentSpec
from lecritique.config.findings import Finding, SpecRefused
from lecritique.config.placement import GPU_RESOURCE, ComponentPlacement, is_extended_resource, parse_quantity
from lecritique.launch.components import COMPONENTS, Component, ComponentDefaults
from lecritique.launch.kubernetes.multinode import trainer_layout, trainer_processes


def merge_resources(
    component: Component, chart: ComponentDefaults, placed: ComponentPlacement, spec: ExperimentSpec
) -> dict[str, dict[str, str]]:
    """Chart requests/limits overridden key by key by the spec's; checked like the API server would.

    Raises :class:`SpecRefused` with every placement field at fault (:func:`checked_resources`).
    """
    merged, refused = checked_resources(component, chart, placed, spec)
    if refused:
        raise SpecRefused(refused)
    return merged


def checked_resources(
    component: Component, chart: ComponentDefaults, placed: ComponentPlacement, spec: ExperimentSpec
) -> tuple[dict[str, dict[str, str]], list[Finding]]:
    """The merged requests/limits and what the cluster refuses of them (``cluster`` findings): a
    request above its limit, a trainer whose processes do not fill whole pods or whose pods get
    other than one GPU per process.

    Extended resources (``nvidia.com/gpu``) get request == limit, since Kubernetes refuses anything else.
    """
    field = f"placement.{COMPONENTS[component].placement_key}.resources"
    requests = dict(chart.resources.requests)
    limits = dict(chart.resources.limits)
    if placed.resources is not None:
        requests.update(placed.resources.requests)
        limits.update(placed.resources.limits)
        # The spec's value of an extended resource wins over the chart's, whichever side it set.
        for name in set(placed.resources.requests) | set(placed.resources.limits):
            if is_extended_resource(name):
                value = placed.resources.limits.get(name, placed.resources.requests.get(name))
                assert value is not None
                requests[name] = limits[name] = value
    for name in list(limits):
        if is_extended_resource(name):
            requests[name] = limits[name]
    for name in list(requests):
        if is_extended_resource(name):
            limits[name] = requests[name]
    refused = [
        Finding(
            f"{field}.requests.{name}",
            "error",
            f"{field}.requests.{name}: request {request} exceeds the limit {limits[name]}",
            context="cluster",
        )
        for name, request in requests.items()
        if name in limits and parse_quantity(request) > parse_quantity(limits[name])
    ]
    found = trainer_processes(spec, component)
    if found is not None:
        try:
            processes = trainer_layout(
                spec, component, chart.gpus_per_node
            ).per_pod  # torchrun processes of one pod
        except SpecRefused as layout:
            return {"requests": requests, "limits": limits}, refused + layout.findings
        placed_gpus = placed.resources is not None and (
            GPU_RESOURCE in placed.resources.limits or GPU_RESOURCE in placed.resources.requests
        )
        if not placed_gpus and parse_quantity(limits.get(GPU_RESOURCE, "0")) > 0:
            # A GPU pool by default: one GPU per torchrun process of the pod.
            requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(processes)
        gpus = parse_quantity(limits.get(GPU_RESOURCE, "0"))
        if gpus > 0 and gpus != processes:
            refused.append(
                Finding(
                    f"{field}.limits.{GPU_RESOURCE}",
                    "error",
                    f"{field}.limits.{GPU_RESOURCE}: {limits[GPU_RESOURCE]} GPUs but each {component.value} pod runs "
                    f"{processes} processes ({found[2]}.processes over its pods); torchrun runs one process per GPU",
                    context="cluster",
                )
            )
    return {"requests": requests, "limits": limits}, refused


def resource_totals(objects: list[dict[str, Any]], resource: str) -> tuple[Decimal, Decimal]:
    """Requests and limits of one resource (``cpu``, ``memory``) over every pod of the workloads
    (replicas x per pod). As Kubernetes defaults them, a missing request is the limit; a missing limit
    counts as the request (the chart's defaults give every component both)."""
    requested, limited = Decimal(0), Decimal(0)
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        replicas = int(obj["spec"].get("replicas", 1))
        for container in obj["spec"]["template"]["spec"]["containers"]:
            resources = container.get("resources", {})
            limit = resources.get("limits", {}).get(resource)
            request = resources.get("requests", {}).get(resource, limit)
            request_value = parse_quantity(str(request)) if request is not None else Decimal(0)
            requested += replicas * request_value
            limited += replicas * (parse_quantity(str(limit)) if limit is not None else request_value)
    return requested, limited
