from lecritique.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CriticInput(_message.Message):
    __slots__ = ("context_text", "prompt_text", "peers")
    CONTEXT_TEXT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    context_text: str
    prompt_text: str
    peers: _containers.RepeatedCompositeFieldContainer[PeerSummary]
    def __init__(self, context_text: _Optional[str] = ..., prompt_text: _Optional[str] = ..., peers: _Optional[_Iterable[_Union[PeerSummary, _Mapping]]] = ...) -> None: ...

class PeerSummary(_message.Message):
    __slots__ = ("trajectory_id", "summary", "reward")
    TRAJECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    trajectory_id: str
    summary: str
    reward: float
    def __init__(self, trajectory_id: _Optional[str] = ..., summary: _Optional[str] = ..., reward: _Optional[float] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("inputs", "trajectories", "actor_description", "actor_reward_average")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORIES_FIELD_NUMBER: _ClassVar[int]
    ACTOR_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_REWARD_AVERAGE_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[CriticInput]
    trajectories: _common_pb2.TrajectoryBatch
    actor_description: str
    actor_reward_average: float
    def __init__(self, inputs: _Optional[_Iterable[_Union[CriticInput, _Mapping]]] = ..., trajectories: _Optional[_Union[_common_pb2.TrajectoryBatch, _Mapping]] = ..., actor_description: _Optional[str] = ..., actor_reward_average: _Optional[float] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("values", "value_version", "stats")
    class StatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    VALUE_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    values: _common_pb2.RaggedArray
    value_version: int
    stats: _containers.ScalarMap[str, float]
    def __init__(self, values: _Optional[_Union[_common_pb2.RaggedArray, _Mapping]] = ..., value_version: _Optional[int] = ..., stats: _Optional[_Mapping[str, float]] = ...) -> None: ...

class ValueTrainerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ValueTrainerStatus(_message.Message):
    __slots__ = ("updates", "published_version", "last_loss", "last_explained_variance", "replay_depth", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_LOSS_FIELD_NUMBER: _ClassVar[int]
    LAST_EXPLAINED_VARIANCE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_DEPTH_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    updates: int
    published_version: int
    last_loss: float
    last_explained_variance: float
    replay_depth: int
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, updates: _Optional[int] = ..., published_version: _Optional[int] = ..., last_loss: _Optional[float] = ..., last_explained_variance: _Optional[float] = ..., replay_depth: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...
