"""The sandboxed side of reasoning-gym scoring: this file's text is the code a sandbox call runs.

Never imported by the verifier for scoring: :mod:`lecritique.envs.reasoning_gym_scoring` sends
its source to a fresh :class:`~lecritique.envs.sandbox.Sandbox` child per answer, which calls
:func:`score_answer`. Standard library only at the top: the child imports reasoning-gym itself.

Two guards beyond the sandbox's isolation, because the sandbox protects the host, not the reward:
a scorer that ``eval``s the answer would still hand it its own frame (``list(oracle_answer)`` reads
the reference from the scorer's locals), and sympy's ``parse_expr`` evaluates Python too.

- only this dataset's module is imported (reasoning-gym's ``__init__`` imports all 105 datasets:
  about 1 s and dozens of packages), with its parent packages as bare stand-ins;
- after the dataset is built and before the answer is scored, every reasoning-gym module's
  ``eval`` becomes a literal parser (``ast.literal_eval``: lists, numbers, strings, what the
  scorers' "Python list" partial credit needs), ``exec`` and ``compile`` refuse, and sympy's
  ``parse_expr``/``sympify`` first check a string as arithmetic (:func:`check_arithmetic`):
  numbers, names, operators and calls of the functions in ``FUNCTIONS``; no attribute, string,
  subscript, lambda, assignment or underscore name.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import keyword
import sys
import tokenize
import types
from collections.abc import Callable
from typing import Any

_FUNCTION_NAMES = """
    sin cos tan cot sec csc asin acos atan acot asec acsc atan2 sinh cosh tanh coth asinh acosh
    atanh acoth exp log ln sqrt cbrt root Abs abs sign floor ceiling factorial binomial gamma erf
    erfc erfi Ei Si Ci Shi Chi li LambertW Heaviside Integral Rational Integer Min Max min max
"""
FUNCTIONS = frozenset(_FUNCTION_NAMES.split())
"""Functions an answer parsed by sympy may call: sympy's elementary and common special functions
(references of ``intermediate_integration`` hold unevaluated ``Integral(...)``)."""
_OPERATORS = "+ - * / ** // % ( ) , ^ ! & | ~ < > <= >= == != << >>"
_PUNCTUATION = frozenset(_OPERATORS.split())
"""Operators an arithmetic answer may hold (``!``: sympy's factorial notation)."""
_INERT = frozenset(
    {tokenize.NUMBER, tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


def check_arithmetic(text: str) -> None:
    """Raise ValueError unless ``text`` is arithmetic: the only code sympy may build from it."""
    previous: tokenize.TokenInfo | None = None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as error:
        raise ValueError(f"not an expression: {error}") from None
    for token in tokens:
        kind, value = token.type, token.string
        if kind == tokenize.NAME:
            if value.startswith("_") or (keyword.iskeyword(value) and value not in ("True", "False")):
                raise ValueError(f"{value!r} is not allowed in an answer")
        elif kind in (tokenize.OP, tokenize.ERRORTOKEN) and value.strip():
            if value not in _PUNCTUATION:
                raise ValueError(f"{value!r} is not allowed in an answer")
            if value == "(" and previous is not None:
                _check_call(previous)
        elif kind == tokenize.STRING:
            raise ValueError("strings are not allowed in an answer")
        elif kind not in _INERT:
            raise ValueError(f"{value!r} is not allowed in an answer")
        if value.strip():
            previous = token


def _check_call(callee: tokenize.TokenInfo) -> None:
    """``callee`` is the token before an opening parenthesis."""
    if callee.type == tokenize.NAME and callee.string not in FUNCTIONS:
        raise ValueError(f"{callee.string!r} is not a function an answer may call")
    if callee.string == ")":
        raise ValueError("an answer may not call the result of an expression")


def _literal(source: Any, *args: Any, **kwargs: Any) -> Any:
    if args or kwargs or not isinstance(source, str):
        raise ValueError("only a literal may be evaluated here")
    return ast.literal_eval(source.strip())


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("executing code is not allowed while scoring an answer")


def _checked(parse: Callable[..., Any]) -> Callable[..., Any]:
    def parse_checked(text: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(text, str):
            check_arithmetic(text)
        return parse(text, *args, **kwargs)

    return parse_checked


def _import_alone(name: str) -> types.ModuleType:
    """Import ``name`` without running the ``__init__`` of the reasoning-gym packages above it."""
    parts = name.split(".")
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        if package not in sys.modules:
            spec = importlib.util.find_spec(package)
            if spec is None:
                raise ImportError(f"{package} is not visible in the sandbox")
            # The package's module object without executing its __init__.
            sys.modules[package] = importlib.util.module_from_spec(spec)
    return importlib.import_module(name)


def _guard() -> None:
    """Answers become data: see the module docstring."""
    parser = sys.modules.get("sympy.parsing.sympy_parser")
    sympy = sys.modules.get("sympy")
    checked_parse = _checked(parser.parse_expr) if parser is not None else None
    if parser is not None and sympy is not None and checked_parse is not None:
        parser.parse_expr = checked_parse  # type: ignore[attr-defined]
        sympy.parse_expr = checked_parse  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "reasoning_gym" or not isinstance(module, types.ModuleType):
            continue
        names = vars(module)
        for builtin, replacement in (("eval", _literal), ("exec", _refused), ("compile", _refused)):
            if builtin not in names:
                setattr(module, builtin, replacement)
        if checked_parse is not None and "parse_expr" in names:
            module.parse_expr = checked_parse  # type: ignore[attr-defined]
        if sympy is not None and "sympify" in names:
            module.sympify = _checked(sympy.sympify)  # type: ignore[attr-defined]


def _built(
    dataset_module: str, dataset_class: str, config_module: str, config_class: str, config: dict[str, Any]
) -> Any:
    """The dataset, built as reasoning-gym's factory does, then guarded (answers become data)."""
    dataset_type = getattr(_import_alone(dataset_module), dataset_class)
    settings = getattr(_import_alone(config_module), config_class)(**config)
    if callable(getattr(settings, "validate", None)):
        settings.validate()
    dataset = dataset_type(config=settings)
    _guard()
    return dataset


def score_answer(
    dataset_module: str,
    dataset_class: str,
    config_module: str,
    config_class: str,
    config: dict[str, Any],
    answer: str,
    entry: dict[str, Any],
) -> float:
    """The dataset's own score of ``answer`` on ``entry``, built as reasoning-gym's factory does."""
    dataset = _built(dataset_module, dataset_class, config_module, config_class, config)
    return float(dataset.score_answer(answer, entry))


def score_answers(
    dataset_module: str,
    dataset_class: str,
    config_module: str,
    config_class: str,
    config: dict[str, Any],
    pairs: list[list[Any]],
) -> list[float | None]:
    """The dataset's score of each ``[answer, entry]`` (None where its scorer raised), in one process.

    Only for answers the platform chose (the scorer audit's constants): answers scored in one
    process could change how the next is scored, so a policy's answers never come here.
    """
    dataset = _built(dataset_module, dataset_class, config_module, config_class, config)
    scores: list[float | None] = []
    for answer, entry in pairs:
        try:
            scores.append(float(dataset.score_answer(answer, entry)))
        except Exception:
            scores.append(None)
    return scores
