"""The stream reducer: a pure fold of StreamResponse events into one task view."""

from __future__ import annotations

from decimal import Decimal

import pytest

from a2a_grpc.client.reducer import TaskView, fold, reduce
from a2a_grpc.core.budget import BUDGET_EXTENSION, Money, cost_of
from a2a_grpc.core.errors import InvalidAgentResponseError
from a2a_grpc.generated import a2a_pb2 as pb


def task(
    task_id: str = "t1", state: int = pb.TASK_STATE_WORKING, **kw: object
) -> pb.StreamResponse:
    return pb.StreamResponse(
        task=pb.Task(id=task_id, context_id="c1", status=pb.TaskStatus(state=state), **kw)
    )


def status(state: int, task_id: str = "t1", text: str = "") -> pb.StreamResponse:
    message = pb.Message(message_id="m", role=pb.ROLE_AGENT, parts=[pb.Part(text=text)])
    task_status = pb.TaskStatus(state=state, message=message if text else None)
    return pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(task_id=task_id, context_id="c1", status=task_status)
    )


def chunk(
    text: str,
    *,
    artifact_id: str = "a1",
    append: bool = False,
    last_chunk: bool = False,
    task_id: str = "t1",
    name: str = "",
) -> pb.StreamResponse:
    artifact = pb.Artifact(artifact_id=artifact_id, name=name, parts=[pb.Part(text=text)])
    return pb.StreamResponse(
        artifact_update=pb.TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id="c1",
            artifact=artifact,
            append=append,
            last_chunk=last_chunk,
        )
    )


def texts(view: TaskView, artifact_id: str = "a1") -> list[str]:
    assert view.task is not None
    (artifact,) = [a for a in view.task.artifacts if a.artifact_id == artifact_id]
    return [p.text for p in artifact.parts]


def test_snapshot_then_status_then_chunks_settle_at_completed() -> None:
    view = reduce(
        [
            task(state=pb.TASK_STATE_SUBMITTED),
            status(pb.TASK_STATE_WORKING, text="thinking"),
            chunk("Hel", name="greeting"),
            chunk("lo", append=True),
            chunk("!", append=True, last_chunk=True),
            status(pb.TASK_STATE_COMPLETED),
        ]
    )
    assert view.state == pb.TASK_STATE_COMPLETED
    assert view.done
    assert texts(view) == ["Hel", "lo", "!"]
    assert view.task is not None and view.task.artifacts[0].name == "greeting"
    assert view.completed_artifacts == {"a1"}
    assert not view.task.status.HasField("message")  # status replaced, not merged


def test_chunk_completion_follows_last_chunk() -> None:
    view = reduce([task(), chunk("a")])
    assert view.completed_artifacts == frozenset()
    view = fold(view, chunk("b", append=True, last_chunk=True))
    assert view.completed_artifacts == {"a1"}
    # A non-append update re-creates the artifact: it is incomplete again and replaced.
    view = fold(view, chunk("new"))
    assert view.completed_artifacts == frozenset()
    assert texts(view) == ["new"]
    view = fold(view, chunk("end", append=True, last_chunk=True))
    assert view.completed_artifacts == {"a1"}
    # More chunks after the "last" one: incomplete again until the next last_chunk.
    view = fold(view, chunk("more", append=True))
    assert view.completed_artifacts == frozenset()


def test_a_snapshot_s_artifacts_are_complete_so_get_task_equals_the_stream() -> None:
    streamed = reduce(
        [
            task(),
            chunk("Hel", name="greeting"),
            chunk("lo", append=True, last_chunk=True),
            status(pb.TASK_STATE_COMPLETED),
        ]
    )
    assert streamed.task is not None
    polled = reduce([pb.StreamResponse(task=streamed.task)])
    assert polled.completed_artifacts == streamed.completed_artifacts == {"a1"}
    assert polled.task == streamed.task


def test_artifacts_with_different_ids_are_kept_apart() -> None:
    view = reduce([task(), chunk("x", artifact_id="a1"), chunk("y", artifact_id="a2")])
    view = fold(view, chunk("z", artifact_id="a1", append=True))
    assert texts(view, "a1") == ["x", "z"]
    assert texts(view, "a2") == ["y"]


def test_snapshot_replaces_the_task() -> None:
    view = reduce([task(), chunk("old"), status(pb.TASK_STATE_WORKING, text="progress")])
    snapshot = task(
        state=pb.TASK_STATE_INPUT_REQUIRED,
        artifacts=[pb.Artifact(artifact_id="a9", parts=[pb.Part(text="fresh")])],
    )
    view = fold(view, snapshot)
    assert view.task is not None
    assert [a.artifact_id for a in view.task.artifacts] == ["a9"]
    assert view.state == pb.TASK_STATE_INPUT_REQUIRED


