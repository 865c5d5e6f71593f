"""The report in a real browser: headless Chromium, networking disabled, driven over the DevTools
protocol with the standard library only (a minimal WebSocket client below), so the test needs no
Python dependency beyond the project's. It fails on any console error, uncaught exception, network
request other than the file itself, JavaScript dialog (an escaping bug would pop `alert`), plot
that did not render, or a blank screenshot. Without Chromium the browser tests are skipped,
saying how to install it (the PNG decoder test needs no browser and always runs).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
INSTALL_HINT = (
    "headless Chromium not found at /usr/bin/chromium; install it with "
    "`apt-get update && apt-get install -y chromium chromium-driver` (.ci/run does this in CI)"
)

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations
DEADLINE = 90.0  # seconds for any one wait: a guard against hangs, not a timing assertion
VIEWPORT = {"width": 1280, "height": 1800}


# -- a minimal WebSocket client (RFC 6455: text frames, client masking, ping/pong) --------------
class WebSocket:
    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"WebSocket handshake refused: {head[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            length = bytes([0x80 | n])
        elif n < 1 << 16:
            length = bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            length = bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = (
            int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")
        ).to_bytes(n, "big")
        self.sock.sendall(bytes([0x80 | opcode]) + length + mask + masked)

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else b""
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = first & 0x0F
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if first & 0x80:
                    return message.decode()

    def close(self) -> None:
        self.sock.close()


class DevTools:
    """Commands and events of one DevTools session (flattened target sessions)."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.pages: list[str] = []  # the targets open_report opened

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str) -> None:
        if any(e["method"] == method for e in self.events):
            return
        while True:
            event = json.loads(self.ws.recv())
            if "method" in event:
                self.events.append(event)
                if event["method"] == "Page.javascriptDialogOpening":  # recorded; never blocks
                    self.call("Page.handleJavaScriptDialog", event["sessionId"], accept=False)
                if event["method"] == method:
                    return

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        return result["result"].get("value")


@contextlib.contextmanager
def chromium(tmp_path: Path) -> Iterator[DevTools]:
    """Headless Chromium with every network path closed: no DNS, a dead proxy, no background
    traffic. The DevTools endpoint listens on loopback on a port the browser picks."""
    profile = tmp_path / "profile"
    args = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--metrics-recording-only",
        "--mute-audio",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        "about:blank",
    ]
    log = (tmp_path / "chromium.log").open("wb")
    proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
    try:
        port_file = profile / "DevToolsActivePort"
        give_up = time.monotonic() + DEADLINE
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            if proc.poll() is not None or time.monotonic() > give_up:
                pytest.fail(f"Chromium did not start: see {tmp_path / 'chromium.log'}")
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        ws = WebSocket(int(port), path)
        try:
            yield DevTools(ws)
        finally:
            ws.close()
    finally:
        if proc.poll() is None:
            os.killpg(
                proc.pid, signal.SIGTERM
            )  # the browser this fixture started, and its children
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    """Headless Chromium, one for the module (each test opens its page in a new target, and the
    previous test's target is closed first); the tests that need it are skipped without it (the
    others run)."""
    if not CHROMIUM.exists():
        pytest.skip(INSTALL_HINT)
    with chromium(tmp_path_factory.mktemp("chromium")) as devtools:
        yield devtools


# -- PNG decoding (stdlib zlib), to count the colours of the screenshot -------------------------
def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered rows of an 8-bit RGB/RGBA PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    rows: list[bytes] = []
    prior = bytearray(stride)
    for y in range(height):
        filter_type = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = prior[i], prior[i - channels] if i >= channels else 0
            if filter_type == 1:
                line[i] = (line[i] + left) & 0xFF
            elif filter_type == 2:
                line[i] = (line[i] + up) & 0xFF
            elif filter_type == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prior = line
    return width, height, [bytes(r[i : i + 3]) for r in rows for i in range(0, stride, channels)]


def colour_census(png: bytes) -> tuple[int, float]:
    """Distinct colours, and the share of pixels that differ from the most common one."""
    _, _, pixels = png_pixels(png)
    counts: dict[bytes, int] = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    return len(counts), 1 - max(counts.values()) / len(pixels)


