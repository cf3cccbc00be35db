"""Write HF safetensors files from a stream of tensors, one tensor in memory at a time.

A safetensors file is ``u64 header length | JSON header | raw bytes``; the header names every
tensor's dtype, shape and byte range. Given the layout up front (names, dtypes and shapes are
known from a sharded model's global shapes), the header can be written first and each tensor's
bytes appended as it arrives, so a trainer that gathers its sharded parameters one by one never
holds a full copy of the model. Large models are split into ``model-0000i-of-0000n.safetensors``
files with a ``model.safetensors.index.json``, as ``save_pretrained`` does.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
DEFAULT_MAX_SHARD_BYTES = 5 * 2**30

# torch dtype name -> (safetensors code, bytes per element)
_DTYPES: dict[str, tuple[str, int]] = {
    "float32": ("F32", 4),
    "float16": ("F16", 2),
    "bfloat16": ("BF16", 2),
    "float64": ("F64", 8),
    "int64": ("I64", 8),
    "int32": ("I32", 4),
    "int16": ("I16", 2),
    "int8": ("I8", 1),
    "uint8": ("U8", 1),
    "bool": ("BOOL", 1),
}


@dataclass(frozen=True)
class TensorLayout:
    """One tensor of the stream: its name, torch dtype name (``float32``, ``bfloat16``...) and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * _DTYPES[self.dtype][1]


def layout_of(name: str, tensor: Any) -> TensorLayout:
    """The layout entry of a torch tensor (a DTensor's global shape)."""
    return TensorLayout(name, str(tensor.dtype).removeprefix("torch."), tuple(int(s) for s in tensor.shape))


def plan_shards(layout: Sequence[TensorLayout], max_shard_bytes: int) -> list[list[TensorLayout]]:
    """Consecutive groups of tensors of at most ``max_shard_bytes`` each (a larger tensor gets its own)."""
    shards: list[list[TensorLayout]] = [[]]
    size = 0
    for entry in layout:
        if shards[-1] and size + entry.nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(entry)
        size += entry.nbytes
    return shards


def _header(entries: Sequence[TensorLayout]) -> bytes:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for entry in entries:
        header[entry.name] = {
            "dtype": _DTYPES[entry.dtype][0],
            "shape": list(entry.shape),
            "data_offsets": [offset, offset + entry.nbytes],
        }
        offset += entry.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    return struct.pack("<Q", len(text)) + text


def _tensor_bytes(tensor: Any) -> memoryview:
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy())


def write_safetensors_stream(
    directory: str | Path,
    layout: Sequence[TensorLayout],
    tensors: Iterable[tuple[str, Any]],
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
) -> list[Path]:
    """Write ``tensors`` (yielded in ``layout`` order, matching it) into safetensors files.

    Each tensor is written as soon as it is yielded and not kept. Returns the files written.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    shards = plan_shards(layout, max_shard_bytes)
    names = (
        [SINGLE_FILE]
        if len(shards) == 1
        else [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    )
    stream = iter(tensors)
    for file_name, entries in zip(names, shards, strict=True):
        with open(target / file_name, "wb") as handle:
            handle.write(_header(entries))
            for entry in entries:
                name, tensor = next(stream)
                got = layout_of(name, tensor)
                if got != entry:
                    raise ValueError(
                        f"tensor stream out of step with its layout: expected {entry}, got {got}"
                    )
                handle.write(_tensor_bytes(tensor))
                del tensor
    if next(stream, None) is not None:
        raise ValueError("the tensor stream has more tensors than its layout")
    if len(shards) > 1:
        weight_map = {
            entry.name: file_name
            for file_name, entries in zip(names, shards, strict=True)
            for entry in entries
        }
        index = {"metadata": {"total_size": sum(entry.nbytes for entry in layout)}, "weight_map": weight_map}
        (target / INDEX_FILE).write_text(json.dumps(index, indent=1))
    return [target / name for name in names]
