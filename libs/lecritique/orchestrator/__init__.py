"""The experiment loop (one orchestrator per experiment): rollout -> verify -> evaluate ->
freeze advantages -> replay -> train -> publish, with checkpointed, exactly-once policy steps.

- ``loop``: around the steps: recovery after a restart, the initial evaluation, the critic warm-up
  (the spec's warnings come from ``config.findings``);
- ``step``: one policy step top to bottom: batch, advantages, replay, train, publish, measure and
  commit;
- ``batches``: batches in cursor order from the rollout and evaluation producer threads, each the
  draw of its stream (the policy steps' or the warm-up's) at its cursor;
- ``critic_stage``: what the critic is shown for each batch and its values;
- ``episodes``: a batch of groups played through the services; ``heldout``: greedy evaluation;
- ``telemetry``: ``metrics.jsonl`` and Prometheus; ``state``: the exactly-once checkpoint;
- ``clients``: typed clients of the services; ``wiring``: an orchestrator from their addresses.
"""
