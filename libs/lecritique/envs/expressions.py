"""A safe parser and evaluator for integer expressions with ``+ - *`` and parentheses.

Used to compute arithmetic answers and to verify Countdown solutions. Nothing is ever passed to
``eval``: the text is tokenised and parsed by a small recursive-descent parser whose input length
and nesting depth are bounded, so hostile text costs at most linear time.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

MAX_EXPRESSION_CHARS = 256
MAX_NESTING = 32
OPERATORS = ("+", "-", "*")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2}
_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


class ExpressionError(ValueError):
    """The text is not a well-formed expression (the message says why)."""


@dataclass(frozen=True)
class Evaluated:
    value: int
    numbers: tuple[int, ...]
    """The integer literals in the order they appear."""


def evaluate(text: str) -> Evaluated:
    """Value and literals of ``text``; raises :class:`ExpressionError` on anything else."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    tokens: list[str] = []
    for match in _TOKEN.finditer(text.strip()):
        number, symbol = match.groups()
        if number is not None:
            if len(number) > 12:
                raise ExpressionError(f"number {number[:12]}... is too long")
            tokens.append(number)
        elif symbol in ("+", "-", "*", "(", ")"):
            tokens.append(symbol)
        else:
            raise ExpressionError(f"unexpected character {symbol!r}")
    if not tokens:
        raise ExpressionError("empty expression")
    parser = _Parser(tokens)
    value = parser.expression(0)
    if parser.position != len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.position]!r} after a complete expression")
    return Evaluated(value, tuple(parser.numbers))


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0
        self.numbers: list[int] = []

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def expression(self, depth: int) -> int:
        value = self.term(depth)
        while self._peek() in ("+", "-"):
            operator = self.tokens[self.position]
            self.position += 1
            right = self.term(depth)
            value = value + right if operator == "+" else value - right
        return value

    def term(self, depth: int) -> int:
        value = self.factor(depth)
        while self._peek() == "*":
            self.position += 1
            value *= self.factor(depth)
        return value

    def factor(self, depth: int) -> int:
        token = self._peek()
        if token is None:
            raise ExpressionError("expression ends where a number was expected")
        self.position += 1
        if token == "(":
            if depth >= MAX_NESTING:
                raise ExpressionError(f"parentheses nested deeper than {MAX_NESTING}")
            value = self.expression(depth + 1)
            if self._peek() != ")":
                raise ExpressionError("missing ')'")
            self.position += 1
            return value
        if token.isdigit():
            number = int(token)
            self.numbers.append(number)
            return number
        raise ExpressionError(f"unexpected {token!r} where a number was expected")


@dataclass(frozen=True)
class Node:
    """A binary expression tree (a leaf when ``operator`` is None)."""

    value: int
    operator: str | None = None
    left: Node | None = None
    right: Node | None = None

    def text(self) -> str:
        """Infix text with only the parentheses precedence requires."""
        if self.operator is None or self.left is None or self.right is None:
            return str(self.value)
        precedence = _PRECEDENCE[self.operator]
        left = self.left.text()
        if self.left.operator is not None and _PRECEDENCE[self.left.operator] < precedence:
            left = f"({left})"
        right = self.right.text()
        if self.right.operator is not None:
            right_precedence = _PRECEDENCE[self.right.operator]
            if right_precedence < precedence or (right_precedence == precedence and self.operator == "-"):
                right = f"({right})"
        return f"{left}{self.operator}{right}"


def combine(operator: str, left: Node, right: Node) -> Node:
    if operator == "+":
        value = left.value + right.value
    elif operator == "-":
        value = left.value - right.value
    elif operator == "*":
        value = left.value * right.value
    else:
        raise ValueError(f"unknown operator {operator!r}; known: {', '.join(OPERATORS)}")
    return Node(value, operator, left, right)


def random_tree(numbers: list[int], operators: list[str], rng: random.Random) -> Node:
    """A random expression tree using every number once, in the given order."""
    nodes = [Node(number) for number in numbers]
    while len(nodes) > 1:
        split = rng.randrange(len(nodes) - 1)
        merged = combine(rng.choice(operators), nodes[split], nodes[split + 1])
        nodes[split : split + 2] = [merged]
    return nodes[0]
