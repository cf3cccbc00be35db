"""Where a reasoning-gym answer is scored: in the verifier only when its scorer never runs it.

A reasoning-gym scorer receives the policy's answer as a string. Nine of the 105 datasets turn
that string into code: ``string_insertion``, ``spiral_matrix``, ``binary_matrix`` and
``n_queens`` pass it to ``eval()``; ``countdown``, ``puzzle24``, ``polynomial_multiplication``,
``simple_integration`` and ``intermediate_integration`` to sympy's ``parse_expr``, which evaluates
Python. Scored in the verifier's process, such an answer read the reference from the scorer's
locals, replaced the scorers for every later answer, wrote host files and reached Redis with the
verifier's credentials (issue #37). Hence:

- ``IN_PROCESS`` lists the datasets whose scorer is proven not to execute the answer, and only
  they are scored in the verifier's process. The proof is a test
  (``tests/integration/envs/test_reasoning_gym_scorers.py``): every registered dataset is fed answers that
  would run (several shapes: a call, a list, no spaces, appended to the reference, a bare name)
  in a separate interpreter whose audit hook records each ``compile``/``exec`` of the answer and
  each file it opens; a dataset that does is not in the list, the test fails if one is. The
  same test checks that the nine above are caught, so the detector is not blind.
- Every other dataset, including any a newer reasoning-gym adds, is scored in the
  :mod:`~lecritique.envs.sandbox`: one fresh ``python -I -B -S`` process per answer (never two
  answers in one process, where one could change how the next is scored), with no environment,
  no network, no credentials, a read-only root holding only the interpreter and ``PACKAGES``,
  and a private work directory. The child imports only the dataset's module, receives the entry
  as JSON and builds the dataset from its configuration as reasoning-gym's factory does; its
  scorer's ``eval`` and ``parse_expr`` accept only literals and arithmetic there
  (:mod:`lecritique.envs._reasoning_gym_sandboxed`), so that an answer cannot read its scorer's
  frames either.
- A sandboxed dataset whose entries cannot be scored there (not JSON, a missing package, a
  sandbox that cannot start on this machine) fails when the environment is built, naming the
  dataset and the reason; it never falls back to the verifier's process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lecritique.envs.sandbox import DEFAULT_PACKAGES, Sandbox, SandboxConfig, SandboxResult

_IN_PROCESS_NAMES = """
    ab acre advanced_geometry aiw arc_1d arc_agi base_conversion basic_arithmetic bf
    binary_alternation bitwise_arithmetic boxnet caesar_cipher calendar_arithmetic chain_sum
    circuit_logic codeio coin_flip color_cube_rotation complex_arithmetic count_bits count_primes
    course_schedule cryptarithm decimal_arithmetic decimal_chain_sum dice emoji_mystery
    family_relationships figlet_font fraction_simplification futoshiki game_of_life
    game_of_life_halting gcd graph_color group_anagrams gsm_symbolic isomorphic_strings jugs
    kakurasu knight_swap knights_knaves largest_island lcm leg_counting letter_counting
    letter_jumble list_functions mahjong_puzzle manipulate_matrix maze mini_sudoku modulo_grid
    needle_haystack number_filtering number_format number_sequence number_sorting
    palindrome_generation palindrome_partitioning path_star polynomial_equations pool_matrix
    power_function prime_factorization products propositional_logic quantum_lock ransom_note rearc
    rectangle_count rotate_matrix rotten_oranges rubiks_cube rush_hour self_reference
    sentence_reordering shortest_path simple_equations simple_geometry sokoban spell_backward
    string_manipulation string_splitting string_synthesis sudoku survo syllogism time_intervals
    tower_of_hanoi tsumego word_ladder word_sequence_reversal word_sorting zebra_puzzles
"""
IN_PROCESS = frozenset(_IN_PROCESS_NAMES.split())
"""Datasets whose ``score_answer`` never executes the answer (proven by the test named above)."""

PACKAGES = (*DEFAULT_PACKAGES, "reasoning_gym")
"""What the sandboxed scorers import beyond the standard library (reasoning-gym's nine that
execute answers need yaml, numpy and sympy; mpmath is sympy's)."""

SCORING_SANDBOX = SandboxConfig(wall_seconds=20.0, cpu_seconds=10, memory_mb=1024, packages=PACKAGES)
"""One sandboxed scoring: importing sympy takes about 0.4 s of it, scoring a few milliseconds."""

_SOURCE = Path(__file__).with_name("_reasoning_gym_sandboxed.py").read_text()


def scored_in_process(name: str) -> bool:
    """Whether dataset ``name``'s scorer may run in the verifier's process."""
    return name in IN_PROCESS


class SandboxedScorer:
    """Scores answers of one reasoning-gym dataset, each in its own sandbox process."""

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = dict(config)
        """The dataset's generator settings from the spec (seed and size come from the dataset)."""
        try:
            json.dumps(self.config)
        except (TypeError, ValueError) as error:
            raise ValueError(f"dataset {name!r}: its config is not JSON ({error})") from None
        self._sandbox = Sandbox(SCORING_SANDBOX)

    def score(self, dataset: Any, answer: str, entry: dict[str, Any]) -> SandboxResult:
        """``dataset``'s score of ``answer`` (``value``), or why the sandbox gave none (``error``).

        ``dataset`` is the verifier's instance that generated ``entry``: the child builds its twin
        from the same class, settings, seed and size.
        """
        job = {**self._dataset_job(dataset), "answer": answer, "entry": entry}
        return self._sandbox.call(_SOURCE, "score_answer", job)

    def score_trusted(self, dataset: Any, pairs: list[tuple[str, dict[str, Any]]]) -> SandboxResult:
        """Scores of the platform's own answers (the audit's), several in one sandbox: never a policy's."""
        job = {**self._dataset_job(dataset), "pairs": [[answer, entry] for answer, entry in pairs]}
        return self._sandbox.call(_SOURCE, "score_answers", job)

    def _dataset_job(self, dataset: Any) -> dict[str, Any]:
        """What the child needs to build ``dataset``'s twin: its class, settings, seed and size."""
        settings = dataset.config
        return {
            "dataset_module": type(dataset).__module__,
            "dataset_class": type(dataset).__qualname__,
            "config_module": type(settings).__module__,
            "config_class": type(settings).__qualname__,
            "config": {**self.config, "seed": settings.seed, "size": settings.size},
        }

    def probe(self, dataset: Any, entry: dict[str, Any]) -> None:
        """Score ``entry``'s own reference in the sandbox; ValueError naming the dataset if it cannot."""
        try:
            json.dumps(entry)
        except (TypeError, ValueError) as error:
            raise ValueError(self._cannot(f"its entries are not JSON ({error})")) from None
        result = self.score(dataset, str(entry.get("answer") or ""), entry)
        if not result.ok or not isinstance(result.value, float | int):
            raise ValueError(self._cannot(result.error or f"the scorer returned {result.value!r}"))

    def _cannot(self, reason: str) -> str:
        return (
            f"reasoning-gym dataset {self.name!r} executes answers, so it is scored in the sandbox, "
            f"and the sandbox cannot score it here: {reason}"[:600]
        )
