"""What the client commands show a person: parts, tasks, hints, and a stream as it arrives."""

from __future__ import annotations

import io

from google.protobuf import struct_pb2

from a2a_grpc.client.render import LivePrinter, render_parts, render_task, reply_hint
from a2a_grpc.generated import a2a_pb2


def task(state: int, text: str = "") -> a2a_pb2.Task:
    status = a2a_pb2.TaskStatus(state=state)
    if text:
        status.message.parts.add(text=text)
    return a2a_pb2.Task(id="t1", context_id="c1", status=status)


def chunk(text: str, *, append: bool = False, last_chunk: bool = False) -> a2a_pb2.StreamResponse:
    return a2a_pb2.StreamResponse(
        artifact_update=a2a_pb2.TaskArtifactUpdateEvent(
            task_id="t1",
            context_id="c1",
            artifact=a2a_pb2.Artifact(artifact_id="a1", name="poem", parts=[{"text": text}]),
            append=append,
            last_chunk=last_chunk,
        )
    )


def test_parts() -> None:
    data = struct_pb2.Value()
    data.struct_value.update({"xs": [2.0, 2.5]})
    parts = [
        a2a_pb2.Part(text="hi"),
        a2a_pb2.Part(data=data),
        a2a_pb2.Part(raw=b"%PDF", filename="r.pdf", media_type="application/pdf"),
        a2a_pb2.Part(url="https://x/y.png"),
    ]
    assert render_parts(parts) == (
        'hi {"xs":[2,2.5]} [file r.pdf (application/pdf, 4 bytes)] [https://x/y.png]'
    )


def test_data_renders_with_its_keys_sorted() -> None:
    """A Struct's keys have no order on the wire (a map), so the CLI prints them sorted: the same
    data always prints the same line."""
    data = struct_pb2.Value()
    data.struct_value.update({"reason": "over_budget", "cost": None, "budget": {"z": 1, "a": 2}})
    assert render_parts([a2a_pb2.Part(data=data)]) == (
        '{"budget":{"a":2,"z":1},"cost":null,"reason":"over_budget"}'
    )


def test_a_waiting_task_shows_the_question_and_the_reply_command() -> None:
    waiting = task(a2a_pb2.TASK_STATE_INPUT_REQUIRED, "Which language?")
    assert render_task(waiting).splitlines() == [
        "task t1 (context c1): input-required",
        "agent asks: Which language?",
    ]
    hint = reply_hint("127.0.0.1:50051", waiting)
    assert hint == 'reply with: a2a-grpc send 127.0.0.1:50051 "..." --task-id t1 --context-id c1'
    assert reply_hint("127.0.0.1:50051", task(a2a_pb2.TASK_STATE_COMPLETED)) is None


def test_live_printer_grows_an_artifact_on_one_line_and_marks_a_resume() -> None:
    out = io.StringIO()
    printer = LivePrinter(out)
    for event in (
        a2a_pb2.StreamResponse(task=task(a2a_pb2.TASK_STATE_WORKING)),
        chunk("roses "),
        chunk("are red", append=True),
        # A stream resumed from a snapshot (the server no longer kept the events after its id).
        a2a_pb2.StreamResponse(task=task(a2a_pb2.TASK_STATE_WORKING)),
        chunk("violets", last_chunk=True),
    ):
        printer.show(event)
    printer.close_line()
    assert out.getvalue().splitlines() == [
        "task t1 (context c1)",
        "state: working",
        "artifact poem: roses are red",
        "resumed from a snapshot of task t1: events missed meanwhile are not shown",
        "artifact poem: violets",
    ]
