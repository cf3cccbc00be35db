"""BabyAI as text: a long-horizon pick-up task in a grid of rooms joined by closed doors.

Levels are minigrid's BabyAI ``Pickup`` level (PyPI ``minigrid``; by default a 3x3 grid of 8x8
rooms, every door closed but unlocked, 18 objects, mission "pick up a <color> <type>"), the
closest stock level to the LVRL paper's BabyAI pools. The agent sees only a text description of
its egocentric 7x7 view (walls block sight, as in minigrid).

Turn protocol::

    prompt        "Mission: pick up a red ball.\\nActions: turn left, turn right, go forward, pick
                  up, drop, toggle.\\nObservation: <view>\\nAction: "
    action        one of the six action phrases (case and surrounding whitespace ignored)
    observation   "\\nObservation: <view>\\nAction: " after every step that does not end the episode
    <view>        "You see a wall 2 steps forward, a closed blue door 1 step right and 3 steps
                  forward, a red ball 2 steps left and 1 step forward." (walls: the nearest one
                  straight ahead, left and right; then every visible object and door, nearest
                  first) followed by "You are carrying a green key." when carrying something

An unknown action is answered with an error observation and costs a step. The episode ends with
reward 1 when the mission is accomplished and with reward 0 when the step budget runs out.

Privileged context: ``solution`` (the shortest action sequence, found by a Dijkstra search over
(position, direction) on the full map: rotations, forward moves, door toggles and the final
pick-up each cost one action; minigrid's BabyAI bot is not used for it because it explores
under partial observability and its paths are longer) and ``map`` (the full grid, with a
legend). The bot serves as an independent check in the tests.

Splits, as in LVRL Table 5: disjoint seed ranges for train and eval layouts, each layout kept
only if its door distance (the number of doors on the shortest path) is in ``door_distances``.
Differences from LVRL: LVRL uses custom layouts with a fixed inventory of 18 objects and reports
door distances 1-3 crossing 1, 3 and 5 doors; here the stock Pickup generator draws 18 random
objects and door distance counts doors crossed directly.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import random
from collections import OrderedDict
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from lecritique.envs.answers import clean_completion, short
from lecritique.envs.base import (
    Demonstration,
    Environment,
    EpisodeState,
    ScoreResult,
    Split,
    StepResult,
    Task,
)
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.splits import derive_seed, task_id

ACTIONS = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
"""Action phrases, indexed like minigrid's ``Actions`` (left, right, forward, pickup, drop, toggle)."""
_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_COLOR_CODES = {"red": "r", "green": "g", "blue": "b", "purple": "p", "yellow": "y", "grey": "e"}
_ENV_CACHE_SIZE = 256


class BabyAITextConfig(EnvironmentConfigBase):
    kind: Literal["babyai_text"] = "babyai_text"
    """Selects the BabyAI-as-text environment."""
    level: Literal["Pickup"] = "Pickup"
    """minigrid BabyAI level class (rooms joined by closed doors, a pick-up mission)."""
    room_size: int = Field(default=8, ge=5, le=12)
    """Side of each room in cells, walls included."""
    rows: int = Field(default=3, ge=1, le=4)
    """Rows of rooms."""
    columns: int = Field(default=3, ge=1, le=4)
    """Columns of rooms."""
    door_distances: list[int] = Field(default_factory=lambda: [1, 2, 3])
    """Keep only layouts whose shortest path crosses one of these numbers of doors."""
    max_steps: int = Field(default=100, ge=1, le=2000)
    """Step budget of an episode (reward 0 when it runs out)."""
    train_seeds: tuple[int, int] = (0, 1_000_000)
    """Half-open range of minigrid seeds for training layouts."""
    eval_seeds: tuple[int, int] = (1_000_000_000, 1_001_000_000)
    """Half-open range of minigrid seeds for evaluation layouts (disjoint from train_seeds)."""

    @model_validator(mode="after")
    def _check(self) -> BabyAITextConfig:
        for name, (low, high) in (("train_seeds", self.train_seeds), ("eval_seeds", self.eval_seeds)):
            if not 0 <= low < high <= 2**31:
                raise ValueError(f"{name} must satisfy 0 <= low < high <= 2**31, got {[low, high]}")
        if self.train_seeds[0] < self.eval_seeds[1] and self.eval_seeds[0] < self.train_seeds[1]:
            raise ValueError(
                f"train_seeds {list(self.train_seeds)} overlap eval_seeds {list(self.eval_seeds)}"
            )
        if not self.door_distances or min(self.door_distances) < 0:
            raise ValueError(f"door_distances must be non-negative and non-empty, got {self.door_distances}")
        return self


