"""The console's safety, over real HTTP to the `a2a-grpc console` process: the session token on
every request, Host and Origin checks, the token leaving the URL, and no credential ever in
anything the page is sent."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path

import aiohttp
import pytest

from a2a_grpc.cli.console import _is_loopback
from a2a_grpc.cli.console import main as console_main
from tests.console.browser import Console, console
from tests.integration.conftest import Factory, make_server

__all__ = ["make_server"]

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cret-bearer-token"


async def status_of(
    running: Console, method: str, path: str, headers: dict[str, str] | None = None, **kw: object
) -> int:
    async with (
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http,
        http.request(
            method, running.base + path, headers=headers or {}, allow_redirects=False, **kw
        ) as response,  # type: ignore[arg-type]
    ):
        return response.status


async def test_every_request_needs_the_token_host_and_origin(make_server: Factory) -> None:
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    async with console(harness.running.card_url) as running:
        token = {"X-Console-Token": running.token}
        for path in ("/", "/api/card", "/api/tasks", "/static/console.js"):
            assert await status_of(running, "GET", path) == 403, path
            assert await status_of(running, "GET", path, {"X-Console-Token": "wrong"}) == 403
        assert await status_of(running, "GET", "/api/session", token) == 200
        # DNS rebinding: the right token, another host name.
        rebound = {**token, "Host": "attacker.example:80"}
        assert await status_of(running, "GET", "/api/session", rebound) == 403
        # A cross-site request, even with the token.
        foreign = {**token, "Origin": "http://attacker.example"}
        assert await status_of(running, "POST", "/api/send", foreign, json={"text": "x"}) == 403
        # A change needs the header: the cookie alone (what a cross-site form carries) is not
        # enough.
        cookie = {"Cookie": f"a2a_console_token={running.token}"}
        assert await status_of(running, "GET", "/api/session", cookie) == 200
        assert await status_of(running, "POST", "/api/send", cookie, json={"text": "x"}) == 403
        async with (
            aiohttp.ClientSession() as http,
            http.get(running.url, allow_redirects=False) as first,
        ):
            assert first.status == 302
            assert "token" not in first.headers["Location"]
            set_cookie = first.headers["Set-Cookie"]
            assert running.token in set_cookie
            assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
            assert "frame-ancestors 'none'" in first.headers["Content-Security-Policy"]


async def test_no_credential_reaches_the_page(make_server: Factory) -> None:
    """The console calls an agent that requires a bearer token with the token it was given;
    nothing it answers the page holds the token, nor a push config's."""
    harness = await make_server(http_port=0, tokens={SECRET: "alice"}, allow_private_webhooks=True)
    assert harness.running.card_url is not None
    async with console(harness.running.card_url, "--token", SECRET) as running:
        headers = {"X-Console-Token": running.token}
        bodies = []
        async with aiohttp.ClientSession(base_url=running.base, headers=headers) as http:

            async def call(method: str, path: str, **kw: object) -> dict[str, object]:
                async with http.request(method, path, **kw) as response:  # type: ignore[arg-type]
                    text = await response.text()
                    bodies.append(text)
                    assert response.status == 200, text
                    body: dict[str, object] = await response.json()
                    return body

            index = await (await http.get("/")).text()
            bodies.append(index)
            await call("GET", "/api/session")
            await call("GET", "/api/card")
            sent = await call("POST", "/api/send", json={"text": "hello"})
            task = sent["task"]
            assert isinstance(task, dict) and task["state"] == "completed"
            await call("GET", "/api/tasks")
            await call("GET", f"/api/tasks/{task['id']}")
            hook = {"url": "http://127.0.0.1:9/hook", "id": "h1", "token": "hook-secret"}
            await call("POST", f"/api/tasks/{task['id']}/push-configs", json=hook)
            listed = await call("GET", f"/api/tasks/{task['id']}/push-configs")
            assert listed["configs"], listed
        for body in bodies:
            assert SECRET not in body
            assert "hook-secret" not in body


async def test_bad_options_fail_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert console_main(["127.0.0.1:1", "--cert", str(tmp_path / "c.pem")]) == 2
    assert "--cert and --key go together" in capsys.readouterr().err
    assert console_main(["127.0.0.1:1", "--port", "70000"]) == 2


async def test_open_opens_the_printed_url_in_the_browser(
    make_server: Factory, tmp_path: Path
) -> None:
    """--open hands the URL (token included) to the user's browser ($BROWSER here: a script
    that writes what it is given into a FIFO the test reads)."""
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    fifo = tmp_path / "opened"
    os.mkfifo(fifo)
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {fifo}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)

    def opened() -> str:
        with open(fifo) as reader:  # blocks until the browser script writes
            return reader.read()

    async with console(
        harness.running.card_url, "--open", env={"BROWSER": str(browser)}
    ) as running:
        try:
            assert await asyncio.wait_for(asyncio.to_thread(opened), 30) == running.url
        finally:
            # A reader still waiting (the browser was never run) is let go, not left blocked.
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_only_loopback_is_quiet() -> None:
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("192.0.2.1")
