"""The scoring worker's side of :mod:`lecritique.envs.isolation`: one process, many answers.

Started by :class:`~lecritique.envs.isolation.ScoringPool` as ``python -c BOOT``; reads request
frames on stdin and writes one result frame per item on the descriptor that was stdout (stdout
itself then goes to stderr, so a scorer that prints cannot corrupt the protocol). Environments
are built once per configuration and kept (the scorer modules imported once), so the common case
costs one pipe round trip. Nothing here limits time: the pool kills the whole process when an
item overruns, which is the point of running scorers here rather than in the verifier.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections import OrderedDict
from dataclasses import asdict
from typing import Any

from lecritique.envs.scoring_frames import encode_frame, read_frame

_KEPT_ENVIRONMENTS = 8


class _Environments:
    """Built environments by configuration (JSON text), least recently used dropped first."""

    def __init__(self) -> None:
        self._built: OrderedDict[str, Any] = OrderedDict()

    def get(self, config_text: str) -> Any:
        if config_text in self._built:
            self._built.move_to_end(config_text)
            return self._built[config_text]
        from lecritique.envs import build_environment, parse_environment_config

        environment = build_environment(parse_environment_config(json.loads(config_text)))
        self._built[config_text] = environment
        if len(self._built) > _KEPT_ENVIRONMENTS:
            self._built.popitem(last=False)
        return environment


def _item(environment: Any, op: str, item: dict[str, Any]) -> dict[str, Any]:
    from lecritique.envs.base import EpisodeState, Task

    if op == "score":
        result = environment.score(Task(**item["task"]), item["completion"])
        return {"reward": result.reward, "diagnostic": result.diagnostic}
    if op == "step":
        state = dict(item["state"])
        state["task"] = Task(**state["task"])
        stepped = environment.step(EpisodeState(**state), item["action"])
        return {
            "state": asdict(stepped.state),
            "observation": stepped.observation,
            "reward": stepped.reward,
            "done": stepped.done,
            "diagnostic": stepped.diagnostic,
        }
    if op == "sample":
        tasks = environment.sample_tasks(int(item["n"]), split=item["split"], seed=int(item["seed"]))
        return {"tasks": [asdict(task) for task in tasks]}
    if op == "audit":
        from lecritique.envs.audit import InProcess, audit, sample_per_group

        sampled = sample_per_group(environment, int(item["per_group"]), seed=int(item["seed"]))
        rows = audit(InProcess(environment), sampled, item.get("actions") or {}, int(environment.max_turns))
        return {"rows": [row.as_dict() for row in rows]}
    if op == "score_trusted":
        pairs = [(Task(**pair["task"]), pair["completion"]) for pair in item["items"]]
        trusted = getattr(environment, "score_trusted", None)
        scored = trusted(pairs) if trusted is not None else [environment.score(t, c) for t, c in pairs]
        return {"results": [[result.reward, result.diagnostic] for result in scored]}
    raise ValueError(f"unknown operation {op!r}")


def main() -> None:
    # BrokenPipeError: the pool closed (or gave up on) this worker; there is no one to report to.
    with contextlib.suppress(BrokenPipeError):
        _serve()


def _serve() -> None:
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    environments = _Environments()
    while True:
        request = read_frame(requests)
        if request is None:
            return
        try:
            environment = environments.get(request["config"])
        except Exception as error:  # a config this process cannot build: the pool reports it
            channel.write(encode_frame({"setup_error": f"{type(error).__name__}: {error}"[:2000]}))
            continue
        if request.get("op") == "warm":
            channel.write(encode_frame({"ready": True}))
            continue
        for index, item in enumerate(request["items"]):
            try:
                outcome = _item(environment, request["op"], item)
            except (ValueError, KeyError) as error:  # the environment's refusal: a foreign task, a bad state
                outcome = {"error": f"{type(error).__name__}: {error}"[:2000]}
            except Exception as error:  # a scorer crashing on odd text: a wrong answer, not a failed batch
                traceback.print_exc()
                if request["op"] != "score":
                    outcome = {"error": f"{type(error).__name__}: {error}"[:2000]}
                else:
                    outcome = {"reward": 0.0, "diagnostic": f"the scorer raised {error!r}"[:200]}
            outcome["index"] = index
            channel.write(encode_frame(outcome))
