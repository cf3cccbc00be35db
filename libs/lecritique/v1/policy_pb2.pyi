from lecritique.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TrainRequest(_message.Message):
    __slots__ = ("step", "trajectories")
    STEP_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORIES_FIELD_NUMBER: _ClassVar[int]
    step: int
    trajectories: _common_pb2.TrajectoryBatch
    def __init__(self, step: _Optional[int] = ..., trajectories: _Optional[_Union[_common_pb2.TrajectoryBatch, _Mapping]] = ...) -> None: ...

class TrainResponse(_message.Message):
    __slots__ = ("step", "policy_version", "path", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    STEP_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    step: int
    policy_version: int
    path: str
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, step: _Optional[int] = ..., policy_version: _Optional[int] = ..., path: _Optional[str] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class PolicyTrainerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PolicyTrainerStatus(_message.Message):
    __slots__ = ("last_step", "policy_version", "path")
    LAST_STEP_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    last_step: int
    policy_version: int
    path: str
    def __init__(self, last_step: _Optional[int] = ..., policy_version: _Optional[int] = ..., path: _Optional[str] = ...) -> None: ...