def test_png_decoder_reads_a_known_image() -> None:
    """Two rows, filters Sub and Paeth, decoded by hand: red, green / blue, white."""
    # row 0, Sub: the second pixel adds its left neighbour: (1+255, 255+0, 0+0) mod 256 = green.
    # row 1, Paeth (a = left, b = up, c = upper left, p = a + b - c; predictor: the nearest of
    # a, b, c to p, ties in that order): first pixel a = c = 0, so the predictor is b = red:
    # (1+255, 0+0, 255+0) = blue; second pixel a = blue, b = green, c = red: predictors
    # (a=0, b=255, a=255), so (255+0, 0+255, 0+255) = white.
    raw = bytes([1, 255, 0, 0, 1, 255, 0]) + bytes([4, 1, 0, 255, 255, 0, 0])
    body = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", body) + chunk(b"IDAT", zlib.compress(raw))
    png += chunk(b"IEND", b"")
    width, height, pixels = png_pixels(png)
    assert (width, height) == (2, 2)
    assert pixels == [b"\xff\x00\x00", b"\x00\xff\x00", b"\x00\x00\xff", b"\xff\xff\xff"]


# -- the test ----------------------------------------------------------------------------------
ALLOWED_SCHEMES = ("data:", "blob:", "about:")


def open_report(browser: DevTools, page: Path) -> str:
    for previous in browser.pages:  # an earlier test's page: no event of it is left to read
        browser.call("Target.closeTarget", targetId=previous)
    target = browser.call("Target.createTarget", url="about:blank")["targetId"]
    browser.pages = [target]
    session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", session)
    browser.call(
        "Emulation.setDeviceMetricsOverride", session, deviceScaleFactor=1, mobile=False, **VIEWPORT
    )
    browser.events.clear()
    browser.call("Page.navigate", session, url=page.as_uri())
    browser.wait_for("Page.loadEventFired")
    return str(session)


PLOTTED = (  # figures plotly has drawn: a plot box holding a drawn trace
    "Array.from(document.querySelectorAll('.plot-box'))"
    ".filter(e => e.querySelector('.cartesianlayer .trace')).length"
)


def wait_until_plotted(browser: DevTools, session: str, expected: int) -> int:
    """Plotly draws after load: wait until every figure has its SVG (or give up at DEADLINE)."""
    give_up = time.monotonic() + DEADLINE
    drawn = 0
    while time.monotonic() < give_up:
        drawn = int(browser.evaluate(session, PLOTTED) or 0)
        if drawn >= expected:
            break
        time.sleep(0.2)
    return drawn


def problems(events: list[dict[str, Any]], page: Path) -> list[str]:
    """Console errors, uncaught exceptions, dialogs and any request other than the page itself."""
    found = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description")) for a in params.get("args", [])]
            found.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"uncaught: {params['exceptionDetails'].get('text')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url != page.as_uri() and not url.startswith(ALLOWED_SCHEMES):
                found.append(f"request: {url}")
        elif method == "Network.loadingFailed":
            found.append(f"failed request: {params.get('errorText')}")
        elif method == "Page.javascriptDialogOpening":
            found.append(f"dialog: {params.get('message')}")
    return found


def synthetic_page(root: Path) -> Path:
    from test_report import GOOD, build_store

    return write_report(build_store(root / "store"), GOOD, root / "report.html")


def example_page(root: Path) -> Path:
    """The example data through ingest and assess (what `make demo` reports), one page of it."""
    from test_report import MARKUP_CAMPAIGN, build_example_site

    _, site = build_example_site(root)
    return site.index.parent / f"campaign-{MARKUP_CAMPAIGN}.html"


def edges_page(root: Path) -> Path:
    """The campaign holding every edge (vanished quantities at +inf, too few pairs, ...)."""
    from edge_campaign import CAMPAIGN, write_edge_campaign
    from test_edges_e2e import ingest_and_assess

    return write_report(
        ingest_and_assess(write_edge_campaign(root / "attempts"), root / "store"),
        CAMPAIGN,
        root / "report.html",
    )


