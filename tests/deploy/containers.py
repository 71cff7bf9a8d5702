"""podman for the image and chart tests: whether it is here, the image built once per session by
`make image`, and containers followed through their logs.

Without podman the tests that need it are skipped, saying so; with A2A_GRPC_REQUIRE_PODMAN=1
(CI, which installs it) they fail instead. A podman that cannot build the image (no network for
pip, a machine whose podman needs more build options: IMAGE_BUILD_FLAGS, see docs/deploy.md)
counts as missing in the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "A2A_GRPC_REQUIRE_PODMAN"
IMAGE = "localhost/a2a-grpc-test"
"""The repository the tests build and run, apart from `make image`'s own localhost/a2a-grpc."""
BUILD_TIMEOUT = 900.0  # seconds: a build with an empty layer cache downloads every wheel
STARTED_LINE = "a2a-grpc: settings "
"""The last start-up line: the server is listening once it is printed."""


def _missing(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 makes this a failure)", pytrace=False)
    pytest.skip(reason)


def podman_path() -> str:
    """The podman binary, or the test is skipped (failed under A2A_GRPC_REQUIRE_PODMAN=1)."""
    path = shutil.which("podman")
    if path is None:
        _missing("podman is not installed (Debian: apt-get install podman)")
    assert path is not None
    return path


def podman(*args: str, timeout: float = 120.0, check: bool = True) -> str:
    """Runs `podman ARGS`; its stdout. With `check`, a failure fails the test with its output."""
    result = subprocess.run([podman_path(), *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(
            f"podman {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}",
            pytrace=False,
        )
    return result.stdout


@dataclass(frozen=True)
class Image:
    ref: str
    """`localhost/a2a-grpc-test:dev`."""
    config: dict[str, Any]
    """`podman image inspect`'s object: Config (User, Entrypoint, Cmd, ...), Size."""
    base_size: int
    """Bytes of the base image (debian:bookworm-slim) it was built on."""
    build_seconds: float


def build_image() -> Image:
    """`make image` into localhost/a2a-grpc-test (its layers cached by podman between runs)."""
    podman_path()
    ref = f"{IMAGE}:dev"
    previous = podman("image", "inspect", "--format", "{{.Id}}", ref, check=False).strip()
    started = time.monotonic()
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "image",
            f"IMAGE={IMAGE}",
            "CONTAINER_ENGINE=podman",
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    seconds = time.monotonic() - started
    if result.returncode != 0:
        _missing(
            "podman could not build the image (IMAGE_BUILD_FLAGS="
            f"{os.environ.get('IMAGE_BUILD_FLAGS', '')!r}; docs/deploy.md says which build "
            f"options a machine may need):\n{(result.stdout + result.stderr)[-3000:]}"
        )
    (config,) = json.loads(podman("image", "inspect", ref))
    if previous and previous != config["Id"]:
        # The last run's image, now untagged: removed, so that runs do not pile up images
        # (kept if a container still uses it).
        podman("image", "rm", previous, check=False)
    (base,) = json.loads(podman("image", "inspect", "docker.io/library/debian:bookworm-slim"))
    return Image(ref, config, int(base["Size"]), seconds)


class Logs:
    """`podman logs --follow` of one container, read by a thread: `wait_for` returns the first
    line (stdout or stderr) matching a pattern, as soon as the container writes it."""

    def __init__(self, container: str) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._process = subprocess.Popen(
            [podman_path(), "logs", "--follow", container],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """The first line from now on that matches `pattern` (a regular expression)."""
        deadline = time.monotonic() + timeout
        wanted = re.compile(pattern)
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._queue.get(timeout=max(left, 0.0))
            except queue.Empty:
                raise AssertionError(
                    f"no log line matching {pattern!r} within {timeout:g} s:\n"
                    + "\n".join(self.lines[-40:])
                ) from None
            if line is None:
                raise AssertionError(
                    f"the container's log ended without a line matching {pattern!r}:\n"
                    + "\n".join(self.lines[-40:])
                )
            self.lines.append(line)
            if wanted.search(line):
                return line

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
        self._process.wait(timeout=30)
        self._reader.join(timeout=30)
        if self._process.stdout is not None:
            self._process.stdout.close()


def container_name(prefix: str) -> str:
    """A name no other test run uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def removed_afterwards(*containers: str) -> Iterator[None]:
    """Removes the containers (killing them if still running) when the block ends."""
    try:
        yield
    finally:
        for name in containers:
            podman("rm", "--force", "--ignore", "--time", "0", name, check=False)


def process_uid(container: str) -> int:
    """The real user id, as the kernel sees it, of the container's main process."""
    pid = podman("inspect", "--format", "{{.State.Pid}}", container).strip()
    status = Path(f"/proc/{pid}/status").read_text()
    (uid_line,) = [line for line in status.splitlines() if line.startswith("Uid:")]
    return int(uid_line.split()[1])
