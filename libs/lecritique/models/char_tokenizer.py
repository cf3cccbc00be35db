"""Character-level tokenizers for tiny CPU models, built with the ``tokenizers`` library.

One token per character of a fixed alphabet plus ``<pad>``, ``<unk>``, ``<bos>``, ``<eos>``.
Saved as ``tokenizer.json`` + ``tokenizer_config.json`` so ``AutoTokenizer.from_pretrained(dir)``
(and vLLM) load it like any fast tokenizer. Encoding with special tokens prepends ``<bos>``;
decoding concatenates characters with no separator, so ``decode(encode(text)) == text`` for every
text over the alphabet.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)


def alphabet_of(texts: Iterable[str]) -> list[str]:
    """Sorted distinct characters of ``texts`` (the vocabulary order is therefore deterministic)."""
    chars: set[str] = set()
    for text in texts:
        chars.update(text)
    return sorted(chars)


def build_char_tokenizer(alphabet: Iterable[str]) -> PreTrainedTokenizerFast:
    """A fast tokenizer with ids 0..3 for the special tokens and one id per alphabet character."""
    chars = sorted(set(alphabet))
    for char in chars:
        if len(char) != 1:
            raise ValueError(f"alphabet entries must be single characters, got {char!r}")
    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *chars])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # Every character, newlines included, becomes its own pre-token; WordLevel maps it to its id.
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])]
    )
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        padding_side="left",
    )
