"""The demo agent `make serve` runs: it echoes, and a few keywords show the protocol's paths.

The first word of the message's text picks the behaviour:
- (anything else)  WORKING, one artifact echoing every part (text, data, raw, url), COMPLETED.
- `ask`            INPUT_REQUIRED with a question; the next message on the task completes it,
                   echoing the answer.
- `chunks [N]`     one artifact streamed in N text chunks (append / last_chunk), default 4.
- `reply`          a direct message answer, no task.
- `fail`           the task ends FAILED with a reason.
- `slow [S]`       WORKING for S seconds (default 30, at most 3600), saying how far it got at
                   least every S/10 s, then an artifact and COMPLETED; cancelable.
- `crash`          the agent raises; the task becomes FAILED and the caller sees a generic error.
- `spend X`        quotes X (budget extension): over the request's budget the task is REJECTED;
                   otherwise it charges X in two halves and completes with a receipt artifact.
                   X that is not a non-negative decimal number is REJECTED, saying so.
Every echo is charged 0.01 per part when the request states a budget. A data part is echoed as
its JSON text when the caller accepts text/plain but not application/json.
"""

from __future__ import annotations

import asyncio
import math
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from google.protobuf import json_format

from a2a_grpc.core.media_types import media_type_of
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server.agent import RequestContext, Skill, TaskEvents

CHUNK_DELAY = 0.01
ECHO_PRICE = Decimal("0.01")


class Behaviour(NamedTuple):
    """One behaviour of the demo agent, as its card describes it (one skill each)."""

    keyword: str
    does: str
    example: str
    direct: bool = False
    """It answers with a direct message and creates no task."""


BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour("echo", "WORKING, one artifact echoing every part (text, data, raw, url), "
              "COMPLETED. Charged 0.01 per part when the message states a budget.", "hello"),
    Behaviour("ask", "INPUT_REQUIRED with a question; the next message on the task "
              "completes it, echoing the answer.", "ask"),
    Behaviour("chunks", "One artifact streamed in N text chunks (default 4), then COMPLETED.",
              "chunks 5"),
    Behaviour("reply", "Answers with a direct message: no task is created.", "reply hi",
              direct=True),
    Behaviour("fail", "The task ends FAILED, saying why.", "fail"),
    Behaviour("slow", "WORKING for S seconds (default 30) with progress, then an artifact and "
              "COMPLETED; cancelable.", "slow 30"),
    Behaviour("crash", "The agent raises: the task ends FAILED and the caller sees a generic "
              "reason.", "crash"),
    Behaviour("spend", "Quotes X (budget extension): over the message's budget the task is "
              "REJECTED, otherwise X is charged and the task completes with a receipt.",
              "spend 0.02"),
)  # fmt: skip
"""Every behaviour (the first, echo, is what any other first word gets): the demo card's
skills (`DemoAgent.skills`)."""


_SKILLS = frozenset(behaviour.keyword for behaviour in BEHAVIOURS)
"""The card's skill ids: one per behaviour."""


def _as_accepted(context: RequestContext) -> list[a2a_pb2.Part]:
    """The message's parts, with a data part the caller does not accept as JSON but does as
    text echoed as its JSON text (the caller's accepted output modes)."""
    if not context.accepted_output_modes:
        return list(context.message.parts)
    parts = []
    for part in context.message.parts:
        as_text = part.HasField("data") and not context.accepts(media_type_of(part))
        if as_text and context.accepts("text/plain"):
            part = a2a_pb2.Part(text=json_format.MessageToJson(part.data, indent=None))
        parts.append(part)
    return parts


def _unaccepted_note(context: RequestContext, parts: list[a2a_pb2.Part]) -> str | None:
    """What the echo's status message says when it holds parts the caller does not accept."""
    unaccepted = context.unaccepted(parts)
    if not unaccepted:
        return None
    return (
        f"note: the echo holds {', '.join(unaccepted)}, which you do not accept "
        f"({', '.join(context.accepted_output_modes)}): an echo can only send back what it got"
    )


def _amount(written: str) -> Decimal | None:
    """`spend`'s amount: a finite, non-negative decimal number (the budget extension's rule for
    amounts), else None."""
    try:
        amount = Decimal(written)
    except InvalidOperation:
        return None
    return +amount if amount.is_finite() and amount >= 0 else None  # +: "-0" is 0


def _count(words: list[str], default: float) -> float:
    """The number after the keyword (`chunks N`, `slow S`); `default` without a finite one."""
    try:
        count = float(words[1]) if len(words) > 1 else default
    except ValueError:
        return default
    return count if math.isfinite(count) else default


