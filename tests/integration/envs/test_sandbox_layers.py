"""The isolation layers are verified, not assumed; what runs where namespaces are missing or the host is not root.

The non-root and no-namespace paths are played for real: a helper process (root) either loads a
seccomp filter that refuses ``unshare`` (a kernel or container without namespaces) or enters a
private mount namespace where nobody can reach the interpreter and drops to uid 65534 (a
non-root host), and then calls the sandbox through its public API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lecritique.envs._sandbox import protocol
from lecritique.envs.sandbox import Sandbox, SandboxConfig
from tests.integration.envs.sandbox_support import ANSWER, LIMITS, codeio, task_running

CHECKOUT = Path(__file__).resolve().parents[3]
FULL = {*protocol.BASE_LAYERS, *protocol.NAMESPACE_LAYERS, protocol.AUDIT_HOOK}
BASE = {*protocol.BASE_LAYERS, protocol.AUDIT_HOOK}

SELF_REPORT = (
    "import os\n"
    "def f():\n"
    "    status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())\n"
    "    fields = ('Uid', 'Gid', 'Groups', 'CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs', 'Seccomp')\n"
    "    report = {key: status[key].split() for key in fields}\n"
    "    report['uid_map'] = open('/proc/self/uid_map').read().split()\n"
    "    try:\n"
    "        report['passwd'] = len(open('/etc/passwd').read()) > 0\n"
    "    except OSError:\n"
    "        report['passwd'] = False\n"
    "    return report\n"
)
"""Untrusted code reporting its own credentials as the kernel sees them."""

HELPER = r"""
import dataclasses, errno, json, os, sys
from lecritique.envs._sandbox import kernel
options = json.loads(sys.argv[1])
if options.get("deny_unshare"):
    import pyseccomp
    refuse = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    refuse.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare")
    refuse.load()
