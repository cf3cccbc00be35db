"""When the critic is warm: the rule that decides whether a policy step may use the critic's values.

A trained critic starts from a random head; its values mean something only after
``critic.warmup_updates`` value updates (Le Critique B.3: 20). Two ways to spend them:

- **waiting** (``value``, ``gae``, or ``critic.warmup: blocking``): the estimator's baseline is the
  critic from its first step, so the policy waits while batches of the warm-up's own stream feed
  the critic (the loop's ``_warmup``);
- **stepping** (``critic.warmup: auto`` with an estimator that is its own critic-free baseline at
  its starting state, ``steps_while_critic_warms``: TETHER at rho = 0, EVPO): policy steps start at
  once; the critic trains on their batches; the first version published after the warm-up's
  updates is the *warm version*, and a batch scored by it or a newer one uses the critic. Until then
  the estimator computes with its starting state and fits nothing (``critic_warm`` False in the row).

The warm version is a fact of the checkpoint (``OrchestratorState.critic_warm_version``), so a
restarted orchestrator applies the same rule to the same batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import grpc

from lecritique.advantages import AdvantageEstimator
from lecritique.critics.specs import CriticSpec, TrainedCriticSpec
from lecritique.orchestrator.state import OrchestratorState
from lecritique.rpc.replica_pool import NoReplicaAvailable
from lecritique.v1 import value_pb2

logger = logging.getLogger(__name__)


class CriticWarmup:
    """The warm-up rule of one experiment's critic and estimator."""

    def __init__(
        self,
        critic: CriticSpec | None,
        estimator: AdvantageEstimator,
        trainer_status: Callable[[], value_pb2.ValueTrainerStatus] | None,
    ) -> None:
        self.updates = critic.warmup_updates if isinstance(critic, TrainedCriticSpec) else 0
        """Value updates before the critic is warm (0: no trained critic, or none asked for)."""
        self.needed = isinstance(critic, TrainedCriticSpec) and estimator.uses_critic and self.updates > 0
        """Whether the estimator reads a trained critic that needs a warm-up."""
        self.steps_meanwhile = (
            self.needed
            and isinstance(critic, TrainedCriticSpec)
            and critic.warmup == "auto"
            and estimator.steps_while_critic_warms
        )
        """Whether policy steps start before the critic is warm (else the loop waits for it)."""
        self._trainer_status = trainer_status

    def warmed_version(self) -> int | None:
        """The critic version the value trainer published once it made the warm-up's updates (None:
        not yet, or the trainer is down: ask again later)."""
        assert self._trainer_status is not None
        try:
            status = self._trainer_status()
        except (grpc.RpcError, NoReplicaAvailable) as error:
            logger.warning("critic warm-up: value trainer unreachable (%s)", error)
            return None
        return int(status.published_version) if status.updates >= self.updates else None

    def note(self, state: OrchestratorState, step: int) -> OrchestratorState:
        """``state`` with the warm version once there is one (asked before each policy step that
        started while the critic warms)."""
        if not self.steps_meanwhile or state.critic_warm_version >= 0:
            return state
        warmed = self.warmed_version()
        if warmed is None:
            return state
        logger.info(
            "critic warm at version %d (%d updates) before step %d: batches it scores use it",
            warmed,
            self.updates,
            step,
        )
        return replace(state, critic_warm_version=warmed)

    def is_warm(self, state: OrchestratorState, value_version: int) -> bool:
        """Whether a batch scored by critic ``value_version`` may use the critic's values (always,
        once the loop waited for the warm-up)."""
        if not self.steps_meanwhile:
            return True
        return 0 <= state.critic_warm_version <= value_version
