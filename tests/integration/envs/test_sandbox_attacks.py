"""The attacks of issue #11 against the sandbox, each through the public API.

Every test plays one attack as untrusted CodeIO reference code (scored through
``CodeIOEnvironment.score``, or run through ``Sandbox.call`` where the whole value is needed) and
asserts both that the attack failed and that the host file it aimed at is untouched. Each ran
successfully against the sandbox before the fix (see docs/security.md).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from lecritique.envs.sandbox import Sandbox, SandboxConfig
from tests.integration.envs.sandbox_support import (
    ANSWER,
    LIMITS,
    SETUPS,
    HostFile,
    codeio,
    finishes,
    no_sandbox_processes_remain,
    record_sessions,
    task_running,
)

CHECKOUT = Path(__file__).resolve().parents[3]


def refused(seen: object) -> bool:
    return isinstance(seen, str) and seen.startswith("refused")


@pytest.fixture(autouse=True)
def _own_sandboxes(monkeypatch: pytest.MonkeyPatch) -> None:
    record_sessions(monkeypatch)


@pytest.fixture(params=sorted(SETUPS))
def setup(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[0o077, 0o022], ids=["umask077", "umask022"])
def host_umask(request: pytest.FixtureRequest):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


@pytest.fixture
def private_tempdir(monkeypatch: pytest.MonkeyPatch):
    """A fresh host temporary directory (world-traversable, like /tmp) for this test's sandboxes."""
    directory = Path(tempfile.mkdtemp(prefix="lecritique-test-host-tmp-"))
    directory.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_umask_077_escape_through_posixsubprocess_leaves_the_host_untouched(host_umask, setup, tmp_path):
    """The escape of the issue: fork_exec (not audited) -> /bin/sh -> remount / rw -> write a host file."""
    target = HostFile(tmp_path / "host-file.txt", "original\n", mode=0o644)
    command = f"for m in / /tmp; do mount -o remount,bind,rw $m; done; echo pwned > {target.path}"
    code = (
        "import os, _posixsubprocess\n"
        "def main_solution(n):\n"
        "    r, w = os.pipe()\n"
        "    pid = _posixsubprocess.fork_exec(\n"
        f"        [b'/bin/sh', b'-c', {command.encode()!r}], [b'/bin/sh'], True, (w,), None, None,\n"
        "        -1, -1, -1, -1, -1, -1, r, w, False, False, -1, None, None, None, -1, None, False)\n"
        "    os.waitpid(pid, 0)\n"
        "    return n\n"
    )
    result = codeio(setup).score(task_running(code), ANSWER)
    assert target.untouched(), "the sandboxed code wrote a host file"
    assert result.reward == 0.0, result.diagnostic
    assert "Operation not permitted" in result.diagnostic or "not allowed" in result.diagnostic
    assert no_sandbox_processes_remain()


def test_symlinks_planted_at_result_files_do_not_leak_host_files(setup, tmp_path):
    """Symlinks where the host used to read .result.json/.output.txt/.bootstrap.txt by path."""
    secret = HostFile(tmp_path / "secret.txt", f"TOPSECRET-{secrets.token_hex(8)}\n")
    code = (
        "import os\n"
        "def main_solution(n):\n"
        "    for name in ('.result.json', '.output.txt', '.bootstrap.txt'):\n"
        "        try:\n"
        "            os.remove(name)\n"
        "        except FileNotFoundError:\n"
        "            pass\n"
        f"        os.symlink({secret.path!r}, name)\n"
        "    os._exit(1)\n"
    )
    scored = codeio(setup).score(task_running(code), ANSWER)
    called = Sandbox(SandboxConfig(**LIMITS, **SETUPS[setup])).call(code, "main_solution", {"n": 1})
    assert scored.reward == 0.0
    assert "TOPSECRET" not in scored.diagnostic
    assert not called.ok
    assert "TOPSECRET" not in called.error + called.output + repr(called.notes)
    assert secret.untouched()


def test_fifo_planted_as_result_file_neither_hangs_nor_leaves_files(setup, private_tempdir):
    code = (
        "import os\n"
        "def main_solution(n):\n"
        "    try:\n"
        "        os.remove('.result.json')\n"
        "    except FileNotFoundError:\n"
        "        pass\n"
        "    os.mkfifo('.result.json')\n"
        "    os._exit(0)\n"
    )
    result = finishes(lambda: codeio(setup).score(task_running(code), ANSWER), seconds=30)
    assert result.reward == 0.0
    assert list(private_tempdir.iterdir()) == [], "the work directory was left behind"
    assert no_sandbox_processes_remain()