def suite_page(root: Path) -> Path:
    """A campaign that decides every benchmark: the per-benchmark forest plots."""
    from test_suite_outputs import suite_store

    return write_report(suite_store(root / "store"), "suite", root / "report.html")


XSS_TEXT = "<script>alert(1)</script>"  # the hypothesis of the synthetic and example campaigns


@pytest.mark.parametrize(
    ("build", "shown"),
    [
        (synthetic_page, XSS_TEXT),
        (example_page, XSS_TEXT),
        (edges_page, "CUDA graphs remove the launch overhead & the graph breaks"),
        (suite_page, "Each interval is simultaneous over the 7 members"),
    ],
    ids=["synthetic", "example", "edges", "suite"],
)
def test_report_renders_offline_without_errors(
    browser: DevTools, tmp_path: Path, build: Callable[[Path], Path], shown: str
) -> None:
    page = build(tmp_path)
    n_figures = page.read_text(encoding="utf-8").count('<script type="application/json" data-plot=')
    session = open_report(browser, page)
    # figures are drawn as they near the viewport: make the viewport the whole page
    height = int(browser.evaluate(session, "document.documentElement.scrollHeight"))
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        session,
        deviceScaleFactor=1,
        mobile=False,
        width=VIEWPORT["width"],
        height=height,
    )
    drawn = wait_until_plotted(browser, session, n_figures)
    full = browser.call("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)
    (tmp_path / "shot.png").write_bytes(base64.b64decode(full["data"]))  # for a human to look at
    small = browser.call(
        "Page.captureScreenshot",
        session,
        format="png",
        clip={"x": 0, "y": 0, "scale": 0.25, **VIEWPORT},
    )
    title = browser.evaluate(session, "document.title")
    text = browser.evaluate(session, "document.body.innerText")
    assert problems(browser.events, page) == []
    assert drawn == n_figures >= 3
    assert title.endswith(" · explain-pipeline report")
    assert shown in text  # the hypothesis, shown as text
    colours, inked = colour_census(base64.b64decode(small["data"]))
    assert colours >= 16 and inked > 0.05, (colours, inked)


TABLES_THAT_OVERFLOW = (  # tables beside the plots whose content is wider than their column
    "Array.from(document.querySelectorAll('.side .tablewrap'))"
    ".filter(e => e.scrollWidth > e.clientWidth + 1).length"
)
SIDE_TABLES = "document.querySelectorAll('.side .tablewrap').length"
WRAPPED_TIMES = (  # times drawn on more than one line
    "Array.from(document.querySelectorAll('.nowrap')).filter(e => e.getClientRects().length > 1)"
    ".length"
)
STRIP_LEGENDS = (  # legend texts of the strip plots, as drawn
    "Array.from(document.querySelectorAll('[id^=plot-pairs] .legendtext')).map(e => e.textContent)"
)


def test_the_expectations_fit_their_column_and_the_strip_lines_are_named(
    browser: DevTools, tmp_path: Path
) -> None:
    """Issue 20: the expectations table was wider than its column (reason and evidence behind a
    scrollbar), the creation time wrapped mid-offset, and the strip plot's three lines had no
    label. Measured in the browser at the test's width, where the column beside the plots is
    narrowest (below about 1,000 px it moves under the plot and has the whole width)."""
    page = example_page(tmp_path)
    session = open_report(browser, page)
    height = int(browser.evaluate(session, "document.documentElement.scrollHeight"))
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        session,
        deviceScaleFactor=1,
        mobile=False,
        width=VIEWPORT["width"],
        height=height,
    )
    n_figures = page.read_text(encoding="utf-8").count('<script type="application/json" data-plot=')
    assert wait_until_plotted(browser, session, n_figures) == n_figures
    assert int(browser.evaluate(session, SIDE_TABLES)) >= 3
    assert int(browser.evaluate(session, TABLES_THAT_OVERFLOW)) == 0
    assert int(browser.evaluate(session, WRAPPED_TIMES)) == 0
    legends = browser.evaluate(session, STRIP_LEGENDS)
    assert any(x.startswith("paired estimate ") for x in legends), legends
    assert "1: no change" in legends and any(x.startswith("gate ×") for x in legends)
    assert problems(browser.events, page) == []


