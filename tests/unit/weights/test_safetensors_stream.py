"""The streaming safetensors writer: files HF and safetensors read, written one tensor at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

from lecritique.weights.safetensors_stream import (
    INDEX_FILE,
    SINGLE_FILE,
    TensorLayout,
    layout_of,
    plan_shards,
    write_safetensors_stream,
)


def _tensors() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(3, 5, generator=generator),
        "b.bias": torch.randn(7, generator=generator).to(torch.bfloat16),
        "c.scalar": torch.tensor(2.5, dtype=torch.float64),
        "d.index": torch.arange(4, dtype=torch.int64),
        "e.mask": torch.tensor([True, False, True]),
    }


def test_a_stream_becomes_one_file_that_safetensors_reads_back(tmp_path: Path) -> None:
    tensors = _tensors()
    layout = [layout_of(name, tensor) for name, tensor in tensors.items()]
    [written] = write_safetensors_stream(tmp_path, layout, iter(tensors.items()))
    assert written == tmp_path / SINGLE_FILE
    loaded = load_file(str(written))
    assert loaded.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert loaded[name].dtype == tensor.dtype
        torch.testing.assert_close(loaded[name], tensor, rtol=0, atol=0)


def test_each_tensor_is_on_disk_before_the_next_one_is_asked_for(tmp_path: Path) -> None:
    # Tensors larger than Python's write buffer go straight to the file.
    tensors = {f"t{i}": torch.full((50_000,), float(i)) for i in range(4)}
    layout = [layout_of(name, tensor) for name, tensor in tensors.items()]
    target = tmp_path / SINGLE_FILE
    on_disk: list[int] = []

    def stream() -> Iterator[tuple[str, torch.Tensor]]:
        for name, tensor in tensors.items():
            on_disk.append(target.stat().st_size if target.exists() else 0)
            yield name, tensor

    write_safetensors_stream(tmp_path, layout, stream())
    # When tensor i is requested, tensors 0..i-1 are already written: the writer keeps none of them.
    for index, size in enumerate(on_disk[1:], start=1):
        assert size >= index * 200_000
    assert target.stat().st_size >= 4 * 200_000


def test_large_models_are_split_into_shards_with_an_index_that_from_pretrained_reads(tmp_path: Path) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    named = [(name, p.detach()) for name, p in model.named_parameters()]  # tied head appears once
    layout = [layout_of(name, tensor) for name, tensor in named]
    files = write_safetensors_stream(tmp_path, layout, iter(named), max_shard_bytes=20_000)
    assert len(files) > 2 and all(f.name.endswith(f"-of-{len(files):05d}.safetensors") for f in files)
    index = json.loads((tmp_path / INDEX_FILE).read_text())
    assert set(index["weight_map"]) == {name for name, _ in named}
    config.save_pretrained(tmp_path)
    loaded = LlamaForCausalLM.from_pretrained(str(tmp_path))
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, rtol=0, atol=0)


def test_a_stream_out_of_step_with_its_layout_is_refused(tmp_path: Path) -> None:
    tensors = _tensors()
    layout = [layout_of(name, tensor) for name, tensor in tensors.items()]
    with pytest.raises(ValueError, match="out of step"):
        write_safetensors_stream(tmp_path, layout, iter(reversed(list(tensors.items()))))
    with pytest.raises(ValueError, match="more tensors"):
        write_safetensors_stream(tmp_path / "x", layout[:2], iter(tensors.items()))


def test_shard_plan_keeps_order_and_gives_an_oversized_tensor_its_own_file() -> None:
    layout = [
        TensorLayout("a", "float32", (10,)),
        TensorLayout("b", "float32", (100,)),
        TensorLayout("c", "float32", (5,)),
    ]
    assert [[e.name for e in shard] for shard in plan_shards(layout, 100)] == [["a"], ["b"], ["c"]]
    assert [[e.name for e in shard] for shard in plan_shards(layout, 1000)] == [["a", "b", "c"]]
