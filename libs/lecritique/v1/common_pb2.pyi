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

class Trajectory(_message.Message):
    __slots__ = ("trajectory_id", "task_id", "group_id", "prompt_ids", "token_ids", "policy_mask", "logprobs", "step_ids", "reward", "policy_version", "values", "value_version", "advantages", "critic_context_ids", "metadata_json")
    TRAJECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_IDS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    POLICY_MASK_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    STEP_IDS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    VALUE_VERSION_FIELD_NUMBER: _ClassVar[int]
    ADVANTAGES_FIELD_NUMBER: _ClassVar[int]
    CRITIC_CONTEXT_IDS_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    trajectory_id: str
    task_id: str
    group_id: int
    prompt_ids: Tensor
    token_ids: Tensor
    policy_mask: Tensor
    logprobs: Tensor
    step_ids: Tensor
    reward: float
    policy_version: int
    values: Tensor
    value_version: int
    advantages: Tensor
    critic_context_ids: Tensor
    metadata_json: str
    def __init__(self, trajectory_id: _Optional[str] = ..., task_id: _Optional[str] = ..., group_id: _Optional[int] = ..., prompt_ids: _Optional[_Union[Tensor, _Mapping]] = ..., token_ids: _Optional[_Union[Tensor, _Mapping]] = ..., policy_mask: _Optional[_Union[Tensor, _Mapping]] = ..., logprobs: _Optional[_Union[Tensor, _Mapping]] = ..., step_ids: _Optional[_Union[Tensor, _Mapping]] = ..., reward: _Optional[float] = ..., policy_version: _Optional[int] = ..., values: _Optional[_Union[Tensor, _Mapping]] = ..., value_version: _Optional[int] = ..., advantages: _Optional[_Union[Tensor, _Mapping]] = ..., critic_context_ids: _Optional[_Union[Tensor, _Mapping]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

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