def _make_level(config: BabyAITextConfig) -> Any:
    from minigrid.envs.babyai.pickup import Pickup  # imported lazily: minigrid pulls in gymnasium/pygame

    return Pickup(room_size=config.room_size, num_rows=config.rows, num_cols=config.columns)


def _reset(env: Any, seed: int) -> None:
    # The level generator prints every rejected sample; keep the logs clean.
    with contextlib.redirect_stdout(io.StringIO()):
        env.reset(seed=seed)


def _steps(count: int, word: str) -> str:
    return f"{count} step {word}" if count == 1 else f"{count} steps {word}"


def _describe_object(obj: Any) -> str:
    if obj.type == "door":
        state = "locked" if obj.is_locked else "open" if obj.is_open else "closed"
        return f"a {state} {obj.color} door"
    return f"a {obj.color} {obj.type}"


def describe_view(env: Any) -> str:
    """The egocentric text observation of the agent's current view."""
    grid, visible = env.gen_obs_grid()
    size = grid.width
    middle, bottom = size // 2, size - 1
    walls = []
    for label, cells in (
        ("forward", [(middle, bottom - k) for k in range(1, size)]),
        ("left", [(middle - k, bottom) for k in range(1, middle + 1)]),
        ("right", [(middle + k, bottom) for k in range(1, middle + 1)]),
    ):
        for distance, (i, j) in enumerate(cells, start=1):
            cell = grid.get(i, j)
            if visible[i, j] and cell is not None and cell.type == "wall":
                walls.append(f"a wall {_steps(distance, label)}")
                break
    things = []
    for j in range(size):
        for i in range(size):
            cell = grid.get(i, j)
            if not visible[i, j] or cell is None or cell.type == "wall" or (i, j) == (middle, bottom):
                continue
            forward, side = bottom - j, i - middle
            where = []
            if side:
                where.append(_steps(abs(side), "left" if side < 0 else "right"))
            if forward:
                where.append(_steps(forward, "forward"))
            things.append((forward + abs(side), f"{_describe_object(cell)} {' and '.join(where)}"))
    parts = walls + [text for _, text in sorted(things)]
    view = f"You see {', '.join(parts)}." if parts else "You see nothing but floor."
    if env.carrying is not None:
        view += f" You are carrying {_describe_object(env.carrying)}."
    return view


def render_map(env: Any) -> str:
    """The full grid, two characters per cell, with a legend (privileged: the agent never sees it)."""
    letters = {"key": "K", "ball": "A", "box": "B", "goal": "G", "floor": ".", "lava": "V"}
    arrows = (">>", "vv", "<<", "^^")
    lines = [
        "Legend: ## wall, .. floor, D closed door, d open door, L locked door, K key, A ball, B box; "
        "second letter = colour (r red, g green, b blue, p purple, y yellow, e grey); "
        f"agent {'/'.join(arrows)} (facing right/down/left/up). Mission: {env.mission}."
    ]
    agent = (int(env.agent_pos[0]), int(env.agent_pos[1]))
    for y in range(env.grid.height):
        row = []
        for x in range(env.grid.width):
            cell = env.grid.get(x, y)
            if (x, y) == agent:
                row.append(arrows[env.agent_dir])
            elif cell is None:
                row.append("..")
            elif cell.type == "wall":
                row.append("##")
            elif cell.type == "door":
                row.append(
                    ("L" if cell.is_locked else "d" if cell.is_open else "D") + _COLOR_CODES[cell.color]
                )
            else:
                row.append(letters.get(cell.type, "?") + _COLOR_CODES.get(cell.color, "?"))
        lines.append("".join(row))
    return "\n".join(lines)


