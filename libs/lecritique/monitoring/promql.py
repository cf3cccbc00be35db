"""Metric names in PromQL expressions and in Prometheus text exposition.

:func:`promql_metric_names` is a small lexer, not a full PromQL parser: it drops string literals,
label matchers, range and subquery brackets and grouping clauses, then keeps every identifier
that is not a function, an aggregation, a keyword or a duration. It understands the Grafana
variables dashboards use (``$__rate_interval``, ``${experiment:pipe}``).
"""

from __future__ import annotations

import re

# Strings: double, single and back-quoted (raw), with backslash escapes in the first two.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME_MATCHER = re.compile(r'__name__\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')')
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$__\w+|\$\w+|\[\[\w+\]\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
_TOKEN = re.compile(
    r"(?P<duration>\b[0-9]+(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*\b)"
    r"|(?P<number>0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
)
_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "atan2",
        "inf",
        "nan",
        "start",
        "end",
    }
)


def _strip_brackets(text: str, opening: str, closing: str) -> str:
    """Remove every ``opening ... closing`` span (they do not nest once strings are gone)."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == opening:
            depth += 1
            out.append(" ")
        elif char == closing and depth:
            depth -= 1
            out.append(" ")
        elif depth == 0:
            out.append(char)
    return "".join(out)


def promql_metric_names(expression: str) -> set[str]:
    """Metric names a PromQL expression selects (``{__name__="x"}`` matchers included)."""
    names = {match.group(1)[1:-1] for match in _NAME_MATCHER.finditer(expression)}
    text = _GRAFANA_VARIABLE.sub(" ", expression)
    text = _STRING.sub(" ", text)
    text = _strip_brackets(text, "{", "}")
    text = _strip_brackets(text, "[", "]")
    previous = None
    while previous != text:
        previous, text = text, _GROUPING.sub(" ", text)
    for match in _TOKEN.finditer(text):
        name = match.group("name")
        if name is None or name.lower() in _KEYWORDS:
            continue
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        names.add(name)
    return names


def grafana_query_metric_names(query: str) -> set[str]:
    """Metric names of a Grafana Prometheus variable query (``label_values(metric, label)``, ...)."""
    query = query.strip()
    match = re.fullmatch(r"label_values\((.*)\)", query, re.DOTALL)
    if match:
        arguments = match.group(1)
        selector, comma, _ = arguments.rpartition(",")
        return promql_metric_names(selector) if comma else set()
    match = re.fullmatch(r"query_result\((.*)\)", query, re.DOTALL)
    if match:
        return promql_metric_names(match.group(1))
    if re.fullmatch(r"(label_names|metrics)\(.*\)", query, re.DOTALL):
        return set()
    return promql_metric_names(query)


def exposition_metric_names(text: str) -> set[str]:
    """Sample names in a Prometheus text-format scrape (``x_bucket``, ``x_sum``, ``x_total``, ...)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
