"""A CodeIO candidate input, checked as data before the program runs on it (input prediction).

The policy answers "which input gives this output" with a JSON object of keyword arguments. A
few of the 3,002 programs evaluate their input (``eval``, ``exec``, sympy's ``sympify``): on
program #1825, ``fun = eval(function_str)``, an input whose ``function_str`` replaced the
program's solver (``globals().update(rbisec=...)``) made it return the target whatever the
search, and earned 1.0 without inverting anything (issue #37). So, before the sandbox runs the
program, the candidate must be a literal of the program's argument types, judged against the
input the generator drew (the reference, ``task.metadata["inputs"]``):

- **types**: exactly the reference's argument names; every value of its argument's JSON type,
  recursively (list items and dict values of a type the reference's items have; an integer where
  the reference has a float, not the reverse; ``true`` is not a number);
- **strings a program evaluates**: when the program's syntax tree calls ``READERS`` or
  ``READING_CALLS``, or it imports ``READING_MODULES`` (sympy's functions sympify strings; 99 of
  the 3,002 programs), each string (NFKC-normalised, as Python reads identifiers) that is not one
  of the reference's own may call only the functions the reference's strings call or
  ``MATH_CALLS``, may not name anything with ``__``, call the result of an expression or assign
  with ``:=``; when the program ``exec``s or ``compile``s strings (3 programs), no ``;``, line
  break, ``=`` or statement keyword either.

  The rules are checked on the string as Python reads it, in three views, and a string refused
  by any view is refused: its **syntax tree** where it parses (every call's callee an allowed
  dotted name, no ``__`` name or attribute, no ``:=``); its **tokens** (comments, blank lines
  and backslash-newline continuations are not tokens, so ``globals #\n()`` is the call it is);
  and its **text**, raw and with comments and continuations removed, for fragments that no
  parser accepts alone but that a program pastes into code of its own
  (``sympify("Eq(" + equation + ")")``). A regex over the raw text alone (issue #37's fix) let
  ``[globals #\n().update #\n(rbisec=...), lambda x: x][1]`` and its backslash-newline
  variant through (issue #46).

The reference input always passes, so the honest answer still scores 1; a wrong one still runs
and scores 0.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, NamedTuple

READERS = frozenset(
    {"eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "globals", "locals", "vars"}
)
"""Built-in functions (called by name) that turn a string into code or an attribute."""
READING_CALLS = frozenset({"sympify", "parse_expr", "lambdify", "import_module", "S"})
"""Functions, called by name or as an attribute, that turn a string into code."""
READING_MODULES = frozenset(
    {"sympy", "pickle", "marshal", "dill", "yaml", "importlib", "inspect", "runpy", "code"}
)
"""Modules whose functions read strings as code (sympy's functions sympify their arguments)."""
_MATH_CALL_NAMES = """
    abs min max round pow sum len int float sin cos tan exp log sqrt math.sin math.cos math.tan
    math.exp math.log math.sqrt math.pi np.sin np.cos np.tan np.exp np.log np.sqrt np.abs
"""
MATH_CALLS = frozenset(_MATH_CALL_NAMES.split())
"""Calls a string that a program evaluates may always make (pure arithmetic)."""
_STATEMENT_KEYWORDS = re.compile(
    r"\b(import|from|del|def|class|global|nonlocal|for|while|with|try|raise|return|yield|async|await)\b"
)
_CALL = re.compile(r"([^\W\d][\w.]*)\s*\(")
_CALLED_RESULT = re.compile(r"[)\]}]\s*\(")
_SINGLE_EQUALS = re.compile(r"(?<![=!<>])=(?!=)")


class Reading(NamedTuple):
    """How a program's source treats strings."""

    evaluates: bool
    """Some string may become code (or an attribute name) there."""
    statements: bool
    """Strings may be executed as statements (``exec``, ``compile``)."""


@lru_cache(maxsize=512)
def how_program_reads(code: str) -> Reading:
    """Whether ``code`` evaluates strings, judged from its syntax tree (no code runs)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Reading(True, True)
    names: set[str] = set()
    attributes: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attributes.add(node.func.attr)
        elif isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    statements = bool(names & {"exec", "compile"})
    evaluates = bool(
        names & (READERS | READING_CALLS) or attributes & READING_CALLS or modules & READING_MODULES
    )
    return Reading(evaluates or statements, statements)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)


def _conforms(candidate: Any, examples: list[Any]) -> bool:
    """Whether ``candidate`` has the JSON type of one of ``examples`` (values at the same place)."""
    if isinstance(candidate, bool):
        return any(isinstance(e, bool) for e in examples)
    if isinstance(candidate, int):
        return any(isinstance(e, int | float) and not isinstance(e, bool) for e in examples)
    if isinstance(candidate, float):
        return any(isinstance(e, float) for e in examples)
    if isinstance(candidate, str) or candidate is None:
        return any(type(e) is type(candidate) for e in examples)
    if isinstance(candidate, list):
        lists = [e for e in examples if isinstance(e, list)]
        items = [item for e in lists for item in e]
        return bool(lists) and (not items or all(_conforms(item, items) for item in candidate))
    if isinstance(candidate, dict):
        dicts = [e for e in examples if isinstance(e, dict)]
        values = [value for e in dicts for value in e.values()]
        return bool(dicts) and (not values or all(_conforms(v, values) for v in candidate.values()))
    return False


def _callees(text: str) -> set[str]:
    """Names followed by an opening parenthesis (``if (``, ``and (`` are no calls)."""
    names = (match.group(1).rstrip(".") for match in _CALL.finditer(text))
    return {name for name in names if not keyword.iskeyword(name)}


def _code_in(text: str, allowed: frozenset[str], statements: bool) -> str | None:
    """Why ``text`` would run as code the reference's strings do not (None: it would not)."""
    text = unicodedata.normalize("NFKC", text)
    if "__" in text:
        return "names something with '__'"
    for view in _text_views(text):
        why = _text_rules(view, allowed, statements)
        if why is not None:
            return why
    why = _token_rules(text, allowed, statements)
    if why is not None:
        return why
    return _tree_rules(text, allowed, statements)


_COMMENT = re.compile(r"#[^\n\r]*")
_CONTINUATION = re.compile(r"\\\r?\n")


def _text_views(text: str) -> list[str]:
    """The raw text, and the text without continuations, comments, or both (a comment or a
    continuation between a name and its parenthesis is still a call)."""
    joined = _CONTINUATION.sub("", text)
    return [text, joined, _COMMENT.sub("", text), _COMMENT.sub("", joined)]


def _text_rules(text: str, allowed: frozenset[str], statements: bool) -> str | None:
    foreign = sorted(_callees(text) - allowed)
    if foreign:
        return f"calls {foreign[0]!r} (allowed: {', '.join(sorted(allowed))})"
    if _CALLED_RESULT.search(text):
        return "calls the result of an expression"
    if ":=" in text:
        return "assigns with ':='"
    if statements:
        if any(mark in text for mark in ";\n\r") or _SINGLE_EQUALS.search(text):
            return "holds a statement (';', a line break or '=') and the program executes its strings"
        keyword = _STATEMENT_KEYWORDS.search(text)
        if keyword:
            return f"holds the statement keyword {keyword.group(1)!r} and the program executes its strings"
    return None


_SKIPPED_TOKENS = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The significant tokens of ``text``, as far as Python's tokenizer gets (fragments stop early)."""
    found: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in _SKIPPED_TOKENS and not (
                token.type == tokenize.NEWLINE and not token.string
            ):
                found.append(token)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


def _token_rules(text: str, allowed: frozenset[str], statements: bool) -> str | None:
    tokens = _tokens(text)
    for position, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string == ":=":
            return "assigns with ':='"
        if statements and token.type == tokenize.NEWLINE and position < len(tokens) - 1:
            return "holds a statement (a line break) and the program executes its strings"
        if token.type != tokenize.OP or token.string != "(" or position == 0:
            continue
        callee = _dotted_before(tokens, position)
        if callee is None:
            return "calls the result of an expression"
        if callee and callee not in allowed:
            return f"calls {callee!r} (allowed: {', '.join(sorted(allowed))})"
    return None


def _dotted_before(tokens: list[tokenize.TokenInfo], paren: int) -> str | None:
    """The dotted name called by the ``(`` at ``paren``: '' for a grouping parenthesis, None for
    a call of something that is no name (``)(``, ``"s"(``, ``f().g(``)."""
    previous = tokens[paren - 1]
    if previous.type == tokenize.NAME and keyword.iskeyword(previous.string):
        return ""
    if previous.type == tokenize.OP and previous.string not in (")", "]", "}"):
        return ""
    if previous.type != tokenize.NAME:
        return None
    parts = [previous.string]
    index = paren - 2
    while index >= 1 and tokens[index].string == "." and tokens[index - 1].type == tokenize.NAME:
        parts.append(tokens[index - 1].string)
        index -= 2
    if index >= 0 and tokens[index].string == ".":
        return None  # an attribute of an expression's result: ``().update(``
    return ".".join(reversed(parts))


def _tree_rules(text: str, allowed: frozenset[str], statements: bool) -> str | None:
    try:
        tree = ast.parse(text, mode="exec" if statements else "eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # a fragment: the text and token views judged it
    for node in ast.walk(tree):
        if isinstance(node, ast.NamedExpr):
            return "assigns with ':='"
        if isinstance(node, ast.Call):
            callee = _dotted(node.func)
            if callee is None:
                return "calls the result of an expression"
            if callee not in allowed:
                return f"calls {callee!r} (allowed: {', '.join(sorted(allowed))})"
        if statements and isinstance(node, ast.stmt) and not isinstance(node, ast.Expr):
            return f"holds a {type(node).__name__} statement and the program executes its strings"
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def refusal(candidate: Any, reference: dict[str, Any], code: str) -> str | None:
    """Why ``candidate`` is not data of the program's argument types (None: it may run)."""
    if not isinstance(candidate, dict):
        return "an input must be a JSON object of keyword arguments"
    if set(candidate) != set(reference):
        return f"the program's arguments are {sorted(reference)}, the input names {sorted(candidate)}"
    for name in sorted(reference):
        if not _conforms(candidate[name], [reference[name]]):
            return f"argument {name!r} does not have the type of the program's argument"
    reading = how_program_reads(code)
    if not reading.evaluates:
        return None
    known = set(_strings(reference))
    allowed = MATH_CALLS | {
        callee for text in known for callee in _callees(unicodedata.normalize("NFKC", text))
    }
    for name in sorted(candidate):
        for text in _strings(candidate[name]):
            why = None if text in known else _code_in(text, frozenset(allowed), reading.statements)
            if why is not None:
                return f"argument {name!r} is code the program would run: it {why}"[:300]
    return None
