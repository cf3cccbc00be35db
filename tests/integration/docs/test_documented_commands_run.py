"""The documented commands run as written (each in a shell: processes), and docs/deployment.md's
Local mode sequence against a real ``lecritique api serve --dev``; which commands are run, and
that every ``lecritique`` command names what the CLI has, is tests/unit/docs/test_documented_commands.py."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.unit.docs.documented import ROOT, Command, blocks
from tests.unit.docs.test_documented_commands import COMMANDS

RUN_SECONDS = 180.0
"""A command run here must finish within this; a longer one is marked ``# needs: long``."""


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``lecritique`` on PATH running this checkout's sources; home, config and caches in a temporary folder."""
    folder = tmp_path_factory.mktemp("docs")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "lecritique"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lecritique "$@"\n')
    shim.chmod(0o755)
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("LECRITIQUE_API", "REDIS_URL"))
    }
    env.update(
        {
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "libs"), str(ROOT)]),
            "LECRITIQUE_CLIENT_CONFIG": str(folder / "client.json"),
        }
    )
    return env


@pytest.mark.slow(
    seconds=30
)  # each starts Python and imports the CLI's command (~10-50 s on a loaded 2-core machine)
@pytest.mark.parametrize("command", [c for c in COMMANDS if c.kind == "run"], ids=lambda c: c.where)
def test_a_documented_command_runs_as_written(
    command: Command, shell_env: dict[str, str], tmp_path: Path
) -> None:
    try:
        done = subprocess.run(
            ["bash", "-c", command.text],
            cwd=ROOT,
            env=shell_env,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"{command.where}: `{command.text}` ran past {RUN_SECONDS:.0f} s: mark it `# needs: long` in the doc"
        )
    assert done.returncode == 0, (
        f"{command.where}: `{command.text}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )


def _local_api_blocks() -> list[list[tuple[int, str]]]:
    found = [body for _, marker, body in blocks(ROOT / "docs" / "deployment.md") if marker == "local-api"]
    assert len(found) == 2, "docs/deployment.md's Local mode: the server's block, then the client's"
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _server(command: str, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """The documented server command, and the ``export NAME=value`` lines it printed."""
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    printed: dict[str, str] = {}
    output: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        while "LECRITIQUE_API_TOKEN" not in printed and time.monotonic() < deadline:
            if not select.select([process.stdout], [], [], 1.0)[0]:
                continue
            line = process.stdout.readline()
            if not line:
                break
            output.append(line)
            if line.startswith("export "):
                name, value = line.removeprefix("export ").strip().split("=", 1)
                printed[name] = value
        assert "LECRITIQUE_API_TOKEN" in printed, "the server printed no token:\n" + "".join(output)
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(printed["LECRITIQUE_API_URL"] + "/readyz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield process, printed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)  # uvicorn stops, then the embedded Redis
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow(seconds=60)
def test_the_local_mode_sequence_runs_as_written(shell_env: dict[str, str], tmp_path: Path) -> None:
    """docs/deployment.md's Local mode: `lecritique api serve --dev`, then the client's commands
    with the two lines it printed, against the real API (only the port and the runs folder differ,
    through LECRITIQUE_API_PORT and LECRITIQUE_API_RUNS_DIR; status refreshed every second)."""
    server_block, client_block = _local_api_blocks()
    [server_command] = [text for _, raw in server_block if (text := raw.split("#", 1)[0].strip())]
    env = {
        **shell_env,
        "LECRITIQUE_API_PORT": str(_free_port()),
        "LECRITIQUE_API_RUNS_DIR": str(tmp_path / "runs"),
        "LECRITIQUE_API_RECONCILE_SECONDS": "1",
    }
    with _server(server_command, env) as (_, printed):
        script = ["set -euo pipefail"]
        for _, raw in client_block:
            if "doc-test: from-server" in raw:
                name = raw.split("=", 1)[0].removeprefix("export ").strip()
                script.append(f"export {name}={printed[name]}")
            else:
                script.append(raw)
        script.append('echo "documented-id=$ID"')
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        experiment = done.stdout.rsplit("documented-id=", 1)[1].strip()
        assert experiment.startswith("exp-")
        assert "ID" in done.stdout and "STATUS" in done.stdout  # experiments list, with its header
        from lecritique.client import LecritiqueClient

        with LecritiqueClient(printed["LECRITIQUE_API_URL"], printed["LECRITIQUE_API_TOKEN"]) as client:
            final = client.wait(experiment, poll_seconds=1, timeout=120)  # the cancelled run has stopped
        assert final.status in ("cancelled", "failed", "succeeded"), final


def test_the_readme_puts_lecritique_on_path_right_after_the_two_commands() -> None:
    """Issue 48 item 2: after `make demo` a newcomer typed `lecritique` and got "command not found".
    The README's block after the two commands, run as one shell script with nothing of this test's
    on PATH, puts the `.venv/bin/lecritique` that `make demo`/`make test` install first on PATH."""
    readme = blocks(ROOT / "README.md")
    first = next(index for index, (_, _, body) in enumerate(readme) if any("make demo" in t for _, t in body))
    _, marker, body = readme[first + 1]
    assert marker == "", "the activation block is run as written"
    script = "\n".join(["set -euo pipefail", *(text for _, text in body), "command -v lecritique"])
    assert (ROOT / ".venv" / "bin" / "activate").is_file(), (
        "run `make install` (the README's commands make .venv)"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = Path(done.stdout.splitlines()[-1])
    assert found.resolve() == (ROOT / ".venv" / "bin" / "lecritique").resolve(), found
    from lecritique import __version__

    assert __version__ in done.stdout.splitlines()[-2]
