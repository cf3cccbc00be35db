"""The attacks of issue #37 through reasoning-gym answers: the policy's answer ran as code.

``string_insertion``, ``spiral_matrix``, ``binary_matrix`` and ``n_queens`` pass the answer to
``eval()``; ``countdown``, ``puzzle24``, ``polynomial_multiplication``, ``simple_integration`` and
``intermediate_integration`` to sympy's ``parse_expr``, which evaluates code. Each test plays one
attack through ``ReasoningGymEnvironment.score`` (what the environment verifier serves) and asserts
that it failed. Every one of them succeeded against the environment before the fix (reward
earned, scoring changed for the life of the process, a host file written, Redis reached).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import redis

from lecritique.envs import Task, get_environment
from lecritique.envs.answers import tagged
from lecritique.envs.reasoning_gym import ReasoningGymEnvironment
from lecritique.redis_connection import start_embedded_redis

EVALUATING = ("string_insertion", "spiral_matrix", "binary_matrix", "n_queens")
"""Datasets whose scorer passes the answer to ``eval()``."""
PARSING = (
    "countdown",
    "puzzle24",
    "polynomial_multiplication",
    "simple_integration",
    "intermediate_integration",
)
"""Datasets whose scorer passes the answer to sympy's ``parse_expr``."""


def first_task(name: str, **others: int) -> tuple[ReasoningGymEnvironment, Task]:
    environment = get_environment("reasoning_gym", datasets={name: 1, **others})
    assert isinstance(environment, ReasoningGymEnvironment)
    task = next(t for t in environment.sample_tasks(20, seed=0) if t.metadata["dataset"] == name)
    return environment, task


@pytest.mark.parametrize(
    ("dataset", "answer"),
    [
        ("string_insertion", "list(oracle_answer)"),
        ("spiral_matrix", "oracle_answer.split()"),
        ("binary_matrix", "[row.split() for row in oracle_answer.split(chr(10))]"),
        ("n_queens", "[row.split() for row in valid_solutions[0].split(chr(10))]"),
    ],
)
def test_an_answer_cannot_read_the_reference_from_the_scorers_locals(dataset: str, answer: str) -> None:
    """Before: 0.1 (0.5 for n_queens) for an answer that names the scorer's local reference."""
    environment, task = first_task(dataset)
    result = environment.score(task, tagged(answer))
    assert result.reward == 0.0, result.diagnostic


def test_an_answer_cannot_read_the_target_from_the_scorers_frames() -> None:
    """Before: 1.0 on countdown for an answer that walks up the stack to the entry's target
    (no digit of its own, so that the numbers it "uses" are exactly the puzzle's)."""
    environment, task = first_task("countdown")
    numbers = environment.entry(task)["metadata"]["numbers"]
    frames = "__import__('sys')._getframe(True+True+True).f_locals['entry']['metadata']['target']"
    result = environment.score(task, tagged(f"{frames}+False*({'+'.join(map(str, numbers))})"))
    assert result.reward < 0.5, result.diagnostic


def test_an_answer_cannot_change_how_later_answers_are_scored() -> None:
    """Before: after one answer replaced the scorers, every later garbage answer scored 1.0."""
    environment, attacked = first_task("string_insertion", basic_arithmetic=1)
    replace = (
        "[setattr(__import__('reasoning_gym.composite',fromlist=['x']).CompositeDataset,"
        "'score_answer',lambda *a:1.0),"
        "setattr(__import__('reasoning_gym.dataset',fromlist=['x']).ProceduralDataset,"
        "'score_answer',lambda *a:1.0)]"
    )
    environment.score(attacked, tagged(replace))
    later = next(
        t for t in environment.sample_tasks(20, seed=1) if t.metadata["dataset"] == "basic_arithmetic"
    )
    assert environment.score(later, tagged("garbage")).reward == 0.0
    again = next(
        t for t in environment.sample_tasks(20, seed=2) if t.metadata["dataset"] == "string_insertion"
    )
    assert environment.score(again, tagged("garbage")).reward == 0.0


@pytest.mark.parametrize("dataset", EVALUATING + PARSING)
def test_an_answer_cannot_write_a_host_file(dataset: str, tmp_path: Path) -> None:
    """Before: the file existed after scoring, for each of the nine datasets."""
    environment, task = first_task(dataset)
    target = tmp_path / "written-by-the-answer"
    for answer in (f"[open({str(target)!r},'w').write('x')]", f"open({str(target)!r},'w').write('x')"):
        result = environment.score(task, tagged(answer))
        assert not target.exists(), f"{dataset}: the answer wrote a host file"
        assert result.reward < 1.0


@pytest.fixture
def password_redis(tmp_path: Path):
    """A real redis-server with a password, holding another tenant's record."""
    server = start_embedded_redis(tmp_path / "redis")
    password = secrets.token_hex(16)
    client = server.client()
    client.config_set("requirepass", password)
    client.close()
    url = f"redis://:{password}@127.0.0.1:{server.port}/0"
    client = redis.Redis.from_url(url)
    client.set("lecritique:exp-other:record", "original")
    yield url, client
    client.close()
    server.stop()


def test_an_answer_cannot_read_the_environment_nor_reach_redis(
    password_redis: tuple[str, redis.Redis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the answer saw ``REDIS_URL`` (its reward said so) and overwrote the record."""
    url, client = password_redis
    monkeypatch.setenv("REDIS_URL", url)
    environment, task = first_task("string_insertion")
    overwrite = (
        "[__import__('redis').Redis.from_url(__import__('os').environ['REDIS_URL'])"
        ".set('lecritique:exp-other:record','forged')]"
    )
    environment.score(task, tagged(overwrite))
    reads = "list(oracle_answer) if __import__('os').environ.get('REDIS_URL') else []"
    seen = environment.score(task, tagged(reads))
    assert client.get("lecritique:exp-other:record") == b"original"
    assert seen.reward == 0.0, seen.diagnostic
