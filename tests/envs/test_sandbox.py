"""Sandbox containment: every escape attempt ends with reward 0 and a diagnostic; the host is unharmed.

Each case runs through the CodeIO environment (reference code executed on a candidate input),
under three sandbox set-ups: the default (every layer this machine offers), the kernel layers
alone (namespaces, read-only mounts, rlimits, unprivileged uid; no audit hook), and the fallback
for machines without namespaces (rlimits + audit hook).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest

from lecritique.envs import Task, get_environment
from lecritique.envs.sandbox import Sandbox, SandboxConfig, active_layers

LIMITS = {"wall_seconds": 3.0, "cpu_seconds": 1, "memory_mb": 512}
SETUPS = {
    "default": {},
    "kernel-layers-only": {"namespaces": "require", "audit_hook": False},
    "audit-hook-fallback": {"namespaces": "off", "audit_hook": True},
}


def kernel_layers_available() -> bool:
    return "network-namespace" in active_layers() and "read-only-filesystem" in active_layers()


def sandbox_processes() -> list[str]:
    """Processes started by a sandbox (the child script, or anything running as nobody)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/status") as handle:
                uid = next(line.split()[1] for line in handle if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if "_sandbox_child.py" in command or uid == "65534":
            found.append(f"{pid} uid={uid} {command[:80]}")
    return found


def no_sandbox_processes_remain(grace_seconds: float = 5.0) -> bool:
    """True once every sandbox process is gone; killed processes need a moment to be reaped."""
    deadline = time.monotonic() + grace_seconds
    while sandbox_processes():
        if time.monotonic() > deadline:
            raise AssertionError(f"stray sandbox processes: {sandbox_processes()}")
        time.sleep(0.05)
    return True


def task_running(code: str) -> Task:
    """An input-prediction task whose reference code is ``code``."""
    return Task(
        task_id="codeio-hostile",
        prompt="predict an input",
        reference='{"n": 1}',
        privileged={"answer": '{"n": 1}'},
        metadata={"program": -1, "direction": "input", "code": code, "inputs": {"n": 1}, "output": 1},
    )


@pytest.fixture(params=sorted(SETUPS))
def env(request):
    if SETUPS[request.param].get("namespaces") == "require" and not kernel_layers_available():
        pytest.skip("this machine offers no network/mount namespaces (the fallback set-up is tested instead)")
    environment = get_environment("codeio", sandbox={**LIMITS, **SETUPS[request.param]})
    environment.setup = request.param
    return environment


def assert_contained(env, code: str, *expected: str) -> str:
    result = env.score(task_running(code), '<answer>{"n": 1}</answer>')
    assert result.reward == 0.0
    assert any(word in result.diagnostic for word in expected), result.diagnostic
    if env.setup == "kernel-layers-only":
        # The kernel stopped it, not the audit hook (whose refusals start with "sandbox:").
        assert "sandbox:" not in result.diagnostic
    assert no_sandbox_processes_remain()
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork
    return result.diagnostic


def test_honest_code_scores_one(env):
    result = env.score(task_running("def main_solution(n):\n    return n\n"), '<answer>{"n": 1}</answer>')
    assert result.reward == 1.0, result.diagnostic


def test_infinite_loop(env):
    assert_contained(env, "def main_solution(n):\n    while True:\n        pass\n", "CPU time", "wall-clock")


def test_sleeping_forever_hits_the_wall_clock(env):
    assert_contained(env, "import time\ndef main_solution(n):\n    time.sleep(60)\n", "wall-clock")


def test_fork_bomb(env):
    code = "import os\ndef main_solution(n):\n    while True:\n        os.fork()\n"
    assert_contained(env, code, "Resource temporarily unavailable", "not allowed", "wall-clock", "CPU time")


def test_four_gigabyte_allocation(env):
    assert_contained(env, "def main_solution(n):\n    return len(bytearray(4 * 2**30))\n", "MemoryError")


def test_writing_outside_the_work_directory(env, tmp_path):
    target = tmp_path / "escaped.txt"
    for opener in (
        f"open({str(target)!r}, 'w').write('x')",
        f"os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)",
    ):
        code = f"import os\ndef main_solution(n):\n    {opener}\n    return n\n"
        assert_contained(
            env, code, "Read-only file system", "outside the work directory", "Permission denied"
        )
        assert not target.exists()


def test_opening_a_socket(env):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    code = (
        "import socket\ndef main_solution(n):\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n    return n\n"
    )
    try:
        assert_contained(env, code, "Network is unreachable", "not allowed", "Connection refused")
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_default_layers_are_reported():
    layers = active_layers()
    assert {"rlimits", "audit-hook"} <= set(layers)
    if os.geteuid() == 0 and kernel_layers_available():
        assert {"pid-namespace", "unprivileged-uid", "no-new-privileges"} <= set(layers)


def test_work_directory_is_writable_and_removed():
    result = Sandbox(SandboxConfig(**LIMITS)).call(
        "import os\ndef f():\n    open('note.txt', 'w').write('kept')\n    print('hello')\n"
        "    return [open('note.txt').read(), os.getcwd()]\n",
        "f",
    )
    assert result.ok, result.error
    assert result.value[0] == "kept" and "hello" in result.output
    assert not os.path.exists(result.value[1])


def test_clean_environment_and_exceptions():
    os.environ["LECRITIQUE_SECRET_FOR_TEST"] = "leak"
    try:
        result = Sandbox(SandboxConfig(**LIMITS)).call(
            "import os\ndef f():\n    return sorted(os.environ)\n", "f"
        )
    finally:
        del os.environ["LECRITIQUE_SECRET_FOR_TEST"]
    assert result.ok and "LECRITIQUE_SECRET_FOR_TEST" not in result.value
    broken = Sandbox(SandboxConfig(**LIMITS)).call("def f():\n    return 1 / 0\n", "f")
    assert not broken.ok and "ZeroDivisionError" in broken.error
    missing = Sandbox(SandboxConfig(**LIMITS)).call("x = 1\n", "f")
    assert not missing.ok and "no function 'f'" in missing.error
    unserialisable = Sandbox(SandboxConfig(**LIMITS)).call("def f():\n    return object()\n", "f")
    assert not unserialisable.ok and "JSON" in unserialisable.error
