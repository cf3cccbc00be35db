"""Sandbox containment: every hostile call ends with reward 0 and a diagnostic; the host is unharmed.

Each case runs through the CodeIO environment (reference code executed on a candidate input),
under two set-ups: the default (every layer) and the kernel's layers alone (no audit hook; the
diagnostics then show that the kernel stopped the code, not Python). The attacks of issue #11
are in ``test_sandbox_attacks.py``; the layer checks and the non-root paths in
``test_sandbox_layers.py``.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess

import pytest

from lecritique.envs.sandbox import Sandbox, SandboxConfig
from tests.integration.envs.sandbox_support import (
    ANSWER,
    LIMITS,
    SETUPS,
    codeio,
    no_sandbox_processes_remain,
    record_sessions,
    task_running,
)

REFUSED = ("Operation not permitted", "not allowed")
"""How the kernel (EPERM from seccomp) and the audit hook ("sandbox: ... is not allowed") refuse."""


@pytest.fixture(autouse=True)
def _own_sandboxes(monkeypatch: pytest.MonkeyPatch) -> None:
    record_sessions(monkeypatch)


@pytest.fixture(params=sorted(SETUPS))
def env(request):
    environment = codeio(request.param)
    environment.setup = request.param
    return environment


def assert_contained(env, code: str, *expected: str) -> str:
    result = env.score(task_running(code), ANSWER)
    assert result.reward == 0.0
    assert any(word in result.diagnostic for word in expected), result.diagnostic
    if env.setup == "kernel-layers-only":
        # The kernel stopped it, not the audit hook (whose refusals start with "sandbox:").
        assert "sandbox:" not in result.diagnostic
    assert no_sandbox_processes_remain()
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork
    return result.diagnostic


def test_honest_code_scores_one(env):
    result = env.score(task_running("def main_solution(n):\n    return n\n"), ANSWER)
    assert result.reward == 1.0, result.diagnostic


def test_threads_numpy_and_sympy_work(env):
    code = (
        "import threading, numpy, sympy\n"
        "def main_solution(n):\n"
        "    box = []\n"
        "    worker = threading.Thread(target=lambda: box.append(int(numpy.eye(3).trace())))\n"
        "    worker.start()\n"
        "    worker.join()\n"
        "    return box[0] - 3 + int(sympy.Integer(n))\n"
    )
    result = env.score(task_running(code), ANSWER)
    assert result.reward == 1.0, result.diagnostic


def test_infinite_loop(env):
    assert_contained(env, "def main_solution(n):\n    while True:\n        pass\n", "CPU time", "wall-clock")


def test_sleeping_forever_hits_the_wall_clock(env):
    sleeper = codeio(env.setup, wall_seconds=2.0)
    sleeper.setup = env.setup
    assert_contained(sleeper, "import time\ndef main_solution(n):\n    time.sleep(60)\n", "wall-clock")


def test_single_fork(env):
    code = "import os\ndef main_solution(n):\n    if os.fork() == 0:\n        os._exit(0)\n    return n\n"
    assert_contained(env, code, *REFUSED)


def test_fork_bomb(env):
    code = "import os\ndef main_solution(n):\n    while True:\n        os.fork()\n"
    assert_contained(env, code, *REFUSED)


def test_four_gigabyte_allocation(env):
    assert_contained(env, "def main_solution(n):\n    return len(bytearray(4 * 2**30))\n", "MemoryError")


def test_output_flood_is_cut_at_the_file_size_limit(env):
    code = "def main_solution(n):\n    while True:\n        print('x' * 1_000_000)\n"
    assert_contained(env, code, "File too large", "file size limit exceeded")
    called = Sandbox(SandboxConfig(**LIMITS, **SETUPS[env.setup])).call(code, "main_solution", {"n": 1})
    assert not called.ok and 0 < len(called.output) <= 2000


def test_writing_outside_the_work_directory(env, tmp_path):
    target = tmp_path / "escaped.txt"
    for opener in (
        f"open({str(target)!r}, 'w').write('x')",
        f"os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY)",
        "open('/tmp/escaped.txt', 'w').write('x')",
    ):
        code = f"import os\ndef main_solution(n):\n    {opener}\n    return n\n"
        assert_contained(
            env, code, "Read-only file system", "No such file or directory", "outside the work directory"
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
        assert_contained(env, code, *REFUSED)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_ctypes_system_calls_are_refused_by_the_kernel(env):
    """Native calls bypass the audit hook; seccomp still answers EPERM to each."""
    if platform.machine() != "x86_64":
        pytest.skip("raw x86_64 system-call numbers")
    calls = {
        "fork": "libc.syscall(57)",
        "vfork-like clone": "libc.syscall(56, 0x4111, 0, 0, 0, 0)",
        "unshare user": "libc.unshare(0x10000000)",
        "remount /": "libc.mount(b'none', b'/', None, 32 | 4096, None)",
        "ptrace init": "libc.ptrace(16, 1, 0, 0)",
        "socket": "libc.socket(2, 1, 0)",
        "setuid 0": "libc.setuid(0)",
        "bpf": "libc.syscall(321, 0, 0, 0)",
        "io_uring": "libc.syscall(425, 1, 0)",
    }
    body = "".join(f"    results[{name!r}] = ({call}, ctypes.get_errno())\n" for name, call in calls.items())
    code = (
        "import ctypes\n"
        "def main_solution(n):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    results = {}\n"
        f"{body}"
        "    if all(value == (-1, 1) for value in results.values()):\n"
        "        raise PermissionError('Operation not permitted: ' + str(results))\n"
        "    return n\n"
    )
    assert_contained(env, code, *REFUSED)


def test_foreign_system_call_abis_kill_the_process(env):
    """i386 ``int 0x80`` and x32 numbers would dodge a filter written for x86_64 numbers."""
    if platform.machine() != "x86_64":
        pytest.skip("x86_64 machine code")
    i386_fork = (
        "import ctypes, mmap\n"
        "def main_solution(n):\n"
        "    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "    page.write(bytes([0xB8, 2, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 2 (fork); int 0x80; ret\n"
        "    address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
        "    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()\n"
    )
    x32_fork = "import ctypes\ndef main_solution(n):\n    return ctypes.CDLL(None).syscall(0x40000000 | 57)\n"
    for code in (i386_fork, x32_fork):
        assert_contained(env, code, "SIGSYS", "not allowed")


def test_oversized_result_is_cut_off():
    code = "def f():\n    return 'x' * (5 * 2**20)\n"
    result = Sandbox(SandboxConfig(**LIMITS)).call(code, "f")
    assert not result.ok and "result larger than" in result.error
    assert no_sandbox_processes_remain()


def test_default_layers_are_reported():
    layers = Sandbox(SandboxConfig(**LIMITS)).call("def f():\n    return 1\n", "f").layers
    assert {"rlimits", "unprivileged-uid", "no-capabilities", "no-new-privileges", "seccomp"} <= set(layers)
    assert "audit-hook" in layers


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


def test_no_process_of_a_call_outlives_it():
    """Killed at the wall clock, the launcher, init and worker are all gone when ``call`` returns
    (SIGKILL to the group only queues the signal; init and the worker finished exiting after the
    call had returned, and a test checking at once saw them). The worker holds 300 MiB of touched
    memory, which takes its exit a while to free."""
    sleeper = Sandbox(SandboxConfig(**{**LIMITS, "wall_seconds": 2.0}))
    code = 'import time\nheld = b"x" * (300 * 2**20)\ndef f():\n    time.sleep(60)\n'
    for _ in range(5):
        result = sleeper.call(code, "f")
        assert result.timed_out, result.error
        assert no_sandbox_processes_remain()
