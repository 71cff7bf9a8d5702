"""Store URLs: which store a URL names, and how one is shown without its password."""

from __future__ import annotations

import re

__all__ = ["redacted_url"]


_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redacted_url(url: str) -> str:
    """`url` fit to print or log: every password in it replaced by `***`, the rest as given.

    Hidden: the password of the userinfo (`redis://user:***@host:6379/0`), a userinfo without a
    colon as a whole (`redis://***@host`: it may be a password written where the user goes),
    and the value of a `password` query parameter (`unix:///run/redis.sock?password=***`). The
    userinfo ends at the URL's last `@`, so an unescaped `@`, `/` or `?` in a password cannot
    leak its tail; when in doubt more is hidden, never less. Never raises.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, location = rest.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:***@{location}" if colon else f"***@{location}"
    return scheme + sep + _PASSWORD_PARAMETER.sub(r"\1***", rest)
