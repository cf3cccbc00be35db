"""The CodeIO sandbox inside a container, under the runtime's default seccomp profile and under the
profile the chart ships for the environment verifier (helm/lecritique/files/sandbox-namespaces.json).

Each test runs ``active_layers()`` and one sandboxed call in a podman container (runc), as uid
10001 with every capability dropped, no_new_privs and a read-only root filesystem, like the
verifier's pod. The container's root holds this machine's Python installation and the checkout
(bind-mounted read-only at their own paths), so no image needs building.

* Kubernetes' ``RuntimeDefault`` under containerd is moby's default profile for a container without
  capabilities (``resolve_default`` of ``helm/generate_seccomp.py``; podman's own default, which
  CRI-O also uses, allows unshare): ``unshare`` is refused and the sandbox runs with its base
  layers only, where the code sees the container's files and reads the environment of the
  container's processes of its uid (a canary variable of the container).
* The shipped profile in a user namespace with ``/proc`` unmasked (what the chart sets with
  ``environmentVerifier.sandbox.namespaces``: ``hostUsers: false``, ``procMount: Unmasked``): every
  namespace layer is verified and the code sees only the sandbox's private root and processes.

The chart's ``sandboxProfiles.install`` DaemonSet runs its script here too (root without
capabilities, the kubelet's seccomp folder a host folder), and the profile it installs is the one the
second test runs under. The AppArmor profile the chart ships compiles with ``apparmor_parser``.

Needs podman and apparmor_parser (``make test`` installs them: ``make container-tools``); skipped
only where podman is missing or cannot run containers at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lecritique.envs._sandbox import protocol
from tests.helm_support import CHART, ROOT, helm_script, one, render_objects

pytestmark = [pytest.mark.slow(seconds=60), pytest.mark.timeout(600)]

PROFILE = CHART / "files" / "sandbox-namespaces.json"
APPARMOR = CHART / "files" / "lecritique-sandbox.apparmor"
MOBY_DEFAULT = ROOT / "helm" / "seccomp" / "moby-default.json"
UID = 10001
USER_NAMESPACE_BASE = 200_000
"""Host uid of the container's root in a pod user namespace."""
PROBE = """
import json, os
from lecritique.envs.sandbox import Sandbox, active_layers
layers = active_layers()
seen = Sandbox().call(
    "import os\\n"
    "def f(path):\\n"
    "    environments = []\\n"
    "    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\\n"
    "        try:\\n"
    "            environments.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\\n"
    "        except OSError:\\n"
    "            pass\\n"
    "    return [os.path.exists(path), any('CANARY=' in text for text in environments)]\\n",
    "f",
    {"path": os.environ["CHECKOUT"]},
)
checkout, canary = seen.value if seen.ok else (None, None)
print("RESULT " + json.dumps({"layers": list(layers), "checkout_visible": checkout, "canary_read": canary, "ok": seen.ok, "error": seen.error}))
"""


def _skip_without_containers() -> None:
    if shutil.which("podman") is None:
        pytest.skip(
            "podman is not installed (make container-tools installs Debian's podman as root): no containers here"
        )
    info = subprocess.run(["podman", "info"], capture_output=True, text=True, timeout=120, check=False)
    if info.returncode != 0:
        pytest.skip(f"podman cannot run containers here: {info.stderr.strip()[-400:]}")


