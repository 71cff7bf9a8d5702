"""Reads webhook bodies as an A2A 0.3 receiver built on the official SDK does: with the pinned
a2a-sdk's 0.3 model (`a2a.compat.v0_3.types.Task`, pydantic, generated from 0.3's JSON schema).

A child script (`read_with_sdk`), because the SDK's generated code and ours register the same
protobuf symbols and cannot share a process: it imports the SDK only. stdin: a JSON list of
bodies (strings); stdout: a JSON list of the tasks as the model parsed them (by alias, without
unset fields). A body the model refuses fails the script with pydantic's error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def read_with_sdk(bodies: list[bytes]) -> list[dict[str, object]]:
    """The bodies as the SDK's 0.3 `Task` model parses them (run in a child process)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child"],
        input=json.dumps([body.decode() for body in bodies]),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    parsed: list[dict[str, object]] = json.loads(done.stdout)
    return parsed


def _main() -> None:
    from a2a.compat.v0_3.types import Task  # the SDK only: never a2a_grpc in this process

    bodies = json.load(sys.stdin)
    tasks = [Task.model_validate_json(body) for body in bodies]
    json.dump(
        [task.model_dump(mode="json", by_alias=True, exclude_none=True) for task in tasks],
        sys.stdout,
    )


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    _main()
