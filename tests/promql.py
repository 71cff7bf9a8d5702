"""What a PromQL expression names: its metric selectors (metric name and label matchers) and
the labels its aggregations and vector matching group by. A lexer and a walk over its tokens,
not an evaluator: enough to check a dashboard's and alerting rules' names against a scrape,
and strict, so that a construct it does not know fails the check instead of passing unread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
    |(?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
    |(?P<range>\[[^\]]*\])
    |(?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?[a-zA-Z0-9]*)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}@])
    """,
    re.VERBOSE,
)
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
"""Keywords followed by a parenthesized list of label names."""
KEYWORDS = frozenset({"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"})
AGGREGATIONS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
LABEL_FUNCTIONS = frozenset({"label_replace", "label_join"})
"""Functions that name labels in string arguments, which this walk does not read: refused."""


class PromQLError(ValueError):
    """An expression this module cannot read."""


@dataclass(frozen=True)
class Selector:
    """`name{label op "value", ...}`."""

    name: str | None
    matchers: tuple[tuple[str, str, str], ...]
    """(label, operator, value) each."""


@dataclass
class Names:
    """What an expression names."""

    selectors: list[Selector] = field(default_factory=list)
    grouping: set[str] = field(default_factory=set)
    """Labels of `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`, `group_x (...)`."""


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens = []
    at = 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            raise PromQLError(f"cannot read {expr[at : at + 20]!r} in {expr!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            tokens.append((kind, match.group()))
        at = match.end()
    return tokens


def _unquote(text: str) -> str:
    body = text[1:-1]
    if text[0] == "`":
        return body
    return re.sub(r"\\(.)", r"\1", body)


def names(expr: str) -> Names:
    """The selectors and grouping labels of `expr`; PromQLError for what it cannot read."""
    tokens = _tokens(expr)
    found = Names()
    i = 0

    def at(index: int) -> tuple[str, str]:
        return tokens[index] if index < len(tokens) else ("end", "")

    def matchers(start: int) -> tuple[tuple[tuple[str, str, str], ...], int]:
        """The matchers of the `{...}` at `start`, and the index after its `}`."""
        out = []
        index = start + 1
        while at(index) != ("op", "}"):
            (kind, label), (_, op), (value_kind, value) = at(index), at(index + 1), at(index + 2)
            if kind != "ident" or op not in ("=", "!=", "=~", "!~") or value_kind != "string":
                raise PromQLError(f"cannot read the matchers of {expr!r}")
            out.append((label, op, _unquote(value)))
            index += 3
            if at(index) == ("op", ","):
                index += 1
        return tuple(out), index + 1

    while i < len(tokens):
        kind, text = tokens[i]
        if kind == "ident":
            following = at(i + 1)
            if text in GROUPING:
                if following != ("op", "("):
                    i += 1  # group_left without labels
                    continue
                i += 2
                while at(i) != ("op", ")"):
                    label_kind, label = at(i)
                    if label_kind == "ident":
                        found.grouping.add(label)
                    elif label != ",":
                        raise PromQLError(f"cannot read the labels after {text} in {expr!r}")
                    i += 1
                i += 1
                continue
            if text in LABEL_FUNCTIONS:
                raise PromQLError(f"{text} names labels in strings, which are not checked")
            if following == ("op", "(") or (
                text in AGGREGATIONS and following[1] in ("by", "without")
            ):
                i += 1  # a function or an aggregation
                continue
            if text in KEYWORDS:
                i += 1
                continue
            if following == ("op", "{"):
                selected, i = matchers(i + 1)
            else:
                selected, i = (), i + 1
            found.selectors.append(Selector(text, selected))
            continue
        if (kind, text) == ("op", "{"):
            selected, i = matchers(i)
            found.selectors.append(Selector(None, selected))
            continue
        i += 1
    return found