def _root_filesystem(root: Path, owner: int) -> list[str]:
    """Make ``root`` an empty root with this machine's top-level links (``/lib -> usr/lib``) and the
    mount points, owned by ``owner`` (the container's root on the host); the mounts that fill it."""
    for name in ("proc", "sys", "dev", "run", "etc"):
        (root / name).mkdir()
    (root / "tmp").mkdir()
    os.chmod(root / "tmp", 0o1777)
    sources: list[str] = []
    for top in ("usr", "bin", "sbin", "lib", "lib64", "lib32"):
        host = Path("/") / top
        if host.is_symlink():
            (root / top).symlink_to(os.readlink(host))
        elif host.is_dir():
            sources.append(str(host))
    owned = {
        os.path.realpath(sys.base_prefix),
        os.path.realpath(sys.prefix),
        os.path.realpath(sysconfig.get_paths()["purelib"]),
        str(ROOT),
    }
    sources += [
        path
        for path in sorted(owned)
        if not any(path.startswith(other + "/") for other in [*owned, *sources] if other != path)
    ]
    mounts: list[str] = []
    for source in sources:
        (root / source.lstrip("/")).mkdir(parents=True, exist_ok=True)
        mounts += ["-v", f"{source}:{source}:ro"]
    if Path("/etc/ld.so.cache").exists():
        (root / "etc" / "ld.so.cache").touch()
        mounts += ["-v", "/etc/ld.so.cache:/etc/ld.so.cache:ro"]
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.chown(path, owner, owner)
            if path.is_dir() and path.name != "tmp":
                os.chmod(path, 0o755)
    return mounts


@pytest.fixture
def root() -> Iterator[Path]:
    """The container's root folder, in a folder that a container's own root (a user namespace) may traverse."""
    folder = Path(tempfile.mkdtemp(prefix="lecritique-rootfs-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _sandbox_in_container(root: Path, seccomp: Path, *options: str, owner: int = 0) -> dict[str, Any]:
    """The probe's outcome in a container of ``root`` under ``seccomp``; ``owner``: the host uid of
    the container's root (a user namespace's), which creates the runtime's mount points in ``root``."""
    _skip_without_containers()
    mounts = _root_filesystem(root, owner)
    command = [
        "podman",
        "run",
        "--rm",
        "--network=none",
        f"--user={UID}:{UID}",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--security-opt=seccomp={seccomp}",
        *options,
        "--read-only",
        *mounts,
        "-e",
        f"PYTHONPATH={ROOT / 'libs'}",
        "-e",
        f"CHECKOUT={ROOT}",
        "-e",
        "TMPDIR=/tmp",
        "-e",
        "CANARY=the verifier's own secret",
        "--workdir=/tmp",
        "--rootfs",
        str(root),
        sys.executable,
        "-c",
        PROBE,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, (
        f"podman run failed ({result.returncode}):\n{result.stderr[-3000:]}"
    )
    return dict(json.loads(lines[-1].removeprefix("RESULT ")))


def test_under_the_runtime_default_the_sandbox_has_its_base_layers_only(tmp_path: Path, root: Path) -> None:
    default = tmp_path / "runtime-default.json"
    moby_default = json.loads(MOBY_DEFAULT.read_text())
    default.write_text(json.dumps(helm_script("generate_seccomp").resolve_default(moby_default)))
    outcome = _sandbox_in_container(root, default)
    assert outcome["ok"], outcome["error"]
    assert set(outcome["layers"]) == {*protocol.BASE_LAYERS, protocol.AUDIT_HOOK}
    # What RuntimeDefault gives (docs/security.md): the container's files, and the processes of its uid.
    assert outcome["checkout_visible"] is True and outcome["canary_read"] is True


PODMAN_DEFAULT = Path("/usr/share/containers/seccomp.json")
"""podman's (and CRI-O's) own default profile: unshare allowed, /proc still masked by the runtime."""


def test_where_unshare_is_allowed_but_proc_is_masked_auto_falls_back_to_the_base_layers(root: Path) -> None:
    """Under podman's or CRI-O's default profile the sandbox may unshare but not mount a new /proc
    over the runtime's masked one: every call failed ("mount proc: Operation not permitted").
    ``auto`` now notices it once, from a probe of its own, and runs with the base layers."""
    if not PODMAN_DEFAULT.exists():
        pytest.skip(f"{PODMAN_DEFAULT} is missing: podman's containers-common is not installed")
    outcome = _sandbox_in_container(root, PODMAN_DEFAULT)
    assert outcome["ok"], outcome["error"]
    assert set(outcome["layers"]) == {*protocol.BASE_LAYERS, protocol.AUDIT_HOOK}


def _install_with_the_daemonset(root: Path, kubelet_seccomp: Path) -> Path:
    """Run the chart's DaemonSet container as a container (its script, user, capabilities and mounts);
    the profile file it writes into ``kubelet_seccomp`` once it has written it."""
    values = {"sandboxProfiles": {"install": True}, "environmentVerifier": {"sandbox": {"namespaces": True}}}
    objects = render_objects(values)
    pod = one(objects, "DaemonSet", "-sandbox-profiles")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    profiles = kubelet_seccomp.parent / "configmap"
    profiles.mkdir()
    for key, text in one(objects, "ConfigMap", "-sandbox-profiles")["data"].items():
        (profiles / key).write_text(text)
    kubelet_seccomp.mkdir(mode=0o755)
    mounts = _root_filesystem(root, 0)
    assert pod["securityContext"]["runAsUser"] == 0 and container["securityContext"]["capabilities"][
        "drop"
    ] == ["ALL"]
    name = f"lecritique-sandbox-profiles-{os.getpid()}"
    run = subprocess.run(
        [
            "podman", "run", "-d", "--name", name, "--network=none", "--user=0:0", "--cap-drop=all",
            "--security-opt=no-new-privileges", "--read-only", *mounts,
            "-v", f"{profiles}:/profiles:ro", "-v", f"{kubelet_seccomp}:/host-seccomp",
            *[f"--env={item['name']}={item['value']}" for item in container["env"]],
            "--rootfs", str(root), *container["command"],
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    installed = kubelet_seccomp / "lecritique" / "sandbox-namespaces.json"
    try:
        for _ in range(600):
            if installed.exists():
                break
            time.sleep(0.1)
        logs = subprocess.run(
            ["podman", "logs", name], capture_output=True, text=True, timeout=60, check=False
        )
        assert installed.exists(), logs.stdout + logs.stderr
        state = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Running}}", name],
            capture_output=True,
            text=True,
            check=False,
        )
        assert state.stdout.strip() == "true", "it keeps running (a DaemonSet pod that exits is restarted)"
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "5", name], capture_output=True, timeout=120, check=False)
    assert installed.read_text() == PROFILE.read_text()
    assert installed.stat().st_mode & 0o777 == 0o644
    return installed


