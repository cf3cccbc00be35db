"""``lecritique critic pretrain``: value pretraining reused across runs (Le Critique §7.1).

>>> result = pretrain(load_spec("spec.yaml"), PretrainConfig(policies=["run1/weights/policy/00000100"]), Path("out"))
>>> result.critic_dir       # name it as critic.model_path in any later run of the spec

Rollouts of several policies with the spec critic's own privileged contexts (:mod:`.collect`),
the value trainer's update on them to a held-out EV plateau (:mod:`.train`), ``ev.png`` and a
summary (:mod:`.report`); see ``docs/critics.md``.
"""

from typing import Any

from lecritique.pretrain.config import PretrainConfig, parse_pretrain_config, pretrained_critic


def __getattr__(name: str) -> Any:
    # The training half imports torch; a study spec that only declares a pretrain stage must not.
    if name in ("CRITIC_DIR", "PretrainResult", "pretrain"):
        from lecritique.pretrain import run

        return getattr(run, name)
    raise AttributeError(name)


__all__ = [
    "CRITIC_DIR",
    "PretrainConfig",
    "PretrainResult",
    "parse_pretrain_config",
    "pretrain",
    "pretrained_critic",
]