def shortest_plan(env: Any) -> tuple[list[int], int] | None:
    """Fewest actions that accomplish the pick-up mission on the full map, and doors crossed.

    Dijkstra over (x, y, direction); a closed unlocked door costs toggle + forward. Returns None
    when no target is reachable.
    """
    actions = env.actions
    targets = {
        tuple(int(v) for v in obj.cur_pos) for obj in env.instrs.desc.obj_set if obj.cur_pos is not None
    }
    start = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
    queue: list[tuple[int, int, tuple[int, int, int]]] = [(0, 0, start)]
    best = {start: (0, 0)}
    parent: dict[tuple[int, int, int], tuple[tuple[int, int, int], list[int]]] = {}
    while queue:
        cost, doors, state = heapq.heappop(queue)
        if best.get(state, (cost + 1, 0))[0] < cost:
            continue
        x, y, direction = state
        dx, dy = _DIRECTIONS[direction]
        front = (x + dx, y + dy)
        if front in targets:
            plan = [int(actions.pickup)]
            while state in parent:
                state, segment = parent[state]
                plan[:0] = segment
            return plan, doors
        moves: list[tuple[tuple[int, int, int], list[int], int]] = [
            ((x, y, (direction - 1) % 4), [int(actions.left)], 0),
            ((x, y, (direction + 1) % 4), [int(actions.right)], 0),
        ]
        cell = env.grid.get(*front)
        if cell is None:
            moves.append(((front[0], front[1], direction), [int(actions.forward)], 0))
        elif cell.type == "door" and not cell.is_locked:
            opening = [] if cell.is_open else [int(actions.toggle)]
            moves.append(((front[0], front[1], direction), [*opening, int(actions.forward)], 1))
        for successor, steps, crossed in moves:
            successor_cost = cost + len(steps)
            if successor_cost < best.get(successor, (successor_cost + 1, 0))[0]:
                best[successor] = (successor_cost, doors + crossed)
                parent[successor] = (state, steps)
                heapq.heappush(queue, (successor_cost, doors + crossed, successor))
    return None


def parse_action(action: object) -> int | None:
    if not isinstance(action, str) or len(action) > 64:
        return None
    text = " ".join(action.strip().lower().rstrip(".").split())
    return ACTIONS.index(text) if text in ACTIONS else None


