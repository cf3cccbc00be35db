"""The estimator interface and registry: every fact about an estimator is declared on its class.

An estimator class says, once, what the rest of the system derives from it:

- ``name`` and ``Spec``: the experiment spec's ``estimator`` section (its options plus ``name``,
  one pydantic model; :mod:`lecritique.config.estimators` is the union of every registered one);
- ``uses_critic``: whether it reads values (the spec then needs a ``critic``; the orchestrator
  waits for critic warmup and reports the critic's explained variance per bucket);
- ``steps_while_critic_warms``: whether at its starting state it is its own critic-free baseline,
  so policy steps need not wait for the critic's warm-up (TETHER at rho = 0, EVPO);
- ``admits_hindsight``: whether a critic whose V(h_t) reads the trajectory after t may feed it.
  False by default: a critic-using estimator needs prefix-only values (Le Critique eq. 5), and
  the critic-kind table (:mod:`lecritique.critics.kinds`) refuses hindsight critics for it;
- ``min_group_size`` and ``group_reason``: the smallest ``rollout.group_size`` that trains
  anything, and why (the spec refuses a smaller one naming both fields);
- :meth:`~AdvantageEstimator.ignored_values`: when it reads none of the critic's values on a task
  (the orchestrator warns).

Every estimator has one uniform signature: ``compute(batch)`` returns frozen token advantages
[B, T] (zero off-policy tokens) using only state fitted on *earlier* batches; ``update(batch)``
is called afterwards and may fit state (TETHER's rho, EVPO's explained variance) on this batch,
for use by the next one. ``state_dict``/``load_state_dict`` make that state survive restarts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from lecritique.advantages.batch import AdvantageBatch, FloatArray
from lecritique.advantages.metrics import VALUE_EV_BUCKETS


class EstimatorSpecBase(BaseModel):
    """Base of every estimator's spec section: ``name`` plus its options; unknown options are errors.

    A subclass is declared next to its estimator and named by the estimator's ``Spec``; its
    ``name`` field is ``Literal[<the estimator's name>]`` (:func:`register` checks it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    name: str
    """The estimator (the registry's name)."""

    def options(self) -> dict[str, Any]:
        """The estimator's keyword options: every field but ``name``."""
        return self.model_dump(exclude={"name"})

    def estimator_class(self) -> type[AdvantageEstimator]:
        """The registered class this section configures (its facts: ``uses_critic``, ...)."""
        return estimator_class(self.name)

    def build(self) -> AdvantageEstimator:
        return get_estimator(self.name, **self.options())

    def critic_target_lambda(self) -> float:
        """lambda of the critic's value targets (1: Monte-Carlo returns)."""
        return 1.0

    def needs_max_length(self) -> bool:
        """Whether ``max_length`` (the maximum response length in policy tokens) is needed and
        unset: the experiment spec then fills it in from its rollout and environment."""
        return False

    def ev_buckets(self) -> int:
        """Response-position buckets of the critic's per-bucket explained variance
        (``value_ev_bucket_{m}``, reported for every estimator that uses a critic)."""
        return VALUE_EV_BUCKETS


class AdvantageEstimator(ABC):
    """Base class: subclasses implement :meth:`_token_advantages` and optionally :meth:`update`.

    A subclass declares the class attributes below (defaults: a critic-free estimator without
    options that trains with any group size) and is added with :func:`register`."""

    name: ClassVar[str]
    """The registry's name (the spec's ``estimator.name``)."""
    Spec: ClassVar[type[EstimatorSpecBase]]
    """The spec section: ``name: Literal[name]`` plus the options ``__init__`` validates with it."""
    uses_critic: ClassVar[bool] = False
    """Whether the estimator reads ``values`` (the spec then needs a critic; the orchestrator waits
    for critic warmup and reports the critic's explained variance)."""
    steps_while_critic_warms: ClassVar[bool] = False
    """Whether, with its fitted state at its start, it is its own critic-free baseline (TETHER at
    rho_0 = 0 is the leave-one-out mean; EVPO's first batch uses the group mean). Then the
    orchestrator need not hold the policy back for the critic's warm-up: it takes policy steps at
    once with :meth:`compute` at that starting state and fits nothing until a warm critic version
    scores a batch (``critic.warmup: auto``). False: the critic's values are the baseline from the
    first step (``value``, ``gae``), so the policy waits for ``critic.warmup_updates``."""
    admits_hindsight: ClassVar[bool] = False
    """Whether values that read the trajectory after t are admissible (LVRL's hindsight values).
    False: a critic-using estimator uses V(h_t) as a baseline, which must depend on the prefix
    h_t only (Le Critique eq. 5), so hindsight critics are refused. A new estimator is refused
    them unless it says otherwise here."""
    min_group_size: ClassVar[int] = 1
    """The smallest ``rollout.group_size`` with which it trains anything."""
    group_reason: ClassVar[str] = ""
    """Why a smaller group trains nothing (in the spec's error; required with ``min_group_size > 1``)."""
    gauges: ClassVar[Mapping[str, str]] = {}
    """Metric keys of :meth:`report` exported as Prometheus gauges ``lecritique_<key>`` (value: the
    help text); a key ``<key>_bucket_<m>`` is the same gauge with label ``bucket=m``."""
    chunk_tokens: ClassVar[int | None] = 1 << 16
    """Token-level work runs on group-aligned row chunks of about this many tokens (None: whole
    batch). Every estimator here is group- or row-local given its fitted state, so chunking
    changes no result, only keeps temporaries cache-sized."""

    def compute(self, batch: AdvantageBatch) -> Any:
        """Token advantages [B, T] (float32; torch if ``batch.rewards`` was torch)."""
        if self.chunk_tokens is None:
            return batch.output(self._token_advantages(batch))
        out = np.zeros(batch.mask.shape, dtype=np.float32)
        for rows in batch.group_chunks(self.chunk_tokens):
            chunk = batch.select(rows)
            advantages = self._token_advantages(chunk)
            if isinstance(rows, slice):
                np.copyto(out[rows], advantages, where=chunk.mask, casting="same_kind")
            else:
                out[rows] = np.where(chunk.mask, advantages, 0.0)
        return batch.wrap(out)

    @abstractmethod
    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        """Advantages for every token of ``batch`` (a whole batch or a group-aligned chunk of
        one); off-policy tokens are zeroed by the caller."""

    @classmethod
    def needs_prefix_values(cls) -> bool:
        """Whether a critic feeding it must score every state from the prefix alone (eq. 5)."""
        return cls.uses_critic and not cls.admits_hindsight

    @classmethod
    def ignored_values(cls, turn_limit: int) -> str | None:
        """Why it reads none of the critic's values on a task of at most ``turn_limit`` policy
        turns (None: it reads them). The orchestrator warns when it is not None."""
        return None

    def update(self, batch: AdvantageBatch) -> None:  # noqa: B027 - stateless by default
        """Fit lagged state on this batch after its advantages were frozen."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"estimator {self.name!r} has no state, got keys {sorted(state)}")

    def metrics(self) -> dict[str, float]:
        """Scalars of the current fitted state (e.g. ``tether_rho``)."""
        return {}

    def freeze_and_fit(self, batch: AdvantageBatch) -> tuple[Any, dict[str, float]]:
        """One policy step's worth of estimation: this batch's advantages, frozen with the state
        fitted on earlier batches (:meth:`compute`), then the state fitted on this batch for the
        next one (:meth:`update`); returns the advantages and the step's metrics (:meth:`report`).

        The only admissible order (Le Critique, arXiv:2608.16739, §5.1): "A batch never uses a
        mixture coefficient fitted on its own returns." Fitting first would make a trajectory's
        baseline depend on its own return, violating the admissibility condition (eq. 5) and
        biasing the gradient; the same holds for every stateful estimator (EVPO's switch)."""
        used = self.metrics()
        advantages = self.compute(batch)
        self.update(batch)
        return advantages, self.report(used, self.metrics())

    def report(self, used: dict[str, float], fitted: dict[str, float]) -> dict[str, float]:
        """The metrics of one step, from :meth:`metrics` before the fit (the state this batch
        used) and after it (the state the next batch will use); by default the latter."""
        return fitted


_REGISTRY: dict[str, type[AdvantageEstimator]] = {}


E = TypeVar("E", bound=type[AdvantageEstimator])


def register(cls: E) -> E:
    """Add an estimator class to the registry, after checking that its facts agree."""
    if cls.name in _REGISTRY:
        raise ValueError(f"estimator {cls.name!r} registered twice")
    spec_name = cls.Spec.model_fields["name"]
    if get_args(spec_name.annotation) != (cls.name,) or spec_name.default != cls.name:
        raise TypeError(f"{cls.__name__}.Spec must declare name: Literal[{cls.name!r}] = {cls.name!r}")
    if cls.min_group_size < 1 or (cls.min_group_size > 1) != bool(cls.group_reason):
        raise TypeError(f"{cls.__name__}: min_group_size > 1 needs a group_reason (and only then)")
    if cls.admits_hindsight and not cls.uses_critic:
        raise TypeError(f"{cls.__name__}: admits_hindsight without uses_critic says nothing")
    _REGISTRY[cls.name] = cls
    return cls


def estimator_names() -> list[str]:
    return sorted(_REGISTRY)


def estimator_classes() -> list[type[AdvantageEstimator]]:
    """Every registered estimator class, by name."""
    return [_REGISTRY[name] for name in estimator_names()]


def estimator_class(name: str) -> type[AdvantageEstimator]:
    """The registered class of ``name``; unknown names raise ``ValueError``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown estimator {name!r}; known: {', '.join(estimator_names())}") from None


def estimator_gauges() -> dict[str, str]:
    """Every registered estimator's :attr:`~AdvantageEstimator.gauges`: metric key -> help text."""
    return {key: text for cls in _REGISTRY.values() for key, text in cls.gauges.items()}


def get_estimator(name: str, **options: Any) -> AdvantageEstimator:
    """Build a registered estimator by name; unknown names or options raise ``ValueError``."""
    cls = estimator_class(name)
    try:
        return cls(**options)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ValueError(f"invalid options for estimator {name!r}: {problems}") from None
    except TypeError as error:
        raise ValueError(f"invalid options for estimator {name!r}: {error}") from None
