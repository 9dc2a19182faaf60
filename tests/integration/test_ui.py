"""`podledger ui` in a real headless browser (Chromium from the OS packages): the timeline of a
crash-looping pod drawn from an index the real fold filled, a namespace's pods on one scale, a
click on a version that opens its status, changes and cause (over the DevTools protocol), pod
names and messages that are markup shown as text, a screenshot kept; then the UI following the
topics of the real broker, and stopping on SIGTERM."""

from __future__ import annotations

import asyncio
import base64
import html.parser
import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, ClientWebSocketResponse

from podledger.config import Settings
from podledger.local import free_port
from podledger.read.audit import queries
from podledger.read.audit.parse import PodRef
from podledger.read.index import SqliteIndex
from podledger.read.ui.timeline import PHASE_COLOURS, READY_COLOURS
from podledger.schemas import encode, models
from podledger.streams.replay import replay
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import IngressEvent
from tests.support import wait_for
from tests.support.audit import fill_audit_index, pod_stories
from tests.support.metrics import http_get
from tests.support.processes import REPO_ROOT, PodledgerProcess, podledger_env

T0 = 1_780_000_000_000
MARKUP_NAME = '<script>document.title="owned"</script><img src=x onerror="document.title=1">'
MARKUP_MESSAGE = 'back-off 20s <img src=x onerror="document.title=2"><b>bold</b>'
STORIES = [("shop", "web", 18), ("shop", "cart", 9), ("shop", "evil", 4), ("default", "batch", 6)]
ARTIFACTS = REPO_ROOT / ".test-logs"


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "chromium is needed for the UI tests: `make os-tools` installs it (Debian package)"
    return found


def headless(*args: str) -> list[str]:
    """Chromium without a display (the sandbox needs user namespaces a container may not have)."""
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]


def story_events() -> list[IngressEvent]:
    """The stories, and a back-off report for `batch` whose message is markup (free text a kubelet
    copies from the runtime)."""
    events = pod_stories(T0, STORIES)
    batch = next(
        e
        for e in events
        if isinstance(e.value, models.PodUpdate) and e.value.pod["metadata"]["name"] == "batch"
    )
    uid, node, ts = batch.key, batch.node, max(e.ts_ms for e in events) + 1000
    report = models.PodLifecycle(
        uid,
        node,
        "sync_result",
        ts,
        [{"container": "app", "reason": "CrashLoopBackOff", "message": MARKUP_MESSAGE}],
    )
    return [*events, IngressEvent(Topic.POD_LIFECYCLE, uid, node, report, ts)]


def rename_evil(value: bytes) -> bytes:
    """The pod `evil` as a hostile producer on pod-status-history could name it (the contract's
    name pattern stops markup at the fold's input, not on the history topic)."""
    return value.replace(b'"name":"evil"', b'"name":' + json.dumps(MARKUP_NAME).encode())


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui-index") / "audit.sqlite"
    index = SqliteIndex(path, topics="")
    fill_audit_index(index, story_events(), rewrite=rename_evil)
    index.close()
    return path


def start_ui(
    start: Callable[..., PodledgerProcess], env: dict[str, str], *args: str
) -> tuple[PodledgerProcess, str]:
    proc = start(["ui", "--listen", f"127.0.0.1:{free_port()}", *args], env=env)
    line = wait_for(
        lambda: re.search(r"serving the audit timeline on (http://\S+/)", proc.output()),
        120,
        what="podledger ui",
        alive=proc,
    )
    return proc, line.group(1)


# ------------------------------------------------------------------------------------ the DOM