class BabyAITextEnvironment(Environment):
    name: ClassVar[str] = "babyai_text"
    multi_turn: ClassVar[bool] = True
    privileged_kinds: ClassVar[tuple[str, ...]] = ("solution", "map")
    max_action_chars: int = 64

    def __init__(self, config: BabyAITextConfig | None = None) -> None:
        self.config = config or BabyAITextConfig()
        self.max_turns = self.config.max_steps
        self._live: OrderedDict[tuple[str, tuple[int, ...]], Any] = OrderedDict()

    def _header(self, mission: str) -> str:
        return f"Mission: {mission}.\nActions: {', '.join(ACTIONS)}.\n"

    def _candidate(self, level_seed: int) -> Task | None:
        env = _make_level(self.config)
        _reset(env, level_seed)
        found = shortest_plan(env)
        if found is None or found[1] not in self.config.door_distances:
            return None
        plan, doors = found
        solution = ", ".join(ACTIONS[action] for action in plan)
        layout = render_map(env)
        return Task(
            task_id=task_id(self.name, f"{self.config.model_dump_json()}\n{level_seed}"),
            prompt=f"{self._header(env.mission)}Observation: {describe_view(env)}\nAction: ",
            reference=solution,
            privileged={"solution": solution, "map": layout},
            metadata={"seed": level_seed, "door_distance": doors, "optimal_actions": len(plan)},
        )

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        low, high = self.config.train_seeds if split == "train" else self.config.eval_seeds
        rng = random.Random(derive_seed(self.name, split, seed))
        tasks: list[Task] = []
        for _ in range(1000 + 50 * n):
            if len(tasks) == n:
                return tasks
            task = self._candidate(rng.randrange(low, high))
            if task is not None:
                tasks.append(task)
        raise RuntimeError(f"babyai_text: too few layouts with door distance in {self.config.door_distances}")

    def reset(self, task: Task) -> EpisodeState:
        return EpisodeState(task=task, observation=task.prompt, data={"actions": []})

    def _env_after(self, task: Task, history: tuple[int, ...]) -> Any:
        """A live minigrid env in the state after ``history`` (cached, or rebuilt by replay)."""
        key = (task.task_id, history)
        if key in self._live:
            return self._live.pop(key)
        env = _make_level(self.config)
        _reset(env, int(task.metadata["seed"]))
        for action in history:
            env.step(action)
        return env

    def step(self, state: EpisodeState, action: str) -> StepResult:
        if state.done:
            raise ValueError(f"episode of task {state.task.task_id} is already done")
        history = tuple(int(a) for a in state.data["actions"])
        turn = state.turn + 1
        chosen = parse_action(action)
        if chosen is None:
            diagnostic = (
                f"invalid action {short(action) if isinstance(action, str) else type(action).__name__}"
            )
            if turn >= self.config.max_steps:
                return self._finish(state, history, turn, 0.0, f"{diagnostic}; step budget exhausted")
            observation = f"\nObservation: Invalid action. Valid actions: {', '.join(ACTIONS)}.\nAction: "
            data = {"actions": list(history)}
            return StepResult(
                EpisodeState(state.task, observation, turn, False, data), observation, 0.0, False, diagnostic
            )
        env = self._env_after(state.task, history)
        _, reward, terminated, _, _ = env.step(chosen)
        history = (*history, chosen)
        if terminated and reward > 0:
            return self._finish(state, history, turn, 1.0, f"mission accomplished in {turn} steps")
        if terminated or turn >= self.config.max_steps:
            return self._finish(
                state, history, turn, 0.0, f"step budget of {self.config.max_steps} exhausted"
            )
        self._live[(state.task.task_id, history)] = env
        if len(self._live) > _ENV_CACHE_SIZE:
            self._live.popitem(last=False)
        observation = f"\nObservation: {describe_view(env)}\nAction: "
        data = {"actions": list(history)}
        return StepResult(
            EpisodeState(state.task, observation, turn, False, data), observation, 0.0, False, "ok"
        )

    def _finish(
        self, state: EpisodeState, history: tuple[int, ...], turn: int, reward: float, diagnostic: str
    ) -> StepResult:
        done = EpisodeState(state.task, "", turn, True, {"actions": list(history)})
        return StepResult(done, "", reward, True, diagnostic)

    def score(self, task: Task, completion: str) -> ScoreResult:
        """Replay a completion with one action per line (or comma-separated)."""
        text, problem = clean_completion(completion)
        if text is None:
            return ScoreResult(0.0, problem)
        state = self.reset(task)
        for action in text.replace(",", "\n").splitlines():
            if not action.strip():
                continue
            result = self.step(state, action)
            state = result.state
            if result.done:
                return ScoreResult(result.reward, result.diagnostic)
        return ScoreResult(0.0, f"mission not accomplished after {state.turn} steps")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        """The shortest solution, with the observations the environment really answers."""
        state = self.reset(task)
        turns: list[tuple[str, str]] = []
        for action in str(task.privileged["solution"]).split(", "):
            turns.append((state.observation, action))
            result = self.step(state, action)
            state = result.state
        if not (state.done and result.reward == 1.0):
            raise RuntimeError(f"the stored solution of task {task.task_id} does not accomplish the mission")
        return Demonstration(turns)
