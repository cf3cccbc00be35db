import numpy as np

from lecritique.orchestrator.row import StepRow
from lecritique.orchestrator.state import CheckpointStore, OrchestratorState, PendingStep
from lecritique.trajectory import Trajectory


def test_state_and_pending_round_trip(tmp_path):
    store = CheckpointStore(tmp_path)
    assert store.load() == OrchestratorState()
    state = OrchestratorState(
        completed_step=3,
        cursor=5,
        estimator={"rho": [0.2]},
        warmup_done=True,
        policy_version=3,
        reward_average=0.25,
        reward_average_batches=5,
    )
    store.save(state)
    assert CheckpointStore(tmp_path).load() == state
    trajectory = Trajectory(
        "a", "t", 0, [1], [2, 3], [1, 1], [-0.5, -0.1], [0, 0], 1.0, 3, advantages=np.array([0.5, 0.5])
    )
    row = StepRow(
        step=4,
        critic={"states": 3.0},
        estimator={"tether_rho": 0.5},
        value_ev_buckets={1: 0.25},
        train_seconds=2.0,
    )
    pending = PendingStep(4, [trajectory, trajectory], OrchestratorState(completed_step=4, cursor=6), row)
    store.save_pending(pending)
    loaded = store.load_pending()
    assert loaded.step == 4 and loaded.metrics == row and loaded.state_after.cursor == 6
    assert [t.to_bytes() for t in loaded.trajectories] == [trajectory.to_bytes()] * 2
    store.clear_pending()
    assert store.load_pending() is None
    assert not list(tmp_path.glob("*.tmp"))
