from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class RaggedArray(_message.Message):
    __slots__ = ("dtype", "lengths", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    LENGTHS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    lengths: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., lengths: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class TrajectoryBatch(_message.Message):
    __slots__ = ("trajectory_ids", "task_ids", "group_ids", "rewards", "policy_versions", "value_versions", "metadata_json", "prompt_ids", "token_ids", "policy_mask", "logprobs", "step_ids", "values", "advantages", "critic_context_ids", "alignment")
    TRAJECTORY_IDS_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    VALUE_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    PROMPT_IDS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    POLICY_MASK_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    STEP_IDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    ADVANTAGES_FIELD_NUMBER: _ClassVar[int]
    CRITIC_CONTEXT_IDS_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    trajectory_ids: _containers.RepeatedScalarFieldContainer[str]
    task_ids: _containers.RepeatedScalarFieldContainer[str]
    group_ids: _containers.RepeatedScalarFieldContainer[int]
    rewards: _containers.RepeatedScalarFieldContainer[float]
    policy_versions: _containers.RepeatedScalarFieldContainer[int]
    value_versions: _containers.RepeatedScalarFieldContainer[int]
    metadata_json: _containers.RepeatedScalarFieldContainer[str]
    prompt_ids: RaggedArray
    token_ids: RaggedArray
    policy_mask: RaggedArray
    logprobs: RaggedArray
    step_ids: RaggedArray
    values: RaggedArray
    advantages: RaggedArray
    critic_context_ids: RaggedArray
    alignment: bytes
    def __init__(self, trajectory_ids: _Optional[_Iterable[str]] = ..., task_ids: _Optional[_Iterable[str]] = ..., group_ids: _Optional[_Iterable[int]] = ..., rewards: _Optional[_Iterable[float]] = ..., policy_versions: _Optional[_Iterable[int]] = ..., value_versions: _Optional[_Iterable[int]] = ..., metadata_json: _Optional[_Iterable[str]] = ..., prompt_ids: _Optional[_Union[RaggedArray, _Mapping]] = ..., token_ids: _Optional[_Union[RaggedArray, _Mapping]] = ..., policy_mask: _Optional[_Union[RaggedArray, _Mapping]] = ..., logprobs: _Optional[_Union[RaggedArray, _Mapping]] = ..., step_ids: _Optional[_Union[RaggedArray, _Mapping]] = ..., values: _Optional[_Union[RaggedArray, _Mapping]] = ..., advantages: _Optional[_Union[RaggedArray, _Mapping]] = ..., critic_context_ids: _Optional[_Union[RaggedArray, _Mapping]] = ..., alignment: _Optional[bytes] = ...) -> None: ...

class ServiceInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServiceInfo(_message.Message):
    __slots__ = ("service", "experiment", "weights_version", "details_json")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_VERSION_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    service: str
    experiment: str
    weights_version: int
    details_json: str
    def __init__(self, service: _Optional[str] = ..., experiment: _Optional[str] = ..., weights_version: _Optional[int] = ..., details_json: _Optional[str] = ...) -> None: ...
