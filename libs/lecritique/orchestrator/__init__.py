"""The experiment loop (one orchestrator per experiment): rollout -> verify -> evaluate ->
freeze advantages -> replay -> train -> publish, with checkpointed, exactly-once policy steps."""
