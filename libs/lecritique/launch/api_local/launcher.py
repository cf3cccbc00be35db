"""The API's ``local`` launcher: each experiment is ``lecritique run`` under a small supervisor.

Its metrics land in Redis, as the experiment's own ACL user where the API creates one
(``Submission.redis_url``), else as ``experiment_redis_url`` (an ACL user that sees only
``lecritique:exp-*`` keys); its files in ``runs_dir/<id>/``. It keeps running if the API
restarts; the record's handle (pid, start time, result file) is all a new API process needs to
poll or cancel it.

The run does not inherit the API's environment: only the variables named in ``env_passthrough``
(locale, PATH, caches), the Redis URL (in the environment, never on a command line that ``ps``
shows), and the one API-key variable the tenant's policy lets its spec name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Literal

from lecritique.launch.api_local.process_tree import alive, kill_tree, process_start_ticks
from lecritique.launch.base import LogNotFound, Observation, OutsideRoots, Submission, Usage
from lecritique.run_folder import RunFolder
from lecritique.tenancy.policy import path_under
from lecritique.tenancy.spec_rules import DATASET_ROOTS_ENV, marked_values

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[4]

DEFAULT_ENV_PASSTHROUGH = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "CUDA_VISIBLE_DEVICES",
    "VLLM_CPU_KVCACHE_SPACE",
)
"""Variables of the API process a local run gets by default (none of them a credential)."""


class LocalProcessLauncher:
    """Runs each experiment as a supervised ``lecritique run`` process tree on this machine."""

    name = "local"
    secrets_are: Literal["kubernetes", "environment"] = "environment"

    def __init__(
        self,
        runs_dir: Path,
        redis_url: str,
        *,
        cancel_grace_seconds: float = 90.0,
        models_root: str = "/weights/models",
        env_passthrough: tuple[str, ...] = DEFAULT_ENV_PASSTHROUGH,
    ) -> None:
        self.runs_dir = Path(runs_dir).resolve()
        self.redis_url = redis_url
        self.runs_redis_url: str | None = redis_url
        """Where runs connect (the API gives each its own user there: ``Submission.redis_url``)."""
        self.cancel_grace_seconds = cancel_grace_seconds
        self.models_root = models_root
        self.env_passthrough = env_passthrough
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def check(self, submission: Submission) -> Usage:
        """Model and dataset paths must stay under the allowed roots once symbolic links are resolved too
        (datasets are checked once more where the file is opened: ``LECRITIQUE_DATASET_ROOTS``)."""
        model_roots = [os.path.join(self.models_root, submission.tenant), *submission.policy.model_roots]
        for rule, roots in (("model_path", model_roots), ("dataset_path", list(submission.dataset_roots))):
            real_roots = [os.path.realpath(root) for root in roots]
            for field, path in marked_values(submission.spec, rule):
                if roots and not path_under(os.path.realpath(path), real_roots):
                    raise OutsideRoots(
                        f"{field}: resolves outside the allowed {rule.split('_')[0]} roots {roots}", rule
                    )
        return Usage(gpus=0)

    def environment(self, submission: Submission) -> dict[str, str]:
        """The run's whole environment (see the module docstring)."""
        env = {name: os.environ[name] for name in self.env_passthrough if name in os.environ}
        paths = (
            [str(REPO_ROOT / "libs"), str(REPO_ROOT)] if (REPO_ROOT / "libs" / "lecritique").is_dir() else []
        )
        if os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        env["REDIS_URL"] = submission.redis_url or self.redis_url
        if submission.dataset_roots:
            env[DATASET_ROOTS_ENV] = os.pathsep.join(submission.dataset_roots)
        critic = submission.spec.critic
        llm = getattr(critic, "llm", None) if critic is not None else None
        key_env = getattr(llm, "api_key_env", None)
        if key_env and key_env in os.environ:
            # Allowed for this tenant by the policy check that ran before the launch.
            env[key_env] = os.environ[key_env]
        return env

    def launch(self, submission: Submission) -> dict[str, Any]:
        experiment_id, spec = submission.experiment_id, submission.spec
        run_dir = self.runs_dir / experiment_id
        run_dir.mkdir(parents=True, exist_ok=True)
        spec_path = RunFolder(run_dir).spec_path
        # `lecritique run` names its Redis keys and metric labels after spec.name; the API's id
        # must be that name so that GET /metrics finds the series.
        spec_path.write_text(spec.model_copy(update={"name": experiment_id}).model_dump_json(indent=1))
        result = run_dir / "result.json"
        result.unlink(missing_ok=True)
        command = [
            sys.executable,
            "-m",
            "lecritique.launch.api_local.run_and_record",
            "--result",
            str(result),
            "--",
            sys.executable,
            "-m",
            "lecritique",
            "run",
            str(spec_path),
            "--out",
            str(run_dir / "run"),
        ]
        log = (run_dir / "run.log").open("ab")
        try:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(submission),
                cwd=str(run_dir),
                start_new_session=True,
            )
        finally:
            log.close()
        self._children[experiment_id] = process
        logger.info(
            "experiment %s: started lecritique run (pid %d) in %s", experiment_id, process.pid, run_dir
        )
        return {
            "pid": process.pid,
            "start_ticks": process_start_ticks(process.pid),
            "run_dir": str(run_dir),
            "result": str(result),
            "log": str(run_dir / "run.log"),
        }

    def _running(self, experiment_id: str, handle: dict[str, Any]) -> bool:
        child = self._children.get(experiment_id)
        if child is not None:
            # Our own child: poll() reaps it, so it never lingers as a zombie.
            return child.poll() is None
        return alive(int(handle["pid"]), handle.get("start_ticks"))

    def _log_tail(self, handle: dict[str, Any], lines: int = 20) -> str:
        try:
            return "\n".join(Path(handle["log"]).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def poll(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        result_path = Path(handle["result"])
        if self._running(experiment_id, handle):
            return Observation("running")
        self._children.pop(experiment_id, None)
        try:
            result = json.loads(result_path.read_text())
        except (OSError, ValueError):
            return Observation(
                "failed", "the run's supervisor exited without recording a result:\n" + self._log_tail(handle)
            )
        if result.get("cancelled"):
            return Observation("cancelled")
        if result["returncode"] == 0:
            return Observation("succeeded")
        return Observation(
            "failed", f"lecritique run exited with code {result['returncode']}:\n{self._log_tail(handle)}"
        )

    def cancel(self, experiment_id: str, handle: dict[str, Any]) -> Observation:
        """SIGTERM the supervisor once (it stops the run gracefully); SIGKILL everything after the grace period."""
        pid = int(handle["pid"])
        if not self._running(experiment_id, handle):
            observation = self.poll(experiment_id, handle)
            return observation if observation.state != "succeeded" else Observation("cancelled")
        if "cancel_requested_at" not in handle:
            handle["cancel_requested_at"] = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        elif time.time() - float(handle["cancel_requested_at"]) > self.cancel_grace_seconds:
            logger.warning(
                "experiment %s did not stop within %.0f s; killing all its processes",
                experiment_id,
                self.cancel_grace_seconds,
            )
            kill_tree(pid)
        return Observation("running")

    def release(self, experiment_id: str, handle: dict[str, Any]) -> None:
        """Nothing to free: a finished ``lecritique run`` has stopped its services itself."""

    def logs(self, experiment_id: str, handle: dict[str, Any], component: str, tail: int) -> str:
        """``run`` is the ``lecritique run`` console; any other name a service's log under ``run/logs``."""
        run_dir = Path(handle["run_dir"])
        logs_dir = run_dir / "run" / "logs"
        path = run_dir / "run.log" if component == "run" else logs_dir / f"{component}.log"
        if not path.is_file():
            known = ["run", *sorted(p.stem for p in logs_dir.glob("*.log"))]
            raise LogNotFound(f"no log {component!r} (known: {', '.join(known)})")
        with path.open(errors="replace") as handle_file:
            return "".join(deque(handle_file, maxlen=tail))