@pytest.mark.parametrize(
    "state",
    [
        pb.TASK_STATE_COMPLETED,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_CANCELED,
        pb.TASK_STATE_REJECTED,
        pb.TASK_STATE_INPUT_REQUIRED,
        pb.TASK_STATE_AUTH_REQUIRED,
    ],
)
def test_done_at_terminal_and_interrupted_states(state: int) -> None:
    assert reduce([task(), status(state)]).done


@pytest.mark.parametrize("state", [pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING])
def test_not_done_while_running(state: int) -> None:
    assert not reduce([task(), status(state)]).done


def test_question_is_the_interrupted_status_message() -> None:
    view = reduce([task(), status(pb.TASK_STATE_WORKING, text="progress")])
    assert view.question is None
    view = fold(view, status(pb.TASK_STATE_INPUT_REQUIRED, text="your name?"))
    assert view.question is not None and view.question.parts[0].text == "your name?"


def test_direct_message_is_done_and_nothing_may_follow() -> None:
    answer = pb.StreamResponse(message=pb.Message(message_id="m", role=pb.ROLE_AGENT))
    view = fold(TaskView(), answer)
    assert view.done and view.message is not None and view.task is None
    with pytest.raises(InvalidAgentResponseError, match="direct answer"):
        fold(view, task())


def test_message_inside_a_task_stream_is_an_error() -> None:
    with pytest.raises(InvalidAgentResponseError, match="Message in the stream"):
        reduce([task(), pb.StreamResponse(message=pb.Message(message_id="m"))])


def test_empty_payload_is_an_error() -> None:
    with pytest.raises(InvalidAgentResponseError, match="no payload"):
        fold(TaskView(), pb.StreamResponse())


@pytest.mark.parametrize(
    "event",
    [task("other"), status(pb.TASK_STATE_WORKING, task_id="other"), chunk("x", task_id="other")],
    ids=["task", "status", "artifact"],
)
def test_event_for_another_task_is_an_error(event: pb.StreamResponse) -> None:
    with pytest.raises(InvalidAgentResponseError, match="other"):
        reduce([task("t1"), event])
    with pytest.raises(InvalidAgentResponseError, match="other"):
        fold(TaskView(expected_task_id="t1"), event)


def test_missing_ids_are_errors() -> None:
    with pytest.raises(InvalidAgentResponseError):
        fold(TaskView(), task(""))
    with pytest.raises(InvalidAgentResponseError):
        fold(TaskView(), status(pb.TASK_STATE_WORKING, task_id=""))
    with pytest.raises(InvalidAgentResponseError):
        fold(TaskView(), chunk("x", artifact_id=""))


def test_update_before_any_snapshot_starts_a_view_from_its_ids() -> None:
    # What the official SDK server sends on a continuation stream.
    view = fold(TaskView(expected_task_id="t1"), status(pb.TASK_STATE_WORKING))
    assert view.task is not None
    assert (view.task.id, view.task.context_id, view.state) == ("t1", "c1", pb.TASK_STATE_WORKING)


def test_append_to_an_unknown_artifact_creates_it() -> None:
    assert texts(reduce([task(), chunk("late", append=True)])) == ["late"]


def test_fold_never_mutates_earlier_views_or_events() -> None:
    first = fold(TaskView(), task())
    event = chunk("a")
    second = fold(first, event)
    third = fold(second, chunk("b", append=True))
    fold(third, status(pb.TASK_STATE_COMPLETED))
    assert first.task is not None and not first.task.artifacts
    assert first.state == pb.TASK_STATE_WORKING
    assert texts(second) == ["a"]
    assert list(event.artifact_update.artifact.parts) == [pb.Part(text="a")]


@pytest.mark.parametrize(
    "event",
    [task(), status(pb.TASK_STATE_COMPLETED), chunk("a", last_chunk=True)],
    ids=["task", "status", "artifact"],
)
def test_fold_keeps_what_the_view_says_of_the_stream(event: pb.StreamResponse) -> None:
    view = TaskView(expected_task_id="t1", resumed_from_snapshot=True, skipped_events=2)
    folded = fold(view, event)
    kept = {name: getattr(folded, name) for name in view.__dataclass_fields__}
    assert kept == {
        **{name: getattr(view, name) for name in view.__dataclass_fields__},
        "task": folded.task,
        "completed_artifacts": folded.completed_artifacts,
    }
    assert folded.task is not None and folded.task.id == "t1"


def test_the_cost_a_run_ends_with_reaches_the_view_s_task() -> None:
    ending = status(pb.TASK_STATE_COMPLETED)
    ending.status_update.metadata.update(
        {BUDGET_EXTENSION: {"cost": {"amount": "0.02", "currency": "USD"}}}
    )
    view = reduce([task(), ending])
    assert view.task is not None
    assert cost_of(view.task) == Money(Decimal("0.02"), "USD")
