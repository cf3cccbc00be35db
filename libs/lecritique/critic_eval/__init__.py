"""``critic-eval``: compare critics (discriminative, generative, frozen LLM; VF vs PVF) on a fixed policy.

>>> result, paths = evaluate(load_critic_eval_spec("critic-eval.yaml"), Path("out"))

See :mod:`lecritique.critic_eval.evaluation` for what is measured and ``docs/critics.md``.
"""

from lecritique.critic_eval.config import CriticEvalSpec, EvaluatedCritic, load_critic_eval_spec
from lecritique.critic_eval.evaluation import CriticEvalResult, run_critic_eval
from lecritique.critic_eval.run import evaluate

__all__ = [
    "CriticEvalResult",
    "CriticEvalSpec",
    "EvaluatedCritic",
    "evaluate",
    "load_critic_eval_spec",
    "run_critic_eval",
]