def test_under_the_installed_profile_the_sandbox_keeps_its_namespaces(root: Path, tmp_path: Path) -> None:
    _skip_without_containers()
    installer_root = Path(tempfile.mkdtemp(prefix="lecritique-rootfs-"))
    try:
        os.chmod(installer_root, 0o755)
        installed = _install_with_the_daemonset(installer_root, tmp_path / "kubelet-seccomp")
    finally:
        shutil.rmtree(installer_root, ignore_errors=True)
    outcome = _sandbox_in_container(
        root,
        installed,
        # hostUsers: false and procMount: Unmasked, as the chart sets them with the profile.
        f"--uidmap=0:{USER_NAMESPACE_BASE}:65536",
        f"--gidmap=0:{USER_NAMESPACE_BASE}:65536",
        "--security-opt=unmask=ALL",
        owner=USER_NAMESPACE_BASE,
    )
    assert outcome["ok"], outcome["error"]
    assert {*protocol.BASE_LAYERS, *protocol.NAMESPACE_LAYERS, protocol.USER_NAMESPACE} <= set(
        outcome["layers"]
    )
    assert outcome["checkout_visible"] is False, "the private root holds no checkout"
    assert outcome["canary_read"] is False, "its /proc shows no process of the verifier"


def test_the_apparmor_profile_compiles() -> None:
    _skip_without_containers()
    parser = shutil.which("apparmor_parser")
    assert parser, "apparmor_parser is missing: install Debian's apparmor package (make container-tools does)"
    compiled = subprocess.run(
        [parser, "--skip-kernel-load", "--skip-cache", "--stdout", str(APPARMOR)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert compiled.returncode == 0 and compiled.stdout, compiled.stderr.decode()[-2000:]
