"""Prompt templates: incremental token building matches a full rendering, boundaries are exact."""

from __future__ import annotations

import pytest

from lecritique.models.char_tokenizer import build_char_tokenizer
from lecritique.models.templates import (
    ChatTemplate,
    ChatTemplateConfig,
    PlainTemplate,
    PlainTemplateConfig,
    build_template,
    encode_turns,
)

TURNS = [("12.4\n", "r1c3=3"), ("\n1234\n", "r2c1=1")]
# A ChatML-like template over a character vocabulary, with <eos> closing every turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}<bos>{{ message['role'] }}\n{{ message['content'] }}<eos>\n{% endfor %}"
    "{% if add_generation_prompt %}<bos>assistant\n{% endif %}"
)


@pytest.fixture
def tokenizer():  # type: ignore[no-untyped-def]
    return build_char_tokenizer("abcdefghijklmnopqrstuvwxyz0123456789.=\n :")


@pytest.fixture
def chat_tokenizer(tokenizer):  # type: ignore[no-untyped-def]
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def test_plain_template_concatenates_with_prefix_and_cue() -> None:
    template = PlainTemplate(PlainTemplateConfig(observation_prefix="obs:", action_cue="\nact:"))
    assert template.initial("12.4") == "obs:12.4\nact:"
    assert template.continuation("\n1234") == "obs:\n1234\nact:"
    assert PlainTemplate().initial("12.4\n") == "12.4\n"


def test_encode_turns_masks_exactly_the_actions_and_their_eos(tokenizer) -> None:  # type: ignore[no-untyped-def]
    ids, mask = encode_turns(PlainTemplate(), tokenizer, TURNS)
    assert len(ids) == len(mask)
    assert ids[0] == tokenizer.bos_token_id
    masked = [token for token, on in zip(ids, mask, strict=True) if on]
    expected = [*tokenizer.encode("r1c3=3", add_special_tokens=False), tokenizer.eos_token_id]
    expected += [*tokenizer.encode("r2c1=1", add_special_tokens=False), tokenizer.eos_token_id]
    assert masked == expected
    assert tokenizer.decode(ids) == "<bos>12.4\nr1c3=3<eos>\n1234\nr2c1=1<eos>"
    with pytest.raises(ValueError, match="at least one"):
        encode_turns(PlainTemplate(), tokenizer, [])


@pytest.mark.parametrize("system_prompt", [None, "solve it"])
def test_chat_template_increments_equal_the_full_rendering(chat_tokenizer, system_prompt) -> None:  # type: ignore[no-untyped-def]
    template = ChatTemplate(chat_tokenizer, ChatTemplateConfig(system_prompt=system_prompt))
    system = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    messages = [
        *system,
        {"role": "user", "content": "grid 12.4"},
        {"role": "assistant", "content": "r1c3=3"},
        {"role": "user", "content": "grid 1234"},
    ]
    full = chat_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # The policy's action ends with its EOS token, which also closes the assistant turn.
    incremental = (
        template.initial("grid 12.4")
        + "r1c3=3"
        + chat_tokenizer.eos_token
        + template.continuation("grid 1234")
    )
    assert incremental == full
    ids, mask = encode_turns(template, chat_tokenizer, [("grid 12.4", "r1c3=3"), ("grid 1234", "r2c1=1")])
    assert chat_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m]) == "r1c3=3<eos>r2c1=1<eos>"


def test_build_template_from_config_or_kind(chat_tokenizer, tokenizer) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(build_template("plain"), PlainTemplate)
    assert isinstance(build_template(PlainTemplateConfig(action_cue=":")), PlainTemplate)
    assert isinstance(build_template("chat", chat_tokenizer), ChatTemplate)
    with pytest.raises(ValueError, match="needs the policy's tokenizer"):
        build_template(ChatTemplateConfig())
    with pytest.raises(ValueError, match="unknown template kind 'jinja'"):
        build_template("jinja")  # type: ignore[arg-type]


def test_chat_template_requires_a_tokenizer_chat_template() -> None:
    plain_tokenizer = build_char_tokenizer("abc")
    with pytest.raises(ValueError, match="chat template"):
        ChatTemplate(plain_tokenizer)
