"""CodeIO: predict a program's output from its input, or a feasible input from its output.

Programs come from reasoning-gym's bundled CodeIO data (``codeio.jsonl.gz``: a task description,
an input/output spec, a reference ``main_solution`` and an input generator per program). Unlike
reasoning-gym's own dataset, which ``exec``s the programs in-process, every execution here runs
in the :mod:`lecritique.envs.sandbox`:

- sampling: the program's generator draws an input (seeded), the reference code computes the
  output, and the pair is kept only if it is JSON-serialisable and reproducible from the JSON
  round-tripped input (``random``/``numpy.random`` are seeded before every call);
- output prediction: the candidate JSON is compared with that sandbox-computed output;
- input prediction: the candidate input is first checked as data, a literal of the program's
  argument types whose strings cannot replace the program (:mod:`lecritique.envs.codeio_inputs`),
  then the reference code is executed on it in the sandbox and its output compared with the
  target output.

Comparison is JSON equality with a relative tolerance for floats (``float_tolerance``); the
reward is binary.

Turn protocol::

    prompt   reasoning-gym's CodeIO prompt (description, I/O spec, the given input or output as
             JSON, the reference code), then the answer-tag instruction
    action   any text whose last <answer>...</answer> holds a JSON value (output prediction) or
             a JSON object of keyword arguments (input prediction)

Splits: by program (a hash of the reference code): eval programs are never seen in training.
Privileged context: ``answer`` (the reference output, or the generator's input, as JSON).
"""

from __future__ import annotations

import gzip
import json
import math
import random
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, ClassVar, Literal

from pydantic import Field

from lecritique.envs.answers import ANSWER_INSTRUCTION, extract_answer, short, tagged
from lecritique.envs.base import Demonstration, Environment, ScoreResult, Split, Task
from lecritique.envs.codeio_inputs import refusal
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.sandbox import Sandbox, SandboxConfig
from lecritique.envs.splits import content_digest, derive_seed, split_of, task_id

_SEEDING = """
def __lecritique_seed__():
    import random as _random
    import sys as _sys
    _random.seed(0)
    if "numpy" in _sys.modules:
        _sys.modules["numpy"].random.seed(0)
"""

_GENERATE = """
def __lecritique_generate__(seed):
    import copy as _copy
    import json as _json
    import random as _random
    inputs = generate_inputs(_random.Random(seed))
    __lecritique_seed__()
    output = main_solution(**_copy.deepcopy(inputs))
    inputs_json, output_json = _json.loads(_json.dumps(inputs)), _json.loads(_json.dumps(output))
    __lecritique_seed__()
    again = _json.loads(_json.dumps(main_solution(**inputs_json)))
    return {"inputs": inputs_json, "output": output_json, "reproducible": again == output_json}
"""

_SOLVE = """
def __lecritique_solve__(inputs):
    __lecritique_seed__()
    return main_solution(**inputs)
"""


class CodeIOConfig(EnvironmentConfigBase):
    kind: Literal["codeio"] = "codeio"
    """Selects the CodeIO environment."""
    input_prediction_probability: float = Field(default=0.5, ge=0.0, le=1.0)
    """Probability that a task asks for a feasible input instead of the output."""
    difficulty: int | None = Field(default=None, ge=1, le=10)
    """Keep only programs of this difficulty level (reasoning-gym's 1-10 rating); None keeps all."""
    float_tolerance: float = Field(default=1e-6, ge=0.0)
    """Relative tolerance when comparing floats in JSON answers."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Limits and isolation of every execution of reference code."""
    parallel_executions: int = Field(default=4, ge=1, le=64)
    """Sandboxed executions run concurrently while sampling tasks."""


@cache
def load_programs(difficulty: int | None = None) -> tuple[dict[str, str], ...]:
    """The bundled CodeIO programs (task description, spec, reference code, input generator)."""
    from reasoning_gym.data import get_data_file_path

    keys = ("task_description", "input_output_spec", "code_sample", "input_generator")
    programs = []
    with gzip.open(get_data_file_path("codeio.jsonl.gz"), "rt", encoding="utf-8") as handle:
        for line in handle:
            entry = json.loads(line)
            if difficulty is None or entry.get("difficulty") == difficulty:
                programs.append({key: str(entry[key]) for key in keys})
    if not programs:
        raise ValueError(f"no CodeIO programs of difficulty {difficulty}")
    return tuple(programs)


