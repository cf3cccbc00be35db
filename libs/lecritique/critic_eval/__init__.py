"""Critic measurement: how good is a critic, and how good could any critic be on these states.

>>> result, paths = evaluate(load_critic_eval_spec("critic-eval.yaml"), Path("out"))

One measurement underlies all of it, the Monte-Carlo probe: states of a policy, each continued K
times by the same policy, whose returns give the states' true values and the oracle ceiling (the
explained variance of the perfect critic V(s) = E[R | s]). Its settings are one model,
:class:`lecritique.config.probe.MonteCarloProbe`, with each context's defaults in one table there.
Five rooms use it, each with one job:

- ``critic_eval/`` (this package): ``lecritique critic-eval``. Critics of a *fixed* policy scored
  against Monte-Carlo values (value MSE and its parts, ev_var, pairwise ranking with ties handled; :mod:`.evaluation`,
  :mod:`.scores`), the spec (:mod:`.config`; ``--run RUN_DIR``: :mod:`.from_run`), the report
  (:mod:`.report`), and the oracle ceiling (:mod:`.ceiling`): its arithmetic, shared with the
  in-run probe, and the per-position ceiling table. :mod:`.ceiling` imports numpy only, so the
  orchestrator can use it without this package's torch.
- ``orchestrator/probe.py``: the in-run probe (spec section ``critic_probe``). Every ``every``
  policy steps, the *current* policy's held-out states, played through the run's own services;
  writes ``probe_ceiling``, ``probe_critic_ev`` and their ratio into the metrics row.
- ``study/ceiling_probe.py``: the study's probe (study section ``ceiling``). After a study's runs,
  critic-eval of each critic variant's final policy and the critic version its last step used.
- ``study/ceiling_table.py``: that probe's part of study.md (EV / ceiling per seed and variant,
  the per-position table and its verdict). It measures nothing.
- ``pretrain/report.py``: what ``lecritique critic pretrain`` writes (held-out EV per epoch
  against the trajectories' own returns, no Monte-Carlo continuations). It measures nothing.

See :mod:`lecritique.critic_eval.evaluation` for what is measured and ``docs/critics.md``.
The names below are imported when first used: importing :mod:`.ceiling` must stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lecritique.critic_eval.config import CriticEvalSpec, EvaluatedCritic, load_critic_eval_spec
    from lecritique.critic_eval.evaluation import CriticEvalResult, run_critic_eval
    from lecritique.critic_eval.run import evaluate

_HOMES = {
    "CriticEvalResult": "lecritique.critic_eval.evaluation",
    "CriticEvalSpec": "lecritique.critic_eval.config",
    "EvaluatedCritic": "lecritique.critic_eval.config",
    "evaluate": "lecritique.critic_eval.run",
    "load_critic_eval_spec": "lecritique.critic_eval.config",
    "run_critic_eval": "lecritique.critic_eval.evaluation",
}

__all__ = [
    "CriticEvalResult",
    "CriticEvalSpec",
    "EvaluatedCritic",
    "evaluate",
    "load_critic_eval_spec",
    "run_critic_eval",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
