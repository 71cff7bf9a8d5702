"""Media types of parts, and whether a list of accepted modes (a card's input modes, a request's
accepted output modes) admits one."""

from __future__ import annotations

from collections.abc import Iterable

from a2a_grpc.generated import a2a_pb2

IMPLIED_MEDIA_TYPES = {"text": "text/plain", "data": "application/json"}
"""The media type a text or data part has when it names none (raw and url parts imply none), for
what the agent sends back (artifacts against the caller's accepted output modes). A request's
parts are checked only for a media type they provide (see `server/validation.check_content`)."""


def media_type_of(part: a2a_pb2.Part) -> str:
    """The part's media type: its own, else the one its kind implies, else ""."""
    return part.media_type or IMPLIED_MEDIA_TYPES.get(part.WhichOneof("content") or "", "")


def matches(media_type: str, accepted: Iterable[str]) -> bool:
    """Whether `accepted` (e.g. `text/*`, `*/*`, `application/json; charset=utf-8`) admits
    `media_type`; parameters are ignored, case does not matter."""
    media_type = media_type.split(";", 1)[0].strip().lower()
    major = media_type.split("/", 1)[0]
    for mode in accepted:
        mode = mode.split(";", 1)[0].strip().lower()
        if mode in ("*", "*/*", media_type) or mode == f"{major}/*":
            return True
    return False