def test_forged_result_file_and_exit_are_not_accepted(setup):
    """The code writes the old result file itself and exits before the call returns."""
    forged = {"ok": True, "value": 1, "layers": ["forged-layer"], "notes": []}
    code = (
        "import json, os\n"
        "def main_solution(n):\n"
        "    with open('.result.json', 'w') as handle:\n"
        f"        json.dump({forged!r}, handle)\n"
        "    os._exit(0)\n"
    )
    result = codeio(setup).score(task_running(code, output=1), ANSWER)
    assert result.reward == 0.0, "a forged result was accepted"
    called = Sandbox(SandboxConfig(**LIMITS, **SETUPS[setup])).call(code, "main_solution", {"n": 1})
    assert not called.ok and "forged-layer" not in called.layers


def test_forged_layer_report_on_every_descriptor_is_ignored(setup):
    """Frames written to any inherited descriptor cannot replace the layers verified before the call."""
    frames = (
        json.dumps({"stage": "ready", "layers": ["forged-layer"], "notes": []})
        + "\n"
        + json.dumps({"stage": "result", "ok": True, "value": 2})
        + "\n"
    ).encode()
    code = (
        "import os\n"
        "def main_solution(n):\n"
        "    for fd in range(3, 256):\n"
        "        try:\n"
        f"            os.write(fd, {frames!r})\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    )
    called = Sandbox(SandboxConfig(**LIMITS, **SETUPS[setup])).call(code, "main_solution", {"n": 1})
    assert "forged-layer" not in called.layers
    assert "seccomp" in called.layers, called


def test_host_files_processes_and_temporary_directory_are_invisible(setup):
    """/etc/passwd, the project checkout, the host's temporary directory, host processes' cmdlines."""
    with tempfile.NamedTemporaryFile("w", prefix="lecritique-host-secret-", delete=False) as handle:
        handle.write("TMPSECRET\n")
    host_secret = HostFile(handle.name, "TMPSECRET\n", mode=0o644)
    checkout_file = str(CHECKOUT / "pyproject.toml")
    code = (
        "import os\n"
        "def attempt(fn):\n"
        "    try:\n"
        "        return fn()\n"
        "    except Exception as error:\n"
        "        return 'refused: ' + type(error).__name__\n"
        "def probe():\n"
        "    def cmdlines():\n"
        "        pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "        return [attempt(lambda: open(f'/proc/{p}/cmdline', 'rb').read().decode('utf-8', 'replace'))\n"
        "                for p in pids]\n"
        "    return {\n"
        "        'passwd': attempt(lambda: open('/etc/passwd').read()),\n"
        f"        'checkout': attempt(lambda: open({checkout_file!r}).read()),\n"
        f"        'checkout_listing': attempt(lambda: os.listdir({str(CHECKOUT)!r})),\n"
        f"        'host_tmp_file': attempt(lambda: open({host_secret.path!r}).read()),\n"
        f"        'host_tmp_listing': attempt(lambda: os.listdir({tempfile.gettempdir()!r})),\n"
        "        'cmdlines': attempt(cmdlines),\n"
        "    }\n"
    )
    try:
        result = Sandbox(SandboxConfig(**LIMITS, **SETUPS[setup])).call(code, "probe")
        assert result.ok, result.error
        seen = result.value
        assert refused(seen["passwd"]), "read /etc/passwd"
        assert refused(seen["checkout"]), "read the project checkout"
        assert refused(seen["checkout_listing"]), "listed the project checkout"
        assert refused(seen["host_tmp_file"]), "read a file in the host's temporary directory"
        assert os.path.basename(host_secret.path) not in str(seen["host_tmp_listing"])
        with open(f"/proc/{os.getpid()}/cmdline", "rb") as own:
            host_command = own.read().decode("utf-8", "replace")
        with open("/proc/1/cmdline", "rb") as init:
            host_init = init.read().decode("utf-8", "replace")
        assert host_command not in seen["cmdlines"] and host_init not in seen["cmdlines"], seen["cmdlines"]
        assert host_secret.untouched()
    finally:
        os.unlink(host_secret.path)


def test_disk_quota_stops_filling_the_disk(setup, private_tempdir):
    code = (
        "def main_solution(n):\n"
        "    block = b'x' * (4 << 20)\n"
        "    for i in range(48):\n"
        "        with open(f'fill-{i}', 'wb') as handle:\n"
        "            handle.write(block)\n"
        "    return n\n"
    )
    result = codeio(setup, disk_mb=16).score(task_running(code), ANSWER)
    assert result.reward == 0.0, "192 MiB were written"
    assert "No space left on device" in result.diagnostic, result.diagnostic
    assert list(private_tempdir.iterdir()) == []


def test_signals_to_host_processes_are_refused(setup):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        code = (
            "import os, signal\n"
            "def main_solution(n):\n"
            f"    os.kill({victim.pid}, signal.SIGKILL)\n"
            "    return n\n"
        )
        result = codeio(setup).score(task_running(code), ANSWER)
        assert result.reward == 0.0
        assert victim.poll() is None, "the sandboxed code killed a host process"
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
