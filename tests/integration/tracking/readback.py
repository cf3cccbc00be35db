"""Read what each tracker wrote, with each tool's own reader (W&B: its offline transaction log)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

_BLOCK = 32 * 1024
_HEADER = b":W&B\xe1\xbe\x00"


def tensorboard_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def tensorboard_report(log_dir: Path) -> tuple[str, list[str]]:
    """The report text and the image tags."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"tensors": 0, "images": 0})
    events.Reload()
    text = events.Tensors("report/text_summary")[-1].tensor_proto.string_val[0].decode()
    return text, events.Tags()["images"]


def _wandb_records(path: Path) -> list[bytes]:
    """Records of a W&B transaction log (LevelDB log format: 32 KiB blocks, 7-byte record headers)."""
    data = path.read_bytes()
    assert data.startswith(_HEADER), f"{path} is not a W&B transaction log"
    records, pending, position = [], b"", len(_HEADER)
    while position + 7 <= len(data):
        left = _BLOCK - position % _BLOCK
        if left < 7:
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if kind == 0 and length == 0:
            position += left
            continue
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind == 1:
            records.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            records.append(pending + chunk)
            pending = b""
    return records


def wandb_offline_run(directory: Path) -> tuple[dict[int, dict[str, Any]], dict[str, Any], Path]:
    """History (step -> values), summary and files folder of the one offline run under ``directory``."""
    from wandb.proto import wandb_internal_pb2

    logs = sorted(directory.glob("wandb/offline-run-*/run-*.wandb"))
    history: dict[int, dict[str, Any]] = {}
    summary: dict[str, Any] = {}
    for log in logs:
        for raw in _wandb_records(log):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(raw)
            kind = record.WhichOneof("record_type")
            if kind == "history":
                values = {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
                history[int(values["_step"])] = values
            elif kind == "summary":
                summary.update(
                    {
                        item.key or "/".join(item.nested_key): json.loads(item.value_json)
                        for item in record.summary.update
                    }
                )
    return history, summary, logs[-1].parent / "files"


def mlflow_run(tracking_uri: str, run_id: str) -> tuple[Any, Any]:
    """The MLflow client and the run."""
    import os

    # The orchestrator's tracker opted into MLflow's file store in its own process; so does the reader.
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    return client, client.get_run(run_id)


def trackio_logs(project: str, run: str) -> list[dict[str, Any]]:
    from trackio import SQLiteStorage

    return list(SQLiteStorage.get_logs(project, run))