class Dom(html.parser.HTMLParser):
    """The elements of a dumped DOM: (tag, attributes, text directly inside), in document order."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[int] = []
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, []))
        self._open.append(len(self.elements) - 1)

    def handle_endtag(self, tag: str) -> None:
        while self._open and self.elements[self._open.pop()][0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self._open:
            self.elements[self._open[-1]][2].append(data)

    def find(self, tag: str, **attrs: str) -> list[tuple[dict[str, str], str]]:
        return [
            (a, "".join(text))
            for t, a, text in self.elements
            if t == tag and all(re.fullmatch(v, a.get(k.replace("_", "-"), "")) for k, v in attrs.items())
        ]


def dump_dom(url: str) -> Dom:
    """The page after its script ran, as headless Chromium serialises it."""
    done = subprocess.run(
        headless("--virtual-time-budget=10000", "--dump-dom", url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and 'data-ready="true"' in done.stdout, done.stderr[-3000:]
    return Dom(done.stdout)


def assert_no_injected_markup(dom: Dom) -> None:
    """What came as text stayed text: no element of the markup exists, none of its script ran."""
    assert dom.find("img") == [] and dom.find("b") == []
    assert [a.get("src") for a, _ in dom.find("script")] == ["static/app.js"]
    assert [text for _, text in dom.find("title")][:1] == ["podledger timeline"]


# ------------------------------------------------------------------------------------ DevTools


class Page:
    """A Chromium tab over the DevTools protocol: evaluate, click with the mouse, screenshot."""

    def __init__(self, ws: ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.ws.receive_json(), 60)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return dict(message["result"])

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def until(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}")

    async def click(self, selector: str) -> None:
        """A real left click at the middle of the element (scrolled into view first)."""
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        await self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def screenshot(self, path: Path) -> None:
        await self.evaluate("window.scrollTo(0, 0)")
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))


async def with_page(tmp_path: Path, check: Callable[[Page], Any]) -> None:
    log = tmp_path / "chromium.log"
    with open(log, "wb") as err:
        browser = subprocess.Popen(
            headless(
                "--window-size=1400,1000",
                "--remote-debugging-port=0",
                f"--user-data-dir={tmp_path / 'profile'}",
                "about:blank",
            ),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        found = await asyncio.to_thread(
            wait_for,
            lambda: re.search(r"DevTools listening on ws://([\d.:]+)/", log.read_text()),
            60,
            what="chromium",
        )
        async with ClientSession() as session:
            async with session.get(f"http://{found.group(1)}/json/list") as response:
                targets = await response.json()
            page_ws = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with session.ws_connect(page_ws, max_msg_size=64 << 20) as ws:
                await check(Page(ws))
    finally:
        browser.send_signal(signal.SIGTERM)
        try:
            browser.wait(30)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


def keep(artifact: Path, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(artifact, ARTIFACTS / name)


# ------------------------------------------------------------------------------------ the tests


def test_timeline_namespace_view_and_a_clicked_version_in_chromium(
    index_path: Path, podledger_process: Callable[..., PodledgerProcess], tmp_path: Path
) -> None:
    index = SqliteIndex(index_path, read_only=True)
    names = [(ns, MARKUP_NAME if name == "evil" else name) for ns, name, _ in STORIES]
    web, cart, evil, batch = (
        queries.history(index, PodRef(namespace=ns, name=name))[0] for ns, name in names
    )
    index.close()
    proc, url = start_ui(podledger_process, {"PODLEDGER_INDEX": str(index_path)}, "--no-refresh")

    # The pod view: phase and Ready bands where the versions changed them, restart marks, a
    # click target per version, all drawn by the page's script from the server's data.
    dom = dump_dom(f"{url}#/pod/{web['uid']}")
    assert [text for _, text in dom.find("h2")] == ["shop/web"]
    phases = dom.find("rect", data_kind="phase")
    assert [(a["data-value"], a["fill"], a["data-version"]) for a, _ in phases] == [
        ("Pending", PHASE_COLOURS["Pending"], "1"),
        ("Running", PHASE_COLOURS["Running"], "2"),
    ]
    rows = web["versions"]
    ready_changes = [r for i, r in enumerate(rows) if i == 0 or r["ready"] != rows[i - 1]["ready"]]
    ready = dom.find("rect", data_kind="ready")
    assert [(a["data-value"], a["data-version"]) for a, _ in ready] == [
        (r["ready"], str(r["version"])) for r in ready_changes
    ]
    assert {a["fill"] for a, _ in ready} == {READY_COLOURS["True"], READY_COLOURS["False"]}
    assert len(ready) >= 7  # ready, not ready, crash, restart: three times over
    restarts = dom.find("g", **{"class": "restart"})
    assert [(a["data-container"], a["data-restarts"]) for a, _ in restarts] == [
        ("app", "1"),
        ("app", "2"),
        ("app", "3"),
    ]
    assert [a["data-version"] for a, _ in dom.find("circle", **{"class": "version"})] == [
        str(r["version"]) for r in rows
    ]
    assert len(dom.find("tr", data_uid=web["uid"])) == len(rows)
    widths = [float(a["width"].rstrip("%")) for a, _ in phases]
    assert sum(widths) == pytest.approx(100, abs=0.1) and widths[1] > widths[0]  # Running most of the time

    # The namespace view: every pod of shop on one scale; the pod named with markup shows its
    # name as text, in the lanes and in the pod list, and none of it runs.
    dom = dump_dom(f"{url}#/ns/shop")
    labels = [text for _, text in dom.find("a", href=r"#/pod/.*")]
    assert labels.count(MARKUP_NAME) == 2  # its lane and its entry in the pod list
    lanes = dom.find("div", **{"class": "lane", "data_uid": ".*"})
    assert sorted(a["data-uid"] for a, _ in lanes) == sorted(p["uid"] for p in (web, cart, evil))
    assert len(dom.find("rect", data_kind="phase")) == 6  # Pending then Running, for each of the three
    assert len(dom.find("g", **{"class": "restart"})) == 3 + 1  # web's three, cart's one
    assert_no_injected_markup(dom)
    shot = tmp_path / "ui-namespace.png"
    done = subprocess.run(
        headless(
            "--window-size=1400,800", "--virtual-time-budget=10000", f"--screenshot={shot}", f"{url}#/ns/shop"
        ),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG"), done.stderr[-2000:]
    keep(shot, "ui-namespace.png")

    # A click on a version opens its status, its changes and the inputs that caused it.
    async def click_versions(page: Page) -> None:
        await page.send("Page.navigate", url=f"{url}#/pod/{web['uid']}")
        await page.until(
            "document.body?.dataset.ready === 'true' && document.querySelectorAll('circle.version').length"
        )
        await page.click("circle.version[data-version='6']")
        await page.until("document.querySelector('#detail').dataset.version === '6'")
        detail = await page.evaluate("document.querySelector('#detail').innerText")
        assert "shop/web version 6" in detail
        assert "app=waiting:CrashLoopBackOff,restarts=0" in detail
        assert "changes since version 5" in detail and "containerStatuses[app].state: terminated" in detail
        assert (
            "pod-lifecycle sync_result CrashLoopBackOff back-off 10s" in detail and "new version 6" in detail
        )
        assert await page.evaluate("location.hash") == f"#/pod/{web['uid']}/v/6"
        assert await page.evaluate("document.querySelector('circle.version.selected').dataset.version") == "6"
        shot = tmp_path / "ui-timeline.png"
        await page.screenshot(shot)
        keep(shot, "ui-timeline.png")

        # The next version, from the detail pane's own link.
        await page.click("#detail a.next")
        await page.until("document.querySelector('#detail').dataset.version === '7'")
        assert "restarts=1" in await page.evaluate("document.querySelector('#detail').innerText")

        # A message that is markup, through the real fold into the status: shown as text.
        await page.send("Page.navigate", url=f"{url}#/pod/{batch['uid']}")
        last = batch["versions"][-1]["version"]
        target = f"circle.version[data-uid='{batch['uid']}'][data-version='{last}']"
        await page.until(f'!!document.querySelector("{target}")')  # the same page: a new route
        await page.click(target)
        await page.until(f"document.querySelector('#detail').dataset.version === '{last}'")
        title = await page.evaluate("document.querySelector('#detail h3').innerText")
        assert title == f"default/batch version {last}"
        assert MARKUP_MESSAGE in await page.evaluate("document.querySelector('#detail').innerText")
        assert await page.evaluate("document.querySelectorAll('img, b').length") == 0
        assert await page.evaluate("document.title") == "podledger timeline"

    asyncio.run(with_page(tmp_path, click_versions))
    assert proc.stop(signal.SIGTERM) == 0
    assert "podledger ui: stopped" in proc.output()


async def publish(settings: Settings, events: list[IngressEvent], uids: set[str] | None = None) -> None:
    """The fold's history and journal records of `events` (folded offline), onto the test's topics
    at the node partitions the fold would use; only those of `uids` when given."""
    from aiokafka import AIOKafkaProducer

    from podledger.partitioner import partition_for_node

    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
    await producer.start()
    try:
        for out in replay([encode(e.value) for e in events]):
            value = out.wire_value()
            if out.topic not in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY) or (uids and out.key not in uids):
                continue
            parsed = json.loads(value)  # a version names its node; a journal entry's event does
            node = parsed.get("node") or parsed["event"].get("node", "")
            await producer.send(
                settings.topic(out.topic), key=out.key.encode(), value=value,
                partition=partition_for_node(str(node), settings.partitions),
            )  # fmt: skip
        await producer.flush()
    finally:
        await producer.stop()


@pytest.mark.kafka
def test_the_ui_catches_up_follows_the_topics_and_stops_on_sigterm(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess], tmp_path: Path
) -> None:
    asyncio.run(ensure_topics(settings))
    now = int(time.time() * 1000) - 60_000
    events = pod_stories(now, [("shop", "web", 8), ("shop", "late", 5)])
    uids = {e.key: e.value.pod["metadata"]["name"] for e in events if isinstance(e.value, models.PodUpdate)}
    web = next(uid for uid, name in uids.items() if name == "web")
    asyncio.run(publish(settings, events, {web}))
    env = podledger_env(settings, None, PODLEDGER_INDEX=str(tmp_path / "audit.sqlite"))
    proc, url = start_ui(podledger_process, env)
    port = int(url.rsplit(":", 1)[1].strip("/"))

    def pods() -> list[str]:
        status, body = http_get(port, "/api/pods?namespace=shop")
        assert status == 200, body
        return sorted(p["name"] for p in json.loads(body))

    assert pods() == ["web"]  # caught up before it listened
    assert json.loads(http_get(port, "/api/info")[1])["refresh"] == "following the topics"
    asyncio.run(publish(settings, events, set(uids) - {web}))
    wait_for(lambda: pods() == ["late", "web"], 60, what="the UI to index the new pod", alive=proc)
    status, body = http_get(port, "/api/pod?pod=shop/late")
    assert status == 200 and json.loads(body)["lanes"][0]["last_version"] == 5
    assert proc.stop(signal.SIGTERM, timeout=30) == 0
    assert "podledger ui: stopped" in proc.output()
