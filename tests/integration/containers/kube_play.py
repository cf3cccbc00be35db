"""Play a cluster's objects on podman: the pod specs a cluster gets, translated only where podman
lacks a Kubernetes feature.

``podman kube play`` (4.3) runs Pods and Deployments from Kubernetes YAML; every pod gets its own
network namespace and address on a podman bridge network. What it lacks, and how it is bridged:

* StatefulSets and Jobs: each workload becomes the Pods its controller would create (StatefulSet
  ``NAME-0..N-1``, Deployment ``NAME-0..N-1``, Job ``NAME``), with the template's spec unchanged.
* Services (no kube-proxy, no cluster DNS): every pod gets a static address, and each headless
  Service name (short and ``NAME.NAMESPACE.svc.cluster.local``) is written into every pod's
  ``/etc/hosts`` (``hostAliases``) as the addresses of the pods its selector matches: what the
  cluster's DNS would answer for a headless Service.
* PersistentVolumeClaims: the ReadWriteMany weight claim is one host folder (``hostPath``) that
  every pod mounts, as every pod of an experiment mounts the same claim.
* Env: ``$(VAR)`` references in env values, command and args are expanded here, as the kubelet
  would (podman passes them through literally), and ``fieldRef: status.podIP`` becomes the pod's static address (podman refuses that
  field). Secrets are podman secrets holding the Secret's data (a JSON map of base64 values), which
  is where ``kube play`` resolves ``secretKeyRef``.
* Ports: podman 4.3 publishes every ``containerPort`` on the host (the second pod's 9090 collides);
  in a cluster they only name the pod's ports. The list is dropped and probes get the numbers of
  named ports; every pod is still reached at its own address.
* gRPC probes: podman has none and ignores them (no health check); the orchestrator's own retries
  cover start-up, as the readiness gate would.
* NetworkPolicies, PodDisruptionBudgets and the scheduler (resources, node selectors,
  tolerations) have no podman counterpart and are not exercised.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def podman(
    *args: str, timeout: float = 120, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, input=input, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr[-3000:]}")
    return result


@dataclass
class Pod:
    """One pod to play: its name, labels, template spec and static address."""

    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    ip: str
    namespace: str
    component: str = ""

    def container(self, name: str | None = None) -> str:
        """The podman name of one of its containers (``kube play`` names them POD-CONTAINER)."""
        return f"{self.name}-{name or self.spec['containers'][0]['name']}"


@dataclass
class Cluster:
    """Objects rendered for a cluster, played as pods on one podman network."""

    network: str
    subnet: str
    objects: list[dict[str, Any]]
    weights_dir: Path
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    """Secret name -> its string data (podman secrets, and the values ``$(VAR)`` expands)."""
    pods: list[Pod] = field(default_factory=list)

    def __post_init__(self) -> None:
        hosts = ipaddress.ip_network(self.subnet).hosts()
        next(hosts)  # the gateway
        next(hosts)
        for obj in self.objects:
            for name, template in _controller_pods(obj):
                self.pods.append(
                    Pod(
                        name,
                        dict(template["metadata"].get("labels", {})),
                        copy.deepcopy(template["spec"]),
                        str(next(hosts)),
                        obj["metadata"].get("namespace", "default"),
                        template["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""),
                    )
                )

    def pod(self, component: str) -> Pod:
        [found] = [p for p in self.pods if p.component == component]
        return found

    def host_aliases(self) -> list[dict[str, Any]]:
        """What cluster DNS answers for each Service: the addresses of the pods it selects."""
        by_ip: dict[str, list[str]] = {}
        for service in (o for o in self.objects if o["kind"] == "Service"):
            selector = service["spec"].get("selector") or {}
            name, namespace = service["metadata"]["name"], service["metadata"].get("namespace", "default")
            for pod in self.pods:
                if selector and all(pod.labels.get(k) == v for k, v in selector.items()):
                    by_ip.setdefault(pod.ip, []).extend(
                        [
                            name,
                            f"{name}.{namespace}",
                            f"{name}.{namespace}.svc",
                            f"{name}.{namespace}.svc.cluster.local",
                        ]
                    )
        return [{"ip": ip, "hostnames": names} for ip, names in sorted(by_ip.items())]

    def create(self) -> None:
        podman("network", "create", "--subnet", self.subnet, self.network)
        for name, data in self.secrets.items():
            encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
            podman("secret", "create", name, "-", input=json.dumps(encoded))

    def play(self, pod: Pod, work: Path) -> None:
        """Start one pod (its ConfigMaps in the same YAML) at its static address."""
        spec = self.translated(pod)
        config_maps = [o for o in self.objects if o["kind"] == "ConfigMap"]
        document = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod.name, "labels": pod.labels},
            "spec": spec,
        }
        path = work / f"{pod.name}.yaml"
        path.write_text(yaml.safe_dump_all([*config_maps, document], sort_keys=False))
        podman("kube", "play", "--network", self.network, "--ip", pod.ip, str(path), timeout=300)

    def translated(self, pod: Pod) -> dict[str, Any]:
        spec = copy.deepcopy(pod.spec)
        spec["hostAliases"] = self.host_aliases()
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                del volume["persistentVolumeClaim"]
                volume["hostPath"] = {"path": str(self.weights_dir), "type": "Directory"}
        for container in spec["containers"]:
            _unpublished(container)
            known: dict[str, str] = {}
            container["env"] = self._expanded(container.get("env", []), pod, known)
            for key in ("command", "args"):
                if key in container:
                    container[key] = [_expand(word, known) for word in container[key]]
        return spec

    def _expanded(self, env: list[dict[str, Any]], pod: Pod, known: dict[str, str]) -> list[dict[str, Any]]:
        """Env values with ``$(VAR)`` of earlier variables expanded, as the kubelet does (``known``
        collects every variable's value, for the command and args)."""
        out = []
        for item in env:
            item = dict(item)
            if "value" in item:
                item["value"] = _expand(item["value"], known)
                known[item["name"]] = item["value"]
            else:
                ref = item.get("valueFrom", {})
                if "secretKeyRef" in ref:
                    known[item["name"]] = self.secrets[ref["secretKeyRef"]["name"]][
                        ref["secretKeyRef"]["key"]
                    ]
                elif ref.get("fieldRef", {}).get("fieldPath") == "status.podIP":
                    item = {"name": item["name"], "value": pod.ip}
                    known[item["name"]] = pod.ip
                elif ref.get("fieldRef", {}).get("fieldPath") == "metadata.name":
                    known[item["name"]] = pod.name
            out.append(item)
        return out

    def inspect_ip(self, pod: Pod) -> str:
        """The address podman gave the pod (its infra container's, on this network)."""
        found = json.loads(
            podman("inspect", pod.container(), "--format", "{{json .NetworkSettings.Networks}}").stdout
        )
        return str(found[self.network]["IPAddress"])

    def remove(self) -> None:
        # Clients first, Redis last (else they wait on it while being stopped).
        for pod in reversed(self.pods):
            podman("pod", "rm", "--force", "--time", "5", pod.name, check=False, timeout=120)
        for name in self.secrets:
            podman("secret", "rm", name, check=False)
        podman("network", "rm", "--force", self.network, check=False)


def _unpublished(container: dict[str, Any]) -> None:
    """Drop ``ports`` (podman 4.3 publishes each containerPort on the host, where a second pod's
    9090 collides; in a cluster they only name the ports) and give probes the numbers of named ports."""
    numbers = {port["name"]: port["containerPort"] for port in container.pop("ports", []) if "name" in port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        for action in container.get(probe, {}).values():
            if isinstance(action, dict) and action.get("port") in numbers:
                action["port"] = numbers[action["port"]]


def _expand(text: str, known: dict[str, str]) -> str:
    """``$(NAME)`` of a known variable replaced by its value; others left as they are (as Kubernetes does)."""
    return REFERENCE.sub(lambda m: known.get(m.group(1), m.group(0)), text)


def _controller_pods(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The pods a controller creates for a workload (a Pod as it is)."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind == "Pod":
        return [(name, {"metadata": obj["metadata"], "spec": obj["spec"]})]
    if kind in ("Deployment", "StatefulSet"):
        return [(f"{name}-{i}", obj["spec"]["template"]) for i in range(int(obj["spec"].get("replicas", 1)))]
    if kind == "Job":
        return [(name, obj["spec"]["template"])]
    return []
