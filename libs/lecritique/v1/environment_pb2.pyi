from lecritique.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Task(_message.Message):
    __slots__ = ("task_id", "prompt", "reference", "has_reference", "privileged", "metadata_json")
    class PrivilegedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    HAS_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    PRIVILEGED_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    prompt: str
    reference: str
    has_reference: bool
    privileged: _containers.ScalarMap[str, str]
    metadata_json: str
    def __init__(self, task_id: _Optional[str] = ..., prompt: _Optional[str] = ..., reference: _Optional[str] = ..., has_reference: _Optional[bool] = ..., privileged: _Optional[_Mapping[str, str]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class EpisodeState(_message.Message):
    __slots__ = ("task", "observation", "turn", "done", "data_json")
    TASK_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    task: Task
    observation: str
    turn: int
    done: bool
    data_json: str
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., observation: _Optional[str] = ..., turn: _Optional[int] = ..., done: _Optional[bool] = ..., data_json: _Optional[str] = ...) -> None: ...

class SampleTasksRequest(_message.Message):
    __slots__ = ("n", "split", "seed")
    N_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    n: int
    split: str
    seed: int
    def __init__(self, n: _Optional[int] = ..., split: _Optional[str] = ..., seed: _Optional[int] = ...) -> None: ...

class SampleTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("states",)
    STATES_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedCompositeFieldContainer[EpisodeState]
    def __init__(self, states: _Optional[_Iterable[_Union[EpisodeState, _Mapping]]] = ...) -> None: ...

class StepItem(_message.Message):
    __slots__ = ("state", "action")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    state: EpisodeState
    action: str
    def __init__(self, state: _Optional[_Union[EpisodeState, _Mapping]] = ..., action: _Optional[str] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("state", "observation", "reward", "done", "diagnostic")
    STATE_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTIC_FIELD_NUMBER: _ClassVar[int]
    state: EpisodeState
    observation: str
    reward: float
    done: bool
    diagnostic: str
    def __init__(self, state: _Optional[_Union[EpisodeState, _Mapping]] = ..., observation: _Optional[str] = ..., reward: _Optional[float] = ..., done: _Optional[bool] = ..., diagnostic: _Optional[str] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[StepItem]
    def __init__(self, items: _Optional[_Iterable[_Union[StepItem, _Mapping]]] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[StepResult]
    def __init__(self, results: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ...) -> None: ...

class ScoreItem(_message.Message):
    __slots__ = ("task", "completion")
    TASK_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    task: Task
    completion: str
    def __init__(self, task: _Optional[_Union[Task, _Mapping]] = ..., completion: _Optional[str] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ScoreItem]
    def __init__(self, items: _Optional[_Iterable[_Union[ScoreItem, _Mapping]]] = ...) -> None: ...

class ScoreResult(_message.Message):
    __slots__ = ("reward", "diagnostic")
    REWARD_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTIC_FIELD_NUMBER: _ClassVar[int]
    reward: float
    diagnostic: str
    def __init__(self, reward: _Optional[float] = ..., diagnostic: _Optional[str] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScoreResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ScoreResult, _Mapping]]] = ...) -> None: ...
