"""Character tokenizers load through AutoTokenizer and round-trip text exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from lecritique.models.char_tokenizer import SPECIAL_TOKENS, alphabet_of, build_char_tokenizer

ALPHABET = "1234.\nrc=x "


@pytest.fixture(scope="module")
def saved_tokenizer(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    directory = tmp_path_factory.mktemp("tok")
    build_char_tokenizer(ALPHABET).save_pretrained(str(directory))
    assert (directory / "tokenizer.json").is_file()
    return AutoTokenizer.from_pretrained(str(directory))


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=80))
def test_encode_decode_round_trips(saved_tokenizer, text: str) -> None:  # type: ignore[no-untyped-def]
    ids = saved_tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == len(text), "one token per character"
    assert saved_tokenizer.decode(ids) == text
    with_bos = saved_tokenizer.encode(text, add_special_tokens=True)
    assert with_bos == [saved_tokenizer.bos_token_id, *ids]
    assert saved_tokenizer.decode(with_bos, skip_special_tokens=True) == text


def test_special_tokens_and_vocabulary_order(saved_tokenizer) -> None:  # type: ignore[no-untyped-def]
    assert saved_tokenizer.convert_ids_to_tokens([0, 1, 2, 3]) == list(SPECIAL_TOKENS)
    assert (saved_tokenizer.pad_token_id, saved_tokenizer.unk_token_id) == (0, 1)
    assert (saved_tokenizer.bos_token_id, saved_tokenizer.eos_token_id) == (2, 3)
    assert len(saved_tokenizer) == 4 + len(set(ALPHABET))
    assert saved_tokenizer.padding_side == "left"
    chars = saved_tokenizer.convert_ids_to_tokens(list(range(4, len(saved_tokenizer))))
    assert chars == sorted(set(ALPHABET))


def test_unknown_characters_map_to_unk(saved_tokenizer) -> None:  # type: ignore[no-untyped-def]
    assert saved_tokenizer.encode("1z2", add_special_tokens=False)[1] == saved_tokenizer.unk_token_id


def test_same_alphabet_gives_the_same_file(tmp_path: Path) -> None:
    for name, alphabet in (("a", "r1c=."), ("b", ".=c1r")):
        build_char_tokenizer(alphabet).save_pretrained(str(tmp_path / name))
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (tmp_path / "b" / "tokenizer.json").read_text()


def test_alphabet_helpers() -> None:
    assert alphabet_of(["ba\n", "ab"]) == ["\n", "a", "b"]
    with pytest.raises(ValueError, match="single characters"):
        build_char_tokenizer(["ab", "c"])
