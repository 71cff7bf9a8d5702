"""A seeded generator of odd texts to resume a stream after (`watch(after=...)`, the gRPC
metadata `a2a-last-event-id`, the SSE `Last-Event-ID`): what a broken or hostile client may
send instead of an event id. The same seed gives the same texts, so a failure reproduces.

The texts mix a fixed list of known traps (digits `int` takes that are no ASCII digits,
numbers past every integer range a store has, ids of a Redis stream's shape, signs, spaces,
leading zeros), mutations of the task's real ids, the ids of another task, and random text:
digits of every script, ASCII punctuation and letters, control characters.
"""

from __future__ import annotations

import functools
import random
import unicodedata
from collections.abc import Callable, Iterable, Iterator

TRAPS: tuple[str, ...] = (
    "",
    " ",
    "0",
    "00",
    "01",
    "-0",
    "-1",
    "+1",
    " 1",
    "1 ",
    "1\t",
    "1.0",
    "1e3",
    "0x1",
    "1_000",
    "\u00b2",  # SUPERSCRIPT TWO: str.isdigit() is True, int() fails
    "\u00b9\u00b2",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: int() reads 3
    "\uff11",  # FULLWIDTH DIGIT ONE: int() reads 1
    "\u06f3",  # EXTENDED ARABIC-INDIC DIGIT THREE
    "\u0967",  # DEVANAGARI DIGIT ONE
    "\U0001d7d9",  # MATHEMATICAL DOUBLE-STRUCK DIGIT ONE
    "\u2167",  # ROMAN NUMERAL EIGHT
    "\u00bd",
    "\u4e00",
    "9" * 5000,  # past int()'s 4300-digit limit
    "1" + "0" * 4300,
    "1" + "0" * 30,
    str(2**53 + 1),  # a Lua number (a double) rounds it
    str(2**63 - 1),
    str(2**63),
    str(2**64 - 1),
    str(2**64),
    "0-0",
    "0-1",
    "1-0",
    "0-100000000000000",
    f"{2**64 - 1}-{2**64 - 1}",
    f"{2**64}-0",
    f"0-{2**64}",
    f"{2**53 + 1}-0",
    "1-2-3",
    "-",
    "1-",
    "-1-1",
    "1--1",
    "1-+1",
    "1- 1",
    "01-1",
    "1-01",
    "\uff11-\uff11",
    "\u0663-0",
    "1-\u00b2",
    "(1-0",
    "+",
    "*",
    "$",
    "\x00",
    "1\x00",
    "\u2028",
    "\u00a0" + "1",
)
"""Texts that broke, or could break, a parser of event ids."""


@functools.cache
def _all_digits() -> tuple[str, ...]:
    """Every character `str.isdigit` takes (Unicode digits of every script, superscripts)."""
    return tuple(chr(code) for code in range(0x20000) if chr(code).isdigit())


def _mutations(real: str, rand: random.Random) -> Iterator[str]:
    """Texts near a real id: one character added, dropped or swapped, or a part moved by one."""
    yield real + "0"
    yield "0" + real
    yield real + " "
    yield " " + real
    yield real + "-0"
    yield real[:-1]
    yield real[1:]
    yield real.replace("-", "_")
    yield real.replace("-", "--")
    yield real.upper() + "\n"
    digits = _all_digits()
    if real:
        at = rand.randrange(len(real))
        if real[at].isascii() and real[at].isdigit():
            # The same digit's value in another script: int() reads the same number.
            same = [d for d in digits if unicodedata.digit(d, -1) == int(real[at])]
            yield real[:at] + rand.choice(same) + real[at + 1 :]
    head, dash, tail = real.partition("-")
    if dash and head.isdigit() and tail.isdigit():
        yield f"{head}-{int(tail) + 1}"
        yield f"{int(head) + 1}-{tail}"
        yield f"{int(head) - 1}-{tail}" if int(head) else f"{head}-{int(tail) + 7}"
        yield head
    elif real.isascii() and real.isdigit():
        yield str(int(real) + 10**6)
        yield f"{real}-0"


def _random_text(rand: random.Random) -> str:
    """Half the time an id's shape ("<n>" or "<n>-<n>", up to 25 digits a part) with one
    character changed or added; else text from every pool."""
    digits = _all_digits()
    pools: tuple[Callable[[], str], ...] = (
        lambda: rand.choice("0123456789"),
        lambda: rand.choice(digits),
        lambda: rand.choice("-+ .eE_x"),
        lambda: chr(rand.randrange(0x20, 0x7F)),
        lambda: chr(rand.randrange(0, 0x20)),
        lambda: chr(rand.randrange(0xA0, 0x3000)),
    )
    weights = (8, 3, 2, 2, 1, 1)

    def number() -> str:
        return str(rand.randrange(10 ** rand.randint(1, 25)))

    if rand.random() < 0.5:
        shaped = number() if rand.random() < 0.5 else f"{number()}-{number()}"
        at = rand.randrange(len(shaped) + 1)
        odd = rand.choices(pools[1:], weights[1:])[0]()
        cut = at + rand.randrange(2)  # replace the character there, or insert before it
        return shaped[:at] + odd + shaped[cut:]
    length = rand.choice((1, 2, 3, 5, 8, 13, 20, 21, 40, 300))
    return "".join(rand.choices(pools, weights)[0]() for _ in range(length))


def odd_ids(
    seed: str,
    count: int,
    *,
    real: Iterable[str] = (),
    foreign: Iterable[str] = (),
    fits: Callable[[str], bool] = lambda text: True,
) -> list[str]:
    """`count` texts (at least the traps that `fits`), none of them in `real`: the traps,
    mutations of the `real` ids, the `foreign` ids (another task's), then random text.
    `fits`: what the channel under test can carry (an HTTP header no control character, gRPC
    metadata printable ASCII)."""
    rand = random.Random(seed)
    real_ids = list(real)
    excluded = set(real_ids)
    chosen: list[str] = []
    seen: set[str] = set()

    def take(text: str) -> None:
        if text not in excluded and text not in seen and fits(text):
            seen.add(text)
            chosen.append(text)

    for text in TRAPS:
        take(text)
    for text in foreign:
        take(text)
    for real_id in real_ids:
        for text in _mutations(real_id, rand):
            take(text)
    for _ in range(count * 20):  # bounded: random text rarely repeats or misfits
        if len(chosen) >= count:
            break
        take(_random_text(rand))
    return chosen


def printable_ascii(text: str) -> bool:
    """What gRPC metadata carries as an ASCII value: printable, without surrounding spaces
    (gRPC trims them)."""
    return text == text.strip() and all(" " <= char <= "~" for char in text)


def header_value(text: str) -> bool:
    """What an HTTP/1.1 header carries (RFC 9110 field-value, with obs-text as UTF-8): no
    control characters and no surrounding whitespace (a server strips it)."""
    return (
        text == text.strip(" \t")
        and all(char == "\t" or (char >= " " and char != "\x7f") for char in text)
        and not any(0xD800 <= ord(char) <= 0xDFFF for char in text)
    )
