"""Prompt templates: how observations and actions become one growing token sequence.

A conversation is built incrementally, in token ids, so its boundaries are exact::

    ids  = encode(template.initial(first_observation), add_special_tokens=True)
    ids += action_ids                    # the policy's tokens, ending with its EOS token
    ids += encode(template.continuation(next_observation), add_special_tokens=False)
    ids += action_ids ...

Tokenising the concatenated text instead could merge tokens across a boundary (BPE) and change
which tokens the policy "generated". ``plain`` concatenates text (tiny character-level models);
``chat`` uses the tokenizer's chat template, observations as user messages and actions as
assistant turns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PlainTemplateConfig(BaseModel):
    """Text concatenation: ``prefix + observation + action_cue``, then the action."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["plain"] = "plain"
    """Discriminator."""
    observation_prefix: str = ""
    """Text placed before every observation."""
    action_cue: str = ""
    """Text placed after every observation, right before the policy's action."""


class ChatTemplateConfig(BaseModel):
    """The tokenizer's own chat template: observations are user turns, actions assistant turns."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["chat"] = "chat"
    """Discriminator."""
    system_prompt: str | None = None
    """Optional system message placed before the first observation."""


TemplateConfig = Annotated[PlainTemplateConfig | ChatTemplateConfig, Field(discriminator="kind")]


class PromptTemplate(ABC):
    """Renders the text around the policy's actions."""

    @abstractmethod
    def initial(self, prompt_text: str) -> str:
        """Text before the first action: the first observation and the cue to act."""

    @abstractmethod
    def continuation(self, observation_text: str) -> str:
        """Text appended after an action (which ends with the EOS token) to show the next
        observation and cue the next action."""


class PlainTemplate(PromptTemplate):
    def __init__(self, config: PlainTemplateConfig | None = None) -> None:
        self.config = config or PlainTemplateConfig()

    def initial(self, prompt_text: str) -> str:
        return f"{self.config.observation_prefix}{prompt_text}{self.config.action_cue}"

    def continuation(self, observation_text: str) -> str:
        return f"{self.config.observation_prefix}{observation_text}{self.config.action_cue}"


_ACTION_SENTINEL = "\u2063ACTION\u2063"


class ChatTemplate(PromptTemplate):
    """Uses ``tokenizer.apply_chat_template``; needs a tokenizer with a chat template."""

    def __init__(self, tokenizer: Any, config: ChatTemplateConfig | None = None) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("template kind 'chat' needs a tokenizer with a chat template; use kind 'plain'")
        self.tokenizer = tokenizer
        self.config = config or ChatTemplateConfig()

    def _system(self) -> list[dict[str, str]]:
        if self.config.system_prompt is None:
            return []
        return [{"role": "system", "content": self.config.system_prompt}]

    def _render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        rendered = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return str(rendered)

    def initial(self, prompt_text: str) -> str:
        return self._render(
            [*self._system(), {"role": "user", "content": prompt_text}], add_generation_prompt=True
        )

    def continuation(self, observation_text: str) -> str:
        # Render a conversation with a placeholder action, keep what follows the placeholder, and
        # drop the end-of-turn marker the policy already produced as its EOS token.
        messages = [
            *self._system(),
            {"role": "user", "content": "."},
            {"role": "assistant", "content": _ACTION_SENTINEL},
            {"role": "user", "content": observation_text},
        ]
        rendered = self._render(messages, add_generation_prompt=True)
        position = rendered.rfind(_ACTION_SENTINEL)
        if position < 0:
            raise ValueError("the chat template dropped the assistant message; cannot derive a continuation")
        tail = rendered[position + len(_ACTION_SENTINEL) :]
        eos = self.tokenizer.eos_token
        if eos and tail.startswith(eos):
            tail = tail[len(eos) :]
        return tail


def build_template(
    config: PlainTemplateConfig | ChatTemplateConfig | Literal["plain", "chat"], tokenizer: Any = None
) -> PromptTemplate:
    """The template described by ``config`` or by a bare kind (``chat`` needs the policy's tokenizer)."""
    if config == "plain":
        config = PlainTemplateConfig()
    elif config == "chat":
        config = ChatTemplateConfig()
    elif isinstance(config, str):
        raise ValueError(f"unknown template kind {config!r}; use 'plain' or 'chat'")
    if isinstance(config, PlainTemplateConfig):
        return PlainTemplate(config)
    if tokenizer is None:
        raise ValueError("template kind 'chat' needs the policy's tokenizer")
    return ChatTemplate(tokenizer, config)


def encode_turns(
    template: PromptTemplate, tokenizer: Any, turns: Sequence[tuple[str, str]]
) -> tuple[list[int], list[bool]]:
    """Token ids of a whole episode and a mask that is True on action tokens (each action + EOS).

    ``turns`` are ``(observation, action)`` pairs. Used for supervised warm starts: the loss goes
    on the masked tokens only.
    """
    if not turns:
        raise ValueError("encode_turns needs at least one (observation, action) turn")
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos_token; actions must end with one")
    ids: list[int] = []
    mask: list[bool] = []
    for index, (observation, action) in enumerate(turns):
        if index == 0:
            context = tokenizer.encode(template.initial(observation), add_special_tokens=True)
        else:
            context = tokenizer.encode(template.continuation(observation), add_special_tokens=False)
        action_ids = [*tokenizer.encode(action, add_special_tokens=False), tokenizer.eos_token_id]
        ids += context + action_ids
        mask += [False] * len(context) + [True] * len(action_ids)
    return ids, mask
