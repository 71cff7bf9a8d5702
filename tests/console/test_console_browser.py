"""The console in a real browser (headless Chromium from Debian, driven by Playwright) against
real agents: our server over each binding (its demo agent), our A2A 0.3 gRPC service, and a
Google ADK agent in its own process and environment.

On each: the card and its checks, a blocking send, a stream whose chunks assemble as they
arrive (the demo agent's `chunks 4`), an `ask` answered from the page, a `slow` task cancelled
from its task page, the task list and a task opened from it, and an error shown as the client
classifies it. Every wait is on the page's DOM (Playwright's auto-waiting `expect`), never on
the clock; each page is screenshotted into the test's output (browser.py says where).
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from google.protobuf import json_format

from a2a_grpc.generated import a2a_pb2
from tests.console.browser import Console, chromium, console, require_browser, shots_dir
from tests.integration.conftest import Factory, make_server
from tests.interop.peers.conftest import PeerProcess, adk_peer, adk_python

__all__ = ["adk_peer", "adk_python", "make_server"]

pytestmark = pytest.mark.timeout(240)

EXPECT_MS = 20_000


@pytest.fixture(autouse=True)
def _browser_present() -> None:
    require_browser()


def expect(target: Any) -> Any:
    from playwright.async_api import expect as playwright_expect

    return playwright_expect(target)


async def shot(page: Any, shots: Path, name: str) -> None:
    await page.screenshot(path=str(shots / f"{name}.png"))


async def open_console(page: Any, running: Console) -> None:
    await page.goto(running.url)
    await expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=EXPECT_MS)
    # The token left the address bar: it is a cookie now.
    assert "token=" not in page.url


async def check_card(page: Any, shots: Path, name: str, picked: str) -> None:
    checks = page.locator("#card-checks")
    await expect(checks).to_be_visible(timeout=EXPECT_MS)
    await expect(page.locator("#card-name")).to_have_text(name)
    used = page.locator('tr.check[data-check="interface the client uses"]')
    await expect(used).to_have_attribute("data-verdict", "ok")
    await expect(used).to_contain_text(picked)
    assert await page.locator('#card-interfaces tr.interface[data-verdict="ok"]').count() >= 1
    await shot(page, shots, "card")


async def fill_send(page: Any, text: str, *, stream: bool) -> None:
    await page.goto(page.url.split("#")[0] + "#send")
    await page.fill("#send-text", text)
    await page.fill("#send-task-id", "")
    await page.fill("#send-context-id", "")
    await page.set_checked("#send-stream", stream)
    await page.click("#send-button")


async def blocking_send(page: Any, shots: Path, echoed: str) -> None:
    await fill_send(page, "hello console", stream=False)
    result = page.locator("#send-result")
    await expect(result.locator(".task .badge").first).to_have_text("completed", timeout=EXPECT_MS)
    await expect(result.locator(".artifact").first).to_contain_text(echoed)
    await shot(page, shots, "send")


async def chunked_stream(page: Any, shots: Path) -> None:
    # Every state the artifact's box goes through, recorded as the DOM changes: the chunks
    # must be seen assembling, not only the finished artifact.
    await page.evaluate(
        """() => {
          window.seenArtifacts = [];
          new MutationObserver(() => {
            for (const a of document.querySelectorAll('#send-result .live .artifact')) {
              const parts = [...a.querySelectorAll('.part')].map((p) => p.innerText.trim());
              window.seenArtifacts.push([a.dataset.complete, parts]);
            }
          }).observe(document.getElementById('send-result'), {subtree: true, childList: true});
        }"""
    )
    await fill_send(page, "chunks 4", stream=True)
    result = page.locator("#send-result")
    await expect(result.locator('[data-outcome="ended"]')).to_be_visible(timeout=EXPECT_MS)
    await expect(result.locator("tr.event[data-kind=artifact_update]")).to_have_count(4)
    artifact = result.locator(".live .artifact")
    await expect(artifact).to_have_attribute("data-complete", "true")
    chunks = [f"chunk {n} of 4" for n in range(1, 5)]
    assert [t.strip() for t in await artifact.locator(".part").all_inner_texts()] == chunks
    # Seen assembling: the artifact shown incomplete with fewer chunks before the last came.
    seen = await page.evaluate("window.seenArtifacts")
    partial = [parts for complete, parts in seen if complete == "false"]
    assert any(parts and parts == chunks[: len(parts)] and len(parts) < 4 for parts in partial), (
        seen
    )
    await shot(page, shots, "stream")
    # Each event has its time since the send and its raw wire JSON.
    first = result.locator("tr.event").first
    await expect(first.locator("td.ms")).to_contain_text("ms")
    await first.locator("details.raw summary").click()
    raw = json.loads(await first.locator("details.raw pre").inner_text())
    assert "task" in raw


async def ask_and_answer(page: Any, shots: Path, ask: str, answer: str, answered: str) -> None:
    await fill_send(page, ask, stream=True)
    result = page.locator("#send-result")
    form = result.locator("form.answer")
    await expect(form).to_be_visible(timeout=EXPECT_MS)
    await shot(page, shots, "ask")
    await form.locator("input.answer-text").fill(answer)
    await form.locator("button").click()
    await expect(result.locator(".live .task .badge").first).to_have_text(
        "completed", timeout=EXPECT_MS
    )
    await expect(result.locator(".live .artifact").last).to_contain_text(answered)


async def cancel_slow(page: Any, shots: Path, slow: str) -> str:
    await fill_send(page, slow, stream=True)
    result = page.locator("#send-result")
    await expect(result.locator('tr.event [data-state="working"]').first).to_be_visible(
        timeout=EXPECT_MS
    )
    task_id = await result.locator(".live .task").get_attribute("data-task-id")
    assert task_id
    await page.goto(page.url.split("#")[0] + f"#task/{task_id}")
    await expect(page.locator("#task-view .task")).to_have_attribute("data-task-id", task_id)
    await page.click("#task-cancel")
    await expect(page.locator('#task-status [data-state="canceled"]')).to_be_visible(
        timeout=EXPECT_MS
    )
    await expect(page.locator('#task-view .badge[data-state="canceled"]')).to_be_visible()
    await shot(page, shots, "task")
    return task_id


async def list_and_open(page: Any, shots: Path, at_least: int) -> None:
    await page.goto(page.url.split("#")[0] + "#tasks")
    rows = page.locator("#tasks-table tr.task-row")
    await expect(rows.nth(at_least - 1)).to_be_visible(timeout=EXPECT_MS)
    await shot(page, shots, "tasks")
    first = await rows.first.get_attribute("data-task-id")
    await rows.first.click()
    await expect(page.locator("#task-view .task")).to_have_attribute("data-task-id", first or "")
    await expect(page.locator("#task-view h3", has_text="History")).to_be_visible()


async def see_error(page: Any, shots: Path) -> None:
    await page.goto(page.url.split("#")[0] + "#tasks")
    await page.fill("#open-id", "no-such-task")
    await page.click("#open-form button")
    error = page.locator("#task-view .error")
    await expect(error).to_have_attribute("data-error", "TaskNotFoundError", timeout=EXPECT_MS)
    await expect(error).to_contain_text("TASK_NOT_FOUND")
    await expect(error).to_contain_text("not retryable")
    await shot(page, shots, "error")


@pytest.mark.parametrize("binding", ["grpc", "jsonrpc", "http+json"])
async def test_console_on_each_binding_of_our_server(
    make_server: Factory, tmp_path: Path, binding: str
) -> None:
    harness = await make_server(http_port=0)
    card_url = harness.running.card_url
    assert card_url is not None
    shots = shots_dir(tmp_path) / binding.replace("+", "-")
    shots.mkdir(exist_ok=True)
    async with console(card_url, "--transport", binding) as running, chromium() as page:
        await open_console(page, running)
        picked = {"grpc": "GRPC 1.0", "jsonrpc": "JSONRPC 1.0", "http+json": "HTTP+JSON 1.0"}
        await check_card(page, shots, "a2a-grpc demo agent", picked[binding])
        strict = page.locator('tr.check[data-check="strict A2A 1.0 parse"]')
        await expect(strict).to_have_attribute("data-verdict", "ok")
        await blocking_send(page, shots, "hello console")
        await chunked_stream(page, shots)
        await ask_and_answer(page, shots, "ask", "blue", "blue")
        await cancel_slow(page, shots, "slow 30")
        await list_and_open(page, shots, at_least=4)
        await see_error(page, shots)


async def test_subscribe_stop_resume_and_push_configs(make_server: Factory, tmp_path: Path) -> None:
    """A subscription followed live, stopped, and resumed after its last event id (the server
    replays what came after: no snapshot notice); push configs created, listed, deleted."""
    harness = await make_server(http_port=0, allow_private_webhooks=True)
    assert harness.running.card_url is not None
    shots = shots_dir(tmp_path) / "subscribe"
    shots.mkdir(exist_ok=True)
    async with console(harness.running.card_url) as running, chromium() as page:
        await open_console(page, running)
        await page.goto(running.base + "/#send")
        await page.fill("#send-text", "slow 30")
        await page.set_checked("#send-stream", False)
        await page.set_checked("#send-return-immediately", True)
        await page.click("#send-button")
        task = page.locator("#send-result .task")
        await expect(task).to_be_visible(timeout=EXPECT_MS)
        task_id = await task.get_attribute("data-task-id")
        await page.goto(running.base + f"/#task/{task_id}")
        await page.click("#task-subscribe")
        live = page.locator("#task-live")
        await expect(live.locator('tr.event[data-kind="task"]')).to_be_visible(timeout=EXPECT_MS)
        await expect(live.locator('tr.event[data-kind="status_update"]').first).to_be_visible(
            timeout=EXPECT_MS
        )
        await page.click("#task-stop")
        await expect(live.locator('[data-outcome="stopped"]')).to_be_visible(timeout=EXPECT_MS)
        await expect(page.locator("#task-resume")).to_be_enabled()
        await page.click("#task-resume")
        # Resumed after the id: the events after it, no opening snapshot, no notice.
        await expect(live).to_have_attribute("data-stream-kind", "resume", timeout=EXPECT_MS)
        await expect(live.locator("tr.event").first).to_be_visible(timeout=EXPECT_MS)
        assert await live.locator('tr.event[data-kind="task"]').count() == 0
        assert await live.locator(".notice").count() == 0
        await page.fill("#push-url", "http://127.0.0.1:9/hook")
        await page.fill("#push-id", "console-hook")
        await page.fill("#push-token", "hook-secret")
        await page.click("#push-form button")
        config = page.locator('#push-list li[data-config-id="console-hook"]')
        await expect(config).to_be_visible(timeout=EXPECT_MS)
        assert "hook-secret" not in await page.content()
        await shot(page, shots, "push-configs")
        await config.locator("button").click()
        await expect(config).to_have_count(0, timeout=EXPECT_MS)
        await page.click("#task-cancel")
        await expect(live.locator('[data-outcome="ended"]')).to_be_visible(timeout=EXPECT_MS)


@pytest.fixture
async def v03_card(make_server: Factory) -> AsyncIterator[str]:
    """Our server's A2A 0.3 gRPC service behind a card that lists only it: the URL of that
    card, served by a small HTTP server of its own."""
    harness = await make_server()
    card = a2a_pb2.AgentCard(name="a2a-grpc over A2A 0.3", version="1", description="0.3 only")
    card.supported_interfaces.add(
        url=f"127.0.0.1:{harness.running.port}", protocol_binding="GRPC", protocol_version="0.3"
    )
    card.capabilities.streaming = True
    card.default_input_modes.append("text/plain")
    card.default_output_modes.append("text/plain")
    document = json_format.MessageToJson(card)

    async def serve_card(request: web.Request) -> web.Response:
        return web.Response(text=document, content_type="application/json")

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", serve_card)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    await runner.cleanup()


async def test_console_on_our_0_3_service(v03_card: str, tmp_path: Path) -> None:
    """ListTasks is not part of A2A 0.3: the Tasks page says so, as the client classifies it,
    and a task is opened by its id instead."""
    shots = shots_dir(tmp_path) / "v03"
    shots.mkdir(exist_ok=True)
    async with console(v03_card) as running, chromium() as page:
        await open_console(page, running)
        await check_card(page, shots, "a2a-grpc over A2A 0.3", "GRPC 0.3")
        await blocking_send(page, shots, "hello console")
        await chunked_stream(page, shots)
        # The raw view is the binding's: A2A 0.3's StreamResponse.
        raw = json.loads(
            await page.locator("#send-result tr.event details.raw pre").first.inner_text()
        )
        assert set(raw) <= {"task", "msg", "statusUpdate", "artifactUpdate"}, raw
        await ask_and_answer(page, shots, "ask", "blue", "blue")
        task_id = await cancel_slow(page, shots, "slow 30")
        await page.goto(running.base + "/#tasks")
        error = page.locator("#tasks-status .error")
        await expect(error).to_have_attribute("data-error", "UnsupportedOperationError")
        await expect(error).to_contain_text("not part of A2A 0.3")
        await shot(page, shots, "tasks")
        await page.fill("#open-id", task_id)
        await page.click("#open-form button")
        await expect(page.locator("#task-view .task")).to_have_attribute("data-task-id", task_id)
        await see_error(page, shots)


@pytest.mark.timeout(900)  # the first run may build ADK's environment (pip's time)
async def test_console_on_an_adk_agent(adk_peer: PeerProcess, tmp_path: Path) -> None:
    """ADK's agent echoes, asks, runs slowly and fails; it keeps no event ids, so a
    subscription resumed after a stop starts from a snapshot, and the page says so."""
    shots = shots_dir(tmp_path) / "adk"
    shots.mkdir(exist_ok=True)
    async with console(adk_peer.card_url) as running, chromium() as page:
        await open_console(page, running)
        await check_card(page, shots, "adk_echo", "JSONRPC 1.0")
        await blocking_send(page, shots, "hello console")
        await ask_and_answer(page, shots, "ask", "blue", "hello, blue")
        await list_and_open(page, shots, at_least=2)
        await fill_send(page, "slow 30", stream=False)
        await page.set_checked("#send-return-immediately", True)
        await page.click("#send-button")
        task = page.locator("#send-result .task")
        await expect(task).to_be_visible(timeout=EXPECT_MS)
        task_id = await task.get_attribute("data-task-id")
        await page.goto(running.base + f"/#task/{task_id}")
        await page.click("#task-subscribe")
        live = page.locator("#task-live")
        await expect(live.locator('tr.event[data-kind="task"]')).to_be_visible(timeout=EXPECT_MS)
        await page.click("#task-stop")
        await expect(live.locator('[data-outcome="stopped"]')).to_be_visible(timeout=EXPECT_MS)
        await page.click("#task-resume")
        # No event ids from this server: resumed from a snapshot, and the page says so.
        await expect(live).to_have_attribute("data-stream-kind", "subscribe", timeout=EXPECT_MS)
        await expect(live.locator(".notice")).to_contain_text("Resumed from a snapshot")
        await expect(live.locator('tr.event[data-kind="task"]')).to_be_visible(timeout=EXPECT_MS)
        await shot(page, shots, "resumed")
        await page.click("#task-cancel")
        await expect(page.locator('#task-status [data-state="canceled"]')).to_be_visible(
            timeout=EXPECT_MS
        )
        await see_error(page, shots)


def tiny_png() -> bytes:
    """A valid 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def send_with_file(page: Any, text: str, file: dict[str, Any], url: str = "") -> Any:
    await page.goto(page.url.split("#")[0] + "#send")
    await page.fill("#send-text", text)
    await page.set_input_files("#send-file", files=[file])
    await page.fill("#send-url", url)
    await page.set_checked("#send-stream", False)
    await page.click("#send-button")
    artifact = page.locator("#send-result .artifact").first
    await expect(artifact).to_be_visible(timeout=EXPECT_MS)
    return artifact