class DemoAgent:
    """See the module docstring."""

    name = "a2a-grpc demo agent"
    description = (
        "Echoes every part it receives back as an artifact. A keyword as the first word picks "
        "another behaviour (one skill each): "
        + ", ".join(behaviour.keyword for behaviour in BEHAVIOURS[1:])
        + ". "
        + " ".join(
            f"'{behaviour.keyword}' answers with a direct message and creates no task."
            for behaviour in BEHAVIOURS
            if behaviour.direct
        )
    )
    skills = tuple(
        Skill(
            id=keyword,
            name=keyword.capitalize(),
            description=does if keyword == "echo" else f"First word '{keyword}': {does}",
            tags=("demo", keyword),
            examples=(example,),
        )
        for keyword, does, example, _ in BEHAVIOURS
    )
    input_modes = output_modes = ("text/plain", "application/json", "*/*")

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        words = context.text().split()
        keyword = words[0].lower() if words else ""
        if context.task is not None:
            events.use_skill("ask")  # the only task that takes a second message
        else:
            events.use_skill(keyword if keyword in _SKILLS else "echo")
        if context.task is not None:  # the caller answered our question
            await events.working()
            await events.add_artifact(list(context.message.parts), name="answer")
            # The answer is in the history and echoed as the artifact: the status message
            # quotes only its start (quoting it whole kept two more copies of it, the status
            # message and its history entry: an answered task held four, not two).
            await events.complete(f"Thanks, got it: {_quote(context.text())}")
        elif keyword == "ask":
            await events.require_input("What would you like me to echo? Reply on this task.")
        elif keyword == "chunks":
            await self._chunks(events, int(_count(words, 4)))
        elif keyword == "reply":
            await events.reply(context.text().partition(" ")[2] or "hello")
        elif keyword == "fail":
            await events.working()
            await events.fail("asked to fail: the demo agent gave up on purpose")
        elif keyword == "slow":
            await self._slow(events, _count(words, 30.0))
        elif keyword == "crash":
            raise RuntimeError("the demo agent crashed on purpose")
        elif keyword == "spend":
            await self._spend(events, words[1] if len(words) > 1 else "")
        else:
            await events.working()
            if context.budget is not None:
                await events.charge(ECHO_PRICE * len(context.message.parts))
            parts = _as_accepted(context)
            await events.add_artifact(parts, name="echo")
            await events.complete(_unaccepted_note(context, parts))

    async def _chunks(self, events: TaskEvents, count: int) -> None:
        count = max(1, min(count, 1000))
        await events.working(f"streaming {count} chunks")
        artifact_id = None
        for index in range(count):
            artifact_id = await events.add_artifact(
                [a2a_pb2.Part(text=f"chunk {index + 1} of {count}\n")],
                artifact_id=artifact_id,
                name="chunks",
                append=index > 0,
                last_chunk=index == count - 1,
            )
            await asyncio.sleep(CHUNK_DELAY)
        await events.complete()

    async def _slow(self, events: TaskEvents, seconds: float) -> None:
        seconds = max(0.0, min(seconds, 3600.0))
        await events.working(f"working for {seconds:g} s")
        # Progress at least every tenth of the time (and at most once a second): an agent that
        # works long says so, which also keeps it clear of `serve --agent-inactivity-timeout`.
        step = max(1.0, seconds / 10)
        elapsed = 0.0
        for index in range(1, math.ceil(seconds / step) + 1):
            mark = min(seconds, index * step)
            await asyncio.sleep(mark - elapsed)
            elapsed = mark
            if elapsed < seconds:
                await events.working(f"{elapsed:g} of {seconds:g} s")
        await events.add_artifact([a2a_pb2.Part(text=f"worked {seconds:g} s")], name="slow")
        await events.complete(f"done after {seconds:g} s")

    async def _spend(self, events: TaskEvents, written: str) -> None:
        amount = _amount(written)
        if amount is None:
            got = f"; got {written!r}" if written else ""
            await events.reject(
                f"spend takes an amount, a non-negative decimal number such as 'spend 0.02'{got}"
            )
            return
        await events.quote(amount)
        await events.working(f"spending {amount}")
        await events.charge(amount / 2)
        await events.charge(amount / 2)
        await events.add_artifact([a2a_pb2.Part(text=f"charged {amount}")], name="receipt")
        await events.complete()


QUOTE_CHARS = 200
"""How much of an answer the demo agent's final status message quotes."""


def _quote(text: str) -> str:
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "…"