VERDICTS_OVERFLOW = (  # the verdict table's content wider than its box (a sideways scrollbar)
    "(() => { const e = document.querySelector('#verdicts .tablewrap');"
    " return e.scrollWidth - e.clientWidth; })()"
)
BEST_HEADER_VISIBLE = (  # the last column's header lies inside the table's box
    "(() => { const t = document.querySelector('#verdicts .tablewrap');"
    " const h = Array.from(t.querySelectorAll('th')).pop();"
    " return [h.textContent, h.getBoundingClientRect().right, t.getBoundingClientRect().right];"
    " })()"
)
PLOTLY_DRAWS = (  # a title drawn by plotly from the report's escaping of a text with markup
    "(async () => { const el = document.querySelector('.plot-box');"
    " await Plotly.relayout(el, {title: {text: %s}});"
    " return el.querySelector('.gtitle').textContent; })()"
)


def test_the_verdict_table_fits_at_1400_px_and_plot_text_shows_as_written(
    browser: DevTools, tmp_path: Path
) -> None:
    """Issue 28: at 1400 px the verdict table scrolled sideways with eligible and best behind the
    scrollbar; plot labels with a quote showed "&quot;" (plotly decodes &amp; &lt; &gt;, not
    &quot;). Each round's head says when it was declared and started."""
    from pipeline.report.style import plot_esc

    page = example_page(tmp_path)
    session = open_report(browser, page)
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        session,
        deviceScaleFactor=1,
        mobile=False,
        width=1400,
        height=VIEWPORT["height"],
    )
    assert int(browser.evaluate(session, VERDICTS_OVERFLOW)) <= 1
    header, right, box = browser.evaluate(session, BEST_HEADER_VISIBLE)
    assert header == "best" and right <= box + 1, (right, box)
    text = browser.evaluate(session, "document.body.innerText")
    assert " · started 20" in text
    written = 'kernel "fused" <b>x</b> & more'
    result = browser.call(
        "Runtime.evaluate",
        session,
        expression=PLOTLY_DRAWS % json.dumps(plot_esc(written)),
        awaitPromise=True,
        returnByValue=True,
    )
    assert result["result"]["value"] == written
    assert problems(browser.events, page) == []


MEMBER_NAMES = (  # the first column of r001's table of benchmarks, as shown now
    "Array.from(document.querySelectorAll('#benchmarks-r001 tbody tr'))"
    ".map(r => r.cells[0].textContent)"
)


def click_header(browser: DevTools, session: str, name: str) -> list[str]:
    """Click the header ``name`` of r001's table of benchmarks; the names in their new order."""
    browser.evaluate(
        session,
        "Array.from(document.querySelectorAll('#benchmarks-r001 th button'))"
        f".find(b => b.textContent === {json.dumps(name)}).click()",
    )
    return list(browser.evaluate(session, MEMBER_NAMES))


def test_the_table_of_benchmarks_sorts_by_a_click_on_a_header(
    browser: DevTools, tmp_path: Path
) -> None:
    """Issue 32: the table lists the failing members first; a click on a header sorts by that
    column (again: reversed), members without a ratio last either way; "verdict" returns to
    the failing-first order."""
    page = suite_page(tmp_path)
    session = open_report(browser, page)
    first = list(browser.evaluate(session, MEMBER_NAMES))
    assert first[0] == "metric e2e_seconds"
    assert set(first[1:3]) == {"slower", "@octocat ::error::x|y\\nz"}  # the regressed
    by_name = click_header(browser, session, "member")
    assert by_name == sorted(first)  # JavaScript's < on strings: code units, as Python's
    assert click_header(browser, session, "member") == sorted(first, reverse=True)
    by_ratio = click_header(browser, session, "ratio [low, high]")
    assert by_ratio[0] == "slower" and by_ratio[-2:] == ["gone", "zero"]  # +inf, then none
    assert click_header(browser, session, "ratio [low, high]")[-1] == "zero"  # none: last
    click_header(browser, session, "pairs")
    assert click_header(browser, session, "verdict") == first
    assert problems(browser.events, page) == []