def json_equal(left: Any, right: Any, tolerance: float) -> bool:
    """Equality of JSON values; numbers compare with a relative tolerance, booleans strictly."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        if isinstance(left, float) and math.isnan(left):
            return isinstance(right, float) and math.isnan(right)
        return math.isclose(left, right, rel_tol=tolerance, abs_tol=tolerance * 1e-3)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b, tolerance) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            json_equal(left[key], right[key], tolerance) for key in left
        )
    return type(left) is type(right) and left == right


class CodeIOEnvironment(Environment):
    name: ClassVar[str] = "codeio"
    privileged_kinds: ClassVar[tuple[str, ...]] = ("answer",)
    prompt_budget_tokens: ClassVar[int] = 4096
    """Le Critique Appendix D.1: 4,096 input tokens beside 8,192 generated ones."""
    max_action_chars: int = 16_384

    def __init__(self, config: CodeIOConfig | None = None) -> None:
        self.config = config or CodeIOConfig()
        self.sandbox = Sandbox(self.config.sandbox)
        self.answer_sandbox_seconds = self.config.sandbox.wall_seconds

    def _plan(self, seed: int, index: int) -> tuple[int, int, str]:
        """(program index, generator seed, direction) of candidate ``index``."""
        rng = random.Random(derive_seed(self.name, seed, index))
        program = rng.randrange(len(load_programs(self.config.difficulty)))
        direction = "input" if rng.random() < self.config.input_prediction_probability else "output"
        return program, rng.getrandbits(63), direction

    def _generate(self, program_index: int, generator_seed: int, direction: str) -> Task | None:
        program = load_programs(self.config.difficulty)[program_index]
        source = "\n\n".join((program["code_sample"], program["input_generator"], _SEEDING, _GENERATE))
        result = self.sandbox.call(source, "__lecritique_generate__", {"seed": generator_seed})
        if not result.ok or not isinstance(result.value, dict) or not result.value.get("reproducible"):
            return None
        inputs, output = result.value["inputs"], result.value["output"]
        if not isinstance(inputs, dict):
            return None
        from reasoning_gym.code.codeio import (
            INPUT_PREDICTION_PROMPT_TEMPLATE,
            OUTPUT_PREDICTION_PROMPT_TEMPLATE,
        )

        template = (
            INPUT_PREDICTION_PROMPT_TEMPLATE if direction == "input" else OUTPUT_PREDICTION_PROMPT_TEMPLATE
        )
        given = output if direction == "input" else inputs
        question = template.format(
            program["task_description"],
            program["input_output_spec"],
            json.dumps(given),
            program["code_sample"],
        )
        answer = json.dumps(inputs if direction == "input" else output)
        return Task(
            task_id=task_id(self.name, f"{program['code_sample']}\n{direction}\n{json.dumps(given)}"),
            prompt=f"{question.strip()}\n\n{ANSWER_INSTRUCTION}\n",
            reference=answer,
            privileged={"answer": answer},
            metadata={
                "program": program_index,
                "direction": direction,
                "code": program["code_sample"],
                "inputs": inputs,
                "output": output,
            },
        )

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        """Tasks of programs in ``split``, generated in parallel sandboxes, in candidate order."""
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        programs = load_programs(self.config.difficulty)
        tasks: list[Task] = []
        index, limit = 0, 1000 + 50 * n
        with ThreadPoolExecutor(self.config.parallel_executions) as pool:
            while len(tasks) < n:
                if index >= limit:
                    raise RuntimeError(
                        f"codeio: found only {len(tasks)} of {n} {split} tasks in {limit} candidates"
                    )
                plans: list[tuple[int, int, str]] = []
                while len(plans) < self.config.parallel_executions and index < limit:
                    plan = self._plan(seed, index)
                    index += 1
                    key = content_digest(programs[plan[0]]["code_sample"])
                    if split_of(self.name, key, self.config.eval_fraction) == split:
                        plans.append(plan)
                for task in pool.map(lambda plan: self._generate(*plan), plans):
                    if task is not None and len(tasks) < n:
                        tasks.append(task)
        return tasks

    def score(self, task: Task, completion: str) -> ScoreResult:
        if isinstance(completion, str) and len(completion) > self.max_action_chars:
            return ScoreResult(0.0, f"answer longer than {self.max_action_chars} characters")
        answer, problem = extract_answer(completion, tags=True)
        if answer is None:
            return ScoreResult(0.0, problem)
        try:
            candidate = json.loads(answer)
        except (ValueError, RecursionError):
            return ScoreResult(0.0, f"answer is not JSON: {short(answer)}")
        tolerance = self.config.float_tolerance
        if task.metadata["direction"] == "output":
            if json_equal(candidate, task.metadata["output"], tolerance):
                return ScoreResult(1.0, "correct")
            return ScoreResult(0.0, f"wrong output {short(answer)}")
        try:
            refused = refusal(candidate, task.metadata["inputs"], task.metadata["code"])
        except RecursionError:
            refused = "the input is nested too deeply"
        if refused is not None:
            return ScoreResult(0.0, f"input refused before running: {refused}")
        source = "\n\n".join((task.metadata["code"], _SEEDING, _SOLVE))
        result = self.sandbox.call(source, "__lecritique_solve__", {"inputs": candidate})
        if not result.ok:
            return ScoreResult(0.0, f"reference code failed on the candidate input: {result.error}"[:300])
        if json_equal(result.value, task.metadata["output"], tolerance):
            return ScoreResult(1.0, "correct")
        return ScoreResult(0.0, f"the candidate input produces {short(json.dumps(result.value))}")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        return Demonstration([(task.prompt, tagged(str(task.reference)))])
