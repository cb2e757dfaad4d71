"""The playground page in headless Chromium against the real server on loopback.

Needs Debian's ``chromium`` (``.ci/run`` installs it) and the ``playwright``
package, which drives that browser (it downloads none of its own here).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
sync_api = pytest.importorskip("playwright.sync_api")

from tests.serving import RunningServer, serve  # noqa: E402
from yomiage import TTS  # noqa: E402
from yomiage.server import ServerConfig  # noqa: E402

pytestmark = pytest.mark.server

KEY = "playground-key"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium found: apt-get install chromium (the CI script does)")


@pytest.fixture(scope="module")
def server(engine: TTS) -> Iterator[RunningServer]:
    with serve(engine, ServerConfig(warmup=False, api_key=KEY)) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=["--autoplay-policy=no-user-gesture-required", "--no-sandbox"],
        )
        yield browser
        browser.close()


def _wait(page: Any, script: str, timeout: float = 30.0) -> None:
    # Polled from here: the page's Content-Security-Policy forbids the string
    # evaluation that Playwright's wait_for_function uses.
    end = time.monotonic() + timeout
    while not page.evaluate(script):
        if time.monotonic() > end:
            raise TimeoutError(script)
        time.sleep(0.05)


@pytest.mark.browser
def test_type_click_listen_download(server: RunningServer, browser: Any) -> None:
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(server.url + "/")
    # Without the key the voices cannot be listed; with it they can.
    _wait(page, "() => document.querySelector('#server-status').textContent.includes('401')"
          " || document.querySelector('#server-status').textContent.includes('key')")  # fmt: skip
    problems.clear()  # the 401 above is expected
    page.fill("#api-key", KEY)
    page.dispatch_event("#api-key", "change")
    _wait(page, "() => document.querySelector('#voice').options.length > 0")
    assert page.eval_on_selector_all("#style option", "os => os.map(o => o.value)") == [
        "Neutral",
        "Happy",
        "Sad",
    ]
    page.select_option("#style", "Happy")
    page.fill("#seed", "7")
    page.fill("#text", "こんにちは。今日はいい天気ですね。")
    page.click("#speak")
    _wait(
        page,
        "() => { const a = document.querySelector('#player');"
        " return a.src.startsWith('blob:') && a.readyState >= 1 && a.duration > 1; }",
    )
    message = page.inner_text("#message")
    assert message.startswith("first audio after"), message
    download = page.get_attribute("#download", "href")
    assert download and download.startswith("blob:")
    assert not page.is_hidden("#download")
    assert problems == []
    page.close()


@pytest.mark.browser
def test_page_shows_server_errors(server: RunningServer, browser: Any) -> None:
    page = browser.new_page()
    page.goto(server.url + "/")
    page.fill("#api-key", KEY)
    page.dispatch_event("#api-key", "change")
    _wait(page, "() => document.querySelector('#voice').options.length > 0")
    page.fill("#text", "。。。")
    page.click("#speak")
    _wait(page, "() => document.querySelector('#message').className === 'error'")
    assert page.inner_text("#message")
    page.close()


def test_page_and_assets_are_self_contained(server: RunningServer) -> None:
    """No CDN: every URL the page loads is the app's own."""
    import httpx

    page = httpx.get(server.url + "/")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert "http://" not in page.text and "https://" not in page.text
    for asset in ("/playground/app.js", "/playground/style.css"):
        body = httpx.get(server.url + asset).text
        assert "http://" not in body and "https://" not in body
