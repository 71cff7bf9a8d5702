"""Media types of parts, and whether a list of accepted modes (a card's input modes, a request's
accepted output modes, an HTTP `Accept` header's ranges) admits one."""

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


def accept_ranges(header: str | None) -> list[str]:
    """The media ranges an HTTP `Accept` header admits, lowercased and without parameters; a
    range with `q=0` ("not acceptable", RFC 9110 §12.5.1) is left out. None or "": no ranges."""
    ranges: list[str] = []
    for item in (header or "").split(","):
        media_range, *parameters = item.split(";")
        media_range = media_range.strip().lower()
        if not media_range:
            continue
        refused = False
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    refused = float(value.strip()) <= 0
                except ValueError:
                    refused = False
        if not refused:
            ranges.append(media_range)
    return ranges