if options.get("as_nobody"):
    # A host where the interpreter is reachable by an unprivileged user: cover the directory
    # nobody cannot traverse (e.g. /root) with a tmpfs that re-exposes just the interpreter.
    prefix = os.path.realpath(sys.base_prefix)
    kernel.unshare(kernel.CLONE_NEWNS)
    kernel.mount(None, "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
    handle = os.open(prefix, os.O_PATH)  # before the tmpfs covers it
    blocked = options["blocked"]
    if blocked:
        kernel.mount("tmpfs", blocked, "tmpfs", 0, "mode=0755")
        os.makedirs(prefix, exist_ok=True)
        current = blocked
        for part in os.path.relpath(prefix, blocked).split("/"):
            current = os.path.join(current, part)
            os.chmod(current, 0o755)
        kernel.mount(f"/proc/self/fd/{handle}", prefix, None, kernel.MS_BIND | kernel.MS_REC)
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
from lecritique.envs.sandbox import Sandbox, SandboxConfig
result = Sandbox(SandboxConfig(**options["config"])).call(options["code"], "f")
print(json.dumps(dataclasses.asdict(result)))
"""


def blocked_ancestor() -> str:
    """The first directory on the way to the standard library that others may not traverse ("" if none)."""
    path = os.path.realpath(os.path.dirname(os.__file__))
    parts = path.split("/")
    for depth in range(2, len(parts) + 1):
        directory = "/".join(parts[:depth])
        if not os.stat(directory).st_mode & 0o001:
            return directory
    return ""


def closed_to_others(path: Path) -> list[str]:
    """The folders above ``path`` that a user other than their owner cannot enter (mode without o+x)."""
    return [str(folder) for folder in path.parents if not folder.stat().st_mode & 0o001]


def in_helper(code: str, **options: Any) -> dict[str, Any]:
    """Run ``Sandbox.call(code, "f")`` in a helper process set up by ``options``; the result as a dict."""
    if options.get("as_nobody"):
        # The helper runs this interpreter as uid 65534: a checkout under a 0700 folder (mktemp -d)
        # fails with a bare PermissionError; say which folder instead.
        closed = closed_to_others(Path(sys.executable))
        assert not closed, (
            f"uid 65534 cannot reach {sys.executable}: {closed} lack o+x (clone somewhere others can enter)"
        )
    options = {"code": code, "blocked": blocked_ancestor(), "config": LIMITS, **options}
    environment = {**os.environ, "PYTHONPATH": f"{CHECKOUT / 'libs'}:{CHECKOUT}"}
    completed = subprocess.run(
        [sys.executable, "-c", HELPER, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd="/",
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.splitlines()[-1])


def unprivileged_user_namespaces() -> bool:
    """Whether uid 65534 may create a user namespace on this kernel."""
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "--user", "true"]
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="setting up the helper needs root")


@pytest.fixture(params=[0o077, 0o022], ids=["umask077", "umask022"])
def host_umask(request: pytest.FixtureRequest):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def test_every_layer_is_verified_under_both_umasks(host_umask):
    result = Sandbox(SandboxConfig(**LIMITS)).call(SELF_REPORT, "f")
    assert result.ok, result.error
    assert set(result.layers) == FULL, result.layers
    seen = result.value
    if os.geteuid() == 0:
        assert seen["Uid"] == ["65534"] * 4 and seen["Gid"] == ["65534"] * 4 and seen["Groups"] == []
    assert seen["CapEff"] == seen["CapPrm"] == seen["CapBnd"] == ["0000000000000000"]
    assert seen["NoNewPrivs"] == ["1"] and seen["Seccomp"] == ["2"]
    assert seen["passwd"] is False
    assert codeio().score(task_running("def main_solution(n):\n    return n\n"), ANSWER).reward == 1.0


@needs_root
def test_off_as_root_never_runs_the_code_as_root():
    """Without a mount namespace a root host must drop to nobody; where nobody cannot reach the
    interpreter (pyenv under /root here) the call is refused, naming the layer."""
    result = Sandbox(SandboxConfig(**LIMITS, namespaces="off")).call(SELF_REPORT, "f")
    if blocked_ancestor():
        assert not result.ok
        assert "required isolation layer 'unprivileged-uid' is missing" in result.error
        assert "cannot read the interpreter's standard library" in result.error
    else:
        assert result.ok and set(result.layers) == BASE and result.value["Uid"] == ["65534"] * 4


@needs_root
def test_auto_without_namespaces_falls_back_but_not_to_root():
    result = in_helper(SELF_REPORT, deny_unshare=True)
    assert any("namespaces unavailable" in note for note in result["notes"]), result
    if blocked_ancestor():
        assert not result["ok"] and "'unprivileged-uid' is missing" in result["error"]
    else:
        assert result["ok"] and set(result["layers"]) == BASE
        assert result["value"]["Uid"] == ["65534"] * 4


@needs_root
def test_require_without_namespaces_refuses():
    result = in_helper(SELF_REPORT, deny_unshare=True, config={**LIMITS, "namespaces": "require"})
    assert not result["ok"]
    assert "namespaces required but unavailable" in result["error"]


@needs_root
def test_non_root_host_gets_a_user_namespace_and_every_layer():
    result = in_helper(SELF_REPORT, as_nobody=True)
    assert result["ok"], result["error"]
    seen = result["value"]
    assert seen["CapEff"] == seen["CapPrm"] == seen["CapBnd"] == ["0000000000000000"]
    assert seen["NoNewPrivs"] == ["1"] and seen["Seccomp"] == ["2"]
    if unprivileged_user_namespaces():
        assert set(result["layers"]) == FULL | {protocol.USER_NAMESPACE}
        assert seen["uid_map"] == ["0", "65534", "1"]  # root inside is uid 65534 on the host
        assert seen["passwd"] is False
    else:
        assert set(result["layers"]) == BASE and seen["Uid"] == ["65534"] * 4


@needs_root
def test_non_root_host_without_namespaces_keeps_the_base_layers_only():
    """What ``off`` (or a kernel without user namespaces) does not cover: host files stay readable
    where the uid may read them (documented in docs/security.md)."""
    result = in_helper(SELF_REPORT, as_nobody=True, config={**LIMITS, "namespaces": "off"})
    assert result["ok"], result["error"]
    assert set(result["layers"]) == BASE
    seen = result["value"]
    assert seen["Uid"] == ["65534"] * 4 and seen["CapEff"] == ["0000000000000000"]
    assert seen["Seccomp"] == ["2"] and seen["NoNewPrivs"] == ["1"]
    assert seen["passwd"] is True


@pytest.mark.parametrize(
    "layer", sorted({*protocol.BASE_LAYERS, *protocol.NAMESPACE_LAYERS, protocol.USER_NAMESPACE})
)
def test_each_check_detects_its_missing_layer(layer, tmp_path):
    """Run in this (unsandboxed) test process, every layer check must report its layer missing."""
    from lecritique.envs._sandbox import checks, identity, namespaces

    expect = checks.Expectations(
        workdir=str(tmp_path),
        limits={
            "cpu_seconds": 1,
            "memory_bytes": 2**29,
            "file_size_bytes": 2**20,
            "processes": 8,
            "open_files": 16,
        },
        host_namespaces=namespaces.current_ids(),
        namespaces=["mnt", "pid", "net", "ipc", "uts", "user"],
        checkout=str(CHECKOUT),
        top_level={"proc", "usr"},
        disk_bytes=2**20,
    )
    if layer in ("unprivileged-uid", "no-capabilities") and os.geteuid() != 0:
        pytest.skip("this process is not root: the layer holds here")
    with pytest.raises(identity.Refusal, match=f"required isolation layer '{layer}' is missing"):
        checks.verify([layer], expect)
