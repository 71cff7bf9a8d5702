"""Stream event ids (`urn:a2a-grpc:event-id:v1`), shared by client and server.

Contract:
- Every event a stream of ours sends (SendStreamingMessage, SubscribeToTask) carries its id in
  the payload's own `metadata` Struct (Task, Message, TaskStatusUpdateEvent or
  TaskArtifactUpdateEvent), under the key `urn:a2a-grpc:event-id:v1`, as a string. A2A 1.0 has
  no field for it and gRPC has no per-message metadata, so the id rides where the spec allows
  extension data (A2A 1.0 §3.1: "metadata: custom key/value data"); a client that knows
  nothing of it sees one more metadata entry.
- Ids are opaque strings to a client. Per task they only grow, every subscriber on every
  replica sees the same id for the same event, and on a shared store they survive a replica's
  restart (the Redis Stream entry id, "<ms>-<seq>"; in memory a per-task sequence, "<n>").
- A stream's opening Task snapshot carries the id of the last event it includes.
- A subscriber resumes after an id with SubscribeToTask and the id in the gRPC metadata key
  `a2a-last-event-id`, or the SSE header `Last-Event-ID` on the HTTP bindings: the server
  replays exactly the events after it (no snapshot), then goes on live. An id older than the
  server keeps is refused with `EventIdExpiredError` (core/errors.py).
- The SSE bindings also send the id as each event's `id:` field.
- Only streams carry ids: tasks as GetTask, ListTasks and webhooks see them never do.
- One stream event has none: the direct reply (a Message, no task) repeated from the
  idempotency window to a streaming send that repeats its message id. It is the stream's only
  event and names no task, so nothing can resume after it.
"""

from __future__ import annotations

from google.protobuf import struct_pb2

from a2a_grpc.generated import a2a_pb2

EVENT_ID_EXTENSION = "urn:a2a-grpc:event-id:v1"
LAST_EVENT_ID_KEY = "a2a-last-event-id"
"""gRPC metadata key of the id a SubscribeToTask resumes after."""
LAST_EVENT_ID_HEADER = "Last-Event-ID"
"""The SSE header (HTML Living Standard, server-sent events) the HTTP bindings resume after."""


def _metadata(event: a2a_pb2.StreamResponse) -> struct_pb2.Struct | None:
    member = event.WhichOneof("payload")
    if member is None:
        return None
    payload = getattr(event, member)
    return payload.metadata  # type: ignore[no-any-return]


def stamp(event: a2a_pb2.StreamResponse, event_id: str) -> None:
    """Writes `event_id` into the event's payload metadata (the event must be the stream's own
    copy: never a stored task)."""
    metadata = _metadata(event)
    if metadata is not None:
        metadata[EVENT_ID_EXTENSION] = event_id


def event_id(event: a2a_pb2.StreamResponse) -> str | None:
    """The event's id, None when it carries none."""
    member = event.WhichOneof("payload")
    if member is None:
        return None
    payload = getattr(event, member)
    if not payload.HasField("metadata"):
        return None
    value = payload.metadata.fields.get(EVENT_ID_EXTENSION)
    if value is None or value.WhichOneof("kind") != "string_value":
        return None
    return str(value.string_value)


def strip(metadata: struct_pb2.Struct) -> None:
    """Removes an event id from a metadata Struct (e.g. a snapshot the client keeps)."""
    if EVENT_ID_EXTENSION in metadata.fields:
        del metadata.fields[EVENT_ID_EXTENSION]
