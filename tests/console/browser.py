"""What the console's tests share: the console as a child process (`a2a-grpc console`), and a
headless Chromium, Debian's `chromium` package driven by Playwright (no browser download).

A missing browser or Playwright skips the browser tests, saying what to install, unless
A2A_GRPC_REQUIRE_BROWSER=1 (CI's .ci/run sets it) makes that a failure.
Screenshots go to $A2A_GRPC_CONSOLE_SHOTS when set (docs/console.md's are made so), else to
the test's own tmp_path.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
START_TIMEOUT_S = 30.0
URL_LINE = re.compile(r"^a2a-grpc console: (?P<url>http://\S+)$")


def require_browser() -> None:
    """Skips (or with A2A_GRPC_REQUIRE_BROWSER=1 fails) the test without Chromium or Playwright."""
    missing = []
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        missing.append("Debian's chromium package (apt-get install chromium)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (the dev extra: make install)")
    if missing:
        reason = f"the console's browser tests need {' and '.join(missing)}"
        if os.environ.get("A2A_GRPC_REQUIRE_BROWSER") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def shots_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("A2A_GRPC_CONSOLE_SHOTS")
    path = Path(chosen) if chosen else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Console:
    url: str
    """The URL the command printed, with its token."""
    process: asyncio.subprocess.Process

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]


@asynccontextmanager
async def console(
    target: str, *options: str, env: dict[str, str] | None = None
) -> AsyncIterator[Console]:
    """`a2a-grpc console TARGET OPTIONS` as a child process (with `env` added to its
    environment), until the block ends (then SIGTERM, and its exit awaited)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "a2a_grpc.cli.main",
        "console",
        target,
        *options,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)).decode()
        match = URL_LINE.match(line.strip())
        if match is None:
            process.kill()
            err = (await process.stderr.read()).decode(errors="replace")
            pytest.fail(f"the console did not start: stdout {line!r}, stderr {err[-2000:]}")
        yield Console(match["url"], process)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()


def chromium_path() -> str | None:
    """Debian's browser: /usr/bin/chromium, else `chromium` on PATH."""
    return str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium page (1280x800) from Debian's browser."""
    from playwright.async_api import async_playwright

    executable = chromium_path()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            # Root (CI) cannot use Chromium's sandbox; the pages are our own, on 127.0.0.1.
            args=[
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
            ],
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(20_000)
            yield page
        finally:
            await browser.close()
