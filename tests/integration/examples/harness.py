"""Run a shipped example spec for a policy step or two with tiny stand-ins for its models.

See ``test_examples_run.py`` for why the services run in the test's process. This module turns a
shipped spec into its stand-in (:func:`stand_in`), starts the five services from their own
``start(runtime)`` on loopback ports (:func:`run_example`) and records every batch the
orchestrator sends to the policy trainer.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lecritique.config import parse_spec
from lecritique.config.experiment import ExperimentSpec
from lecritique.config.runtime import ServiceRuntime
from lecritique.orchestrator.wiring import ServiceAddresses, build_orchestrator
from lecritique.trajectory import Trajectory

CHAT_TEMPLATE = (
    "{% for message in messages %}<bos>{{ message['role'] }}\n{{ message['content'] }}<eos>\n{% endfor %}"
    "{% if add_generation_prompt %}<bos>assistant\n{% endif %}"
)
"""A chat template for the character tokenizer (the shipped GPU specs render prompts with ``chat``)."""

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 .,:=+-*/()<>\n"
"""The stand-in's characters: ~54 tokens with the specials, so a random model ends an action with
EOS after ~54 tokens on average (actions stay short whatever the spec's token budget)."""


BABYAI_STAND_IN_STEPS = 4
"""BabyAI's step limit in the stand-in runs (the shipped specs keep the environment's 100)."""

UNFITTED = frozenset({"babyai_text", "codeio"})
"""Environments whose stand-in stays random (its rewards stay 0): a tiny model fitted in seconds
never completes a BabyAI demonstration (dozens of turns) or a CodeIO one (2-3k-token prompts)."""

SUCCESS_NATS = 0.7
"""Summed loss of one demonstration's action tokens the fit stops at: exp(-0.7) ~ half the
attempts reproduce it (the seeds are fixed, so a spec's outcome is too)."""

MEMORISED_BATCHES = 2
"""Task batches (cursors 0 and 1) whose demonstrations the stand-in policy learns: the two
policy steps' batches (the stand-in spec has no critic warmup, so no batch goes before them)."""


def write_stand_in(
    directory: Path,
    max_positions: int,
    chat: bool,
    demonstrations: list[list[tuple[str, str]]] | None = None,
    max_sft_steps: int = 300,
) -> Path:
    """A tiny Llama with a character tokenizer, ``max_positions`` long (the spec's context, so its
    length budgets hold unchanged). Random, or fitted on ``demonstrations`` until an episode's
    action tokens together cost about ln 2 (``SUCCESS_NATS``): sampled at temperature 1 it then
    solves about half the attempts of those tasks, so rewards differ within a group."""
    import torch

    from lecritique.models.char_tokenizer import alphabet_of, build_char_tokenizer
    from lecritique.models.templates import (
        ChatTemplateConfig,
        PlainTemplateConfig,
        build_template,
        encode_turns,
    )
    from lecritique.models.tiny_arch import TinyArchitecture, init_tiny_policy, save_policy
    from lecritique.tinybuild.warmstart import _sft_step

    texts = [text for turns in demonstrations or [] for turn in turns for text in turn]
    tokenizer = build_char_tokenizer(set(ALPHABET) | set(alphabet_of(texts)))
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    width = 16 if demonstrations is None else 32
    architecture = TinyArchitecture(
        hidden_size=width,
        num_layers=1 if demonstrations is None else 2,
        num_heads=2,
        intermediate_size=2 * width,
        max_positions=max_positions,
    )
    torch.manual_seed(0)
    model = init_tiny_policy(tokenizer, architecture, seed=0)
    if not demonstrations:
        # Zero final norm: every logit 0, every token (EOS too) equally likely, so a random action
        # ends after ~len(vocabulary) tokens whatever its budget (a random init rarely says EOS).
        torch.nn.init.zeros_(model.model.norm.weight)
    if demonstrations:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a tiny model: a second thread only contends (2 cores, 2 test workers)
        template = build_template(ChatTemplateConfig() if chat else PlainTemplateConfig(), tokenizer)
        rows = [encode_turns(template, tokenizer, turns) for turns in demonstrations]
        target_loss = SUCCESS_NATS / (sum(sum(mask) for _, mask in rows) / len(rows))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        model.train()
        for _ in range(max_sft_steps):
            if _sft_step(model, optimizer, rows, tokenizer.pad_token_id, 1.0) < target_loss:
                break
        model.eval()
        torch.set_num_threads(threads)
    return save_policy(model, tokenizer, directory)


def demonstrations_of(spec: ExperimentSpec) -> list[list[tuple[str, str]]]:
    """Reference episodes of the tasks the orchestrator samples first (its seeds, per batch cursor)."""
    import random

    from lecritique.envs import build_environment

    environment = build_environment(spec.environment)
    rng = random.Random(0)
    return [
        environment.demonstrations(task, rng).turns
        for cursor in range(MEMORISED_BATCHES)
        for task in environment.sample_tasks(
            spec.rollout.tasks_per_step, "train", spec.seed * 1_000_003 + cursor
        )
    ]


def _hf(engine: dict[str, Any]) -> dict[str, Any]:
    """vLLM (a 25 s start on CPU, GPU-sized) -> the HF engine on the same weights; float32 on CPU."""
    return {"kind": "hf"}


def stand_in(data: dict[str, Any], models: Path, llm_url: str | None) -> dict[str, Any]:
    """The shipped spec ``data`` with tiny stand-ins for its models and a run one to two steps long.

    Kept: the environment and its settings, the estimator and its options, the critic's kind,
    context, segments and group settings, the group size, ``sampling.max_tokens`` and the context
    length (the stand-in's positions). Changed: each model (policy, critic, frozen LLM, teacher)
    is a random tiny model; vLLM engines are HF engines; bf16 -> float32; one trainer process; a
    hosted LLM endpoint is the loopback stand-in at ``llm_url``; the run is 1 task per step, 2
    steps, no critic warmup (its first versions score the batches), no checkpoints or held-out
    evaluation; BabyAI episodes end after :data:`BABYAI_STAND_IN_STEPS` steps."""
    spec = json.loads(json.dumps(data))
    engine = spec["rollout"].get("engine", {"kind": "hf"})
    context = int(engine.get("max_model_len", 0)) or 2048
    chat = spec["policy"].get("template", {}).get("kind") == "chat"
    spec["rollout"] = {**spec["rollout"], "engine": _hf(engine), "tasks_per_step": 1}
    # Its tasks decide the stand-in: one per environment setting, template and context.
    key = hashlib.sha256(
        json.dumps([spec["environment"], spec.get("seed", 0), context, chat], sort_keys=True).encode()
    ).hexdigest()[:12]
    policy = models / f"policy-{key}"
    if not policy.exists():
        placeholder = {
            **spec,
            "policy": {"tiny": "placeholder"},
            "critic": None,
            "estimator": {"name": "mean"},
        }
        fitted = spec["environment"]["kind"] not in UNFITTED
        write_stand_in(policy, context, chat, demonstrations_of(parse_spec(placeholder)) if fitted else None)
    spec["policy"] = {
        "path": str(policy),
        **({"template": spec["policy"]["template"]} if "template" in spec["policy"] else {}),
    }
    trainer = {**spec.get("policy_trainer", {}), "dtype": "float32", "processes": 1, "checkpoint_every": None}
    trainer.pop("processes_per_node", None)
    if trainer.get("distillation"):
        trainer["distillation"] = {**trainer["distillation"], "teacher": str(policy)}
    spec["policy_trainer"] = trainer
    spec["orchestrator"] = {
        **spec.get("orchestrator", {}),
        "steps": 2,
        "eval_every": None,
        "max_off_policy_steps": 8,
    }
    spec.pop("tracking", None)
    if spec["environment"]["kind"] == "babyai_text":
        # A random stand-in plays every episode to the step limit: 100 turns of character tokens
        # (~200 per observation) cost minutes per batch. 4 steps keep it multi-turn (several states).
        spec["environment"] = {**spec["environment"], "max_steps": BABYAI_STAND_IN_STEPS}
    critic = spec.get("critic")
    if critic is not None:
        spec["critic"] = _critic(critic, policy, llm_url)
    return spec


def _critic(critic: dict[str, Any], policy: Path, llm_url: str | None) -> dict[str, Any]:
    critic = dict(critic)
    kind = critic.get("kind", "discriminative")
    if kind in ("discriminative", "generative"):
        critic.update(warmup_updates=0, batch_size=None)
        critic["replay"] = {**critic.get("replay", {}), "capacity": 256}
    if kind == "discriminative":
        critic.update(dtype="float32", processes=1, checkpoint_every=None)
        critic.pop("processes_per_node", None)
    if kind == "generative":
        critic.update(model_path=None, dtype="float32", engine=_hf(critic.get("engine", {})))
    if kind == "frozen_llm":
        llm = dict(critic.get("llm", {"kind": "local"}))
        if llm.get("kind") == "openai":
            assert llm_url is not None, "a hosted critic needs the loopback stand-in"
            llm.update(base_url=llm_url, api_key_env=None)
        else:
            llm.update(model_path=None, engine=_hf(llm.get("engine", {})))
        critic["llm"] = llm
    return critic


class StandInLLM:
    """The hosted frozen critic's stand-in: an OpenAI-compatible chat route on loopback that
    answers ``k: p`` for every state marker ``[k]`` of a query, p varying with k (a capable
    critic's answer in the format the frozen critic parses)."""

    MARKER = re.compile(r"\[(\d+)\]")

    def __init__(self) -> None:
        self.queries = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = "\n".join(str(m.get("content", "")) for m in body["messages"])
                states = sorted({int(k) for k in StandInLLM.MARKER.findall(text)})
                owner.queries += 1
                answer = "\n".join(f"{k}: {0.15 + 0.7 * ((k * 37) % 11) / 10:.2f}" for k in states)
                data = json.dumps(
                    {
                        "id": "stand-in",
                        "object": "chat.completion",
                        "model": body.get("model", ""),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": answer},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": len(answer) // 4},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Step:
    """What the orchestrator sent to the policy trainer, and its estimator's state then."""

    step: int
    trajectories: list[Trajectory]
    estimator_state: dict[str, Any]


@dataclass
class ExampleRun:
    spec: ExperimentSpec
    steps: list[Step] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def run_example(data: dict[str, Any], out: Path, redis_url: str) -> ExampleRun:
    """Every service from its own ``start(runtime)`` in this process on loopback, then the
    orchestrator (``build_orchestrator``, as ``lecritique orchestrate`` builds it) to the end."""
    from services.environment_verifier import server as environment_server
    from services.policy_trainer import server as policy_trainer_server
    from services.rollout import server as rollout_server
    from services.value_evaluator import server as value_evaluator_server
    from services.value_trainer import server as value_trainer_server

    out.mkdir(parents=True, exist_ok=True)
    spec = parse_spec(data)
    spec_path = out / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    experiment = spec.name
    started: list[Any] = []

    def start(module: Any, name: str) -> str:
        runtime = ServiceRuntime(
            port=0,
            spec_path=spec_path,
            experiment_id=experiment,
            weights_dir=out / "weights",
            redis_url=redis_url,
            host="127.0.0.1",
            state_dir=out / "state" / name,
        )
        service = module.start(runtime)
        started.append(service)
        return f"127.0.0.1:{service.port}"

    run = ExampleRun(spec)
    restore = _serialise_model_loads()
    try:
        # The policy trainer publishes version 0, which the rollout and the critic start from.
        trainer = start(policy_trainer_server, "policy-trainer")
        addresses = ServiceAddresses(
            rollout=[start(rollout_server, "rollout")],
            environment=[start(environment_server, "environment")],
            policy_trainer=[trainer],
            value_trainer=[start(value_trainer_server, "value-trainer")] if spec.critic is not None else [],
            value_evaluator=[start(value_evaluator_server, "value-evaluator")]
            if spec.critic is not None
            else [],
        )
        orchestrator = build_orchestrator(spec, out, addresses, experiment_id=experiment, redis_url=redis_url)
        train = orchestrator.clients.policy_trainer.train

        def recording_train(step: int, trajectories: Any) -> Any:
            run.steps.append(Step(step, list(trajectories), orchestrator.estimator.state_dict()))
            return train(step, trajectories)

        orchestrator.clients.policy_trainer.train = recording_train  # type: ignore[method-assign]
        orchestrator.run(on_step=run.rows.append)
    finally:
        for service in reversed(started):
            service.stop(grace=0.5)
        restore()
    return run


def _serialise_model_loads() -> Any:
    """One ``from_pretrained`` at a time in this process: transformers builds models under a
    process-global meta-device context, so two services loading at once in one process (the
    evaluator's new critic, the rollout's new policy) can get meta tensors ("Cannot copy out of
    meta tensor"). Each service is its own process in a real run. Returns the undo."""
    from transformers import PreTrainedModel

    original = PreTrainedModel.__dict__["from_pretrained"]
    lock = threading.Lock()

    def locked(cls: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original.__func__(cls, *args, **kwargs)

    PreTrainedModel.from_pretrained = classmethod(locked)  # type: ignore[assignment]

    def restore() -> None:
        PreTrainedModel.from_pretrained = original  # type: ignore[method-assign]

    return restore
