"""Episodes: the turn protocol, implemented once (the orchestrator, ``critic-eval`` and tiny builds play them).

- :mod:`~lecritique.episodes.record`: one episode in token ids, continuable from any of its tokens;
- :mod:`~lecritique.episodes.player`: plays records turn by turn against a policy and an environment;
- :mod:`~lecritique.episodes.local`: a local engine and environment as the player's policy and environment.
"""

from lecritique.episodes.player import EpisodePlayer, PolicySampler, SampledAction, TurnEnvironment
from lecritique.episodes.record import EpisodeRecord

__all__ = ["EpisodePlayer", "EpisodeRecord", "PolicySampler", "SampledAction", "TurnEnvironment"]
