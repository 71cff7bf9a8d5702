"""A store added from outside the project: the example package (tests/plugins/a2a_store_example,
a package of its own whose pyproject.toml registers `example://` in the `a2a_grpc.stores` entry
point group), built and installed by pip into a directory of its own. From there its own tests
import and pass our store contract suite, and `a2a-grpc serve --store example://demo` serves
with it: a real server process answering calls."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.server.tasks.contract import StoreContract
from tests.integration.conftest import VERSION, send_request
from tests.integration.serve_process import run_serve, serving

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "plugins" / "a2a_store_example"
BUILT_IN = (
    "memory://, redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, "
    "postgresql://, postgres://"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the package's source, copied out of this repository; the directory pip installed it
    into, with its .dist-info and entry point), built with this environment's setuptools and
    no package index."""
    work = tmp_path_factory.mktemp("plugin")
    source, site = work / "source", work / "site"
    shutil.copytree(PLUGIN, source)
    pip = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-build-isolation", "--no-index", "--target", str(site), str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (site / "a2a_store_example-0.1.0.dist-info" / "entry_points.txt").is_file()
    return source, site


def with_site(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(site)}


def test_the_package_s_own_tests_pass_the_store_contract(installed: tuple[Path, Path]) -> None:
    """Run as that package's CI would: its pytest settings (pytest-asyncio in strict mode),
    from its directory, with the package imported from where pip put it (`-P`: not from the
    source next to the tests)."""
    source, site = installed
    run = subprocess.run(
        [sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=source,
        env={**os.environ, **with_site(site)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = run.stdout.strip().splitlines()[-1]
    # Every test of the contract, and the package's own two; the example keeps no push configs
    # (the server's dispatcher does), and the two push-config tests say so.
    contract = [name for name in dir(StoreContract) if name.startswith("test_")]
    assert summary.startswith(f"{len(contract) - 2 + 2} passed, 2 skipped in "), summary


def test_serve_with_the_package_s_scheme_answers_calls(installed: tuple[Path, Path]) -> None:
    _, site = installed
    with serving(
        "--host", "127.0.0.1", "--port", "0", "--http-port", "-1", "--store", "example://demo",
        env=with_site(site),
    ) as served:  # fmt: skip
        assert "store=example://demo" in served.lines[-1]
        with grpc.insecure_channel(f"127.0.0.1:{served.port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            sent = stub.SendMessage(send_request("hello"), metadata=VERSION, timeout=30)
            assert sent.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            read = stub.GetTask(a2a_pb2.GetTaskRequest(id=sent.task.id), metadata=VERSION)
            assert read.status.state == a2a_pb2.TASK_STATE_COMPLETED
            listed = stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=VERSION)
            assert [task.id for task in listed.tasks] == [sent.task.id]


def test_an_unknown_scheme_lists_the_registered_ones_the_package_s_too(
    installed: tuple[Path, Path],
) -> None:
    _, site = installed
    refused = run_serve("--port", "0", "--store", "nosuch://x", env=with_site(site))
    assert refused.returncode == 2
    assert f"the registered schemes are {BUILT_IN}, example://" in refused.stderr
    bare = run_serve("--port", "0", "--store", "example://demo")  # not installed here
    assert bare.returncode == 2
    assert (
        f"no store is registered for a example:// URL: the registered schemes are {BUILT_IN} ("
        in bare.stderr
    )


def test_the_package_checks_its_own_urls(installed: tuple[Path, Path]) -> None:
    _, site = installed
    refused = run_serve("--port", "0", "--store", "example://", env=with_site(site))
    assert refused.returncode == 2
    assert "an example:// store URL needs a name" in refused.stderr
