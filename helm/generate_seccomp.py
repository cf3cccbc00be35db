"""Write the environment verifier's seccomp profile (helm/lecritique/files/sandbox-namespaces.json):
the profile under which the CodeIO sandbox keeps its namespaces inside a container.

    python helm/generate_seccomp.py

Kubernetes' ``RuntimeDefault`` under containerd (and Docker's default profile) lets a container call
``unshare``, ``mount`` and ``umount2`` only when it holds CAP_SYS_ADMIN, and ``pivot_root`` never.
lecritique's pods drop every capability, so the sandbox (``lecritique.envs._sandbox``) finds its
namespaces refused and runs with its base layers only. The profile built here is that default,
resolved for a container without capabilities, plus the calls of the sandbox's set-up
(``SANDBOX_SYSCALLS``): ``unshare`` (``namespaces.enter``), ``mount``, ``umount2`` and
``pivot_root`` (``filesystem.build``). ``clone`` keeps the default's rule (no namespace flags): the
sandbox unshares, then forks plainly.

The default comes from moby's ``profiles/seccomp/default.json`` (``helm/seccomp/moby-default.json``,
github.com/moby/profiles at commit cd3bed8, Apache-2.0), in moby's format: rules conditional on capabilities and architectures. containerd reads a ``Localhost``
profile as the OCI runtime spec's ``LinuxSeccomp`` (no conditions: a conditional rule would apply
unconditionally), so ``resolve_default`` evaluates the conditions for a container without
capabilities on x86-64 and arm64, and the result is valid for containerd, CRI-O and runc alike.

What the additions give away: any process of the container may create user, mount, PID, network,
IPC and UTS namespaces, and mount inside namespaces it owns (the kernel refuses it mounts in the
container's own namespaces, where it has no capability). That is kernel surface, the price of the
sandbox's private root; the sandbox's own filter denies all of them again to the code it runs.

tests/unit/chart/test_sandbox_profiles.py checks the committed file equals this script's output, and
tests/integration/containers/test_sandbox_seccomp.py runs the sandbox under it with podman.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MOBY_DEFAULT = ROOT / "helm" / "seccomp" / "moby-default.json"
PROFILE_FILE = ROOT / "helm" / "lecritique" / "files" / "sandbox-namespaces.json"


SANDBOX_SYSCALLS = ("mount", "pivot_root", "umount2", "unshare")
"""What the sandbox's set-up calls that the runtime's default refuses to a container without capabilities."""
CONTAINERD_EXTRAS = ("lsm_get_self_attr", "lsm_list_modules", "lsm_set_self_attr")
"""Allowed unconditionally by containerd's built-in default but only with CAP_SYS_ADMIN in moby's JSON:
added, so that the profile allows everything either default allows."""
TARGET_ARCHES = {
    "SCMP_ARCH_X86_64": ("amd64", "x86", "x32"),
    "SCMP_ARCH_AARCH64": ("arm64", "arm"),
}
"""Native architecture -> the Go architecture names (moby's ``includes.arches``) its processes may use."""
_RULE_KEYS = ("names", "action", "errnoRet", "args")


def _applies(rule: dict[str, Any], arches: set[str]) -> bool:
    """Whether a moby rule holds for a container without capabilities on one of ``arches``."""
    includes, excludes = rule.get("includes") or {}, rule.get("excludes") or {}
    if includes.get("caps"):
        return False
    if includes.get("arches") and not arches & set(includes["arches"]):
        return False
    return not (excludes.get("arches") and arches <= set(excludes["arches"]))


def resolve_default(moby_profile: dict[str, Any]) -> dict[str, Any]:
    """moby's default profile as the OCI ``LinuxSeccomp`` a container without capabilities gets on
    x86-64 and arm64 (``minKernel`` conditions are taken as met: every supported kernel is newer)."""
    arches = {name for names in TARGET_ARCHES.values() for name in names}
    architectures = [
        architecture
        for entry in moby_profile["archMap"]
        if entry["architecture"] in TARGET_ARCHES
        for architecture in (entry["architecture"], *entry.get("subArchitectures", []))
    ]
    syscalls = []
    for rule in moby_profile["syscalls"]:
        if _applies(rule, arches):
            syscalls.append({key: rule[key] for key in _RULE_KEYS if rule.get(key) not in (None, [])})
    profile: dict[str, Any] = {"defaultAction": moby_profile["defaultAction"]}
    if "defaultErrnoRet" in moby_profile:
        profile["defaultErrnoRet"] = moby_profile["defaultErrnoRet"]
    return {**profile, "architectures": architectures, "syscalls": syscalls}


def sandbox_profile(moby_profile: dict[str, Any]) -> dict[str, Any]:
    """The shipped profile: ``resolve_default`` plus ``SANDBOX_SYSCALLS`` (and containerd's extras)."""
    profile = resolve_default(moby_profile)
    additions = {"names": sorted({*SANDBOX_SYSCALLS, *CONTAINERD_EXTRAS}), "action": "SCMP_ACT_ALLOW"}
    return {**profile, "syscalls": [*profile["syscalls"], additions]}


def render() -> str:
    return json.dumps(sandbox_profile(json.loads(MOBY_DEFAULT.read_text())), indent=1) + "\n"


def main() -> None:
    PROFILE_FILE.parent.mkdir(parents=True, exist_ok=True)
    PROFILE_FILE.write_text(render())
    print(f"wrote {PROFILE_FILE}")


if __name__ == "__main__":
    main()