async def test_artifacts_are_rendered_by_media_type(make_server: Factory, tmp_path: Path) -> None:
    """The demo agent echoes every part back as an artifact: text, JSON pretty-printed,
    Markdown rendered with its HTML escaped, an image inline, a URL as a link, and anything
    else as a download link."""
    harness = await make_server(http_port=0)
    assert harness.running.card_url is not None
    shots = shots_dir(tmp_path) / "media"
    shots.mkdir(exist_ok=True)
    async with (
        console(harness.running.card_url, "--transport", "jsonrpc") as running,
        chromium() as page,
    ):
        await open_console(page, running)
        await page.goto(running.base + "/#send")
        await page.fill("#send-data", '{"answer": 42, "list": [1, 2]}')
        markdown = b"# Notes\n\n**bold** and <script>window.injected = 1</script>\n\n- one\n"
        md = {"name": "notes.md", "mimeType": "text/markdown", "buffer": markdown}
        artifact = await send_with_file(page, "media", md)
        await expect(artifact.locator(".part[data-kind=text]")).to_have_text("media")
        data = json.loads(await artifact.locator(".part[data-kind=data] pre.json").inner_text())
        assert data == {"answer": 42, "list": [1, 2]}
        rendered = artifact.locator(".part[data-kind=raw] .md")
        await expect(rendered.locator("h1")).to_have_text("Notes")
        await expect(rendered.locator("strong")).to_have_text("bold")
        await expect(rendered).to_contain_text("<script>window.injected = 1</script>")
        assert await rendered.locator("script").count() == 0
        assert await page.evaluate("window.injected") is None
        await shot(page, shots, "markdown")
        await page.fill("#send-data", "")
        png = {"name": "dot.png", "mimeType": "image/png", "buffer": tiny_png()}
        artifact = await send_with_file(page, "image", png, "https://example.com/report.pdf")
        image = artifact.locator(".part[data-kind=raw] img")
        await expect(image).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
        assert await image.evaluate("img => img.complete && img.naturalWidth") == 1
        link = artifact.locator(".part[data-kind=url] a")
        await expect(link).to_have_attribute("href", "https://example.com/report.pdf")
        blob = {"name": "blob.bin", "mimeType": "application/octet-stream", "buffer": b"\x00\x01"}
        artifact = await send_with_file(page, "bytes", blob)
        download = artifact.locator(".part[data-kind=raw] a.download")
        await expect(download).to_have_attribute("download", "blob.bin")
        await expect(download).to_contain_text("2 bytes")
        await shot(page, shots, "download")
