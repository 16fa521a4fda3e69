"""Nobody in where they don't belong, in a real browser: `streamlit run app.py` driven by
Debian's chromium through playwright.

- Nothing remote from content: a document with images (Markdown, reference-style, HTML, in a badge link, a
  table cell, CSS in a directive, KaTeX) in its title, keywords, summary, section names, headings and body, and
  hostile `?q=` links, shown in the playground (and a section chip), the Documents inspector (every tab), the
  keyword map, the upload preview and upload, and the Tool calls page. A beacon server on 127.0.0.1 counts every
  connection: there must be none, no request may leave the console's own origin, and no script may run (an
  `onerror=`/`<script>` payload would set `window.__pwned`, call the beacon or open a dialog).
- Loopback by default: served on 0.0.0.0 without sign-in, the console answers the machine's other address, and
  127.0.0.1, with the refusal page only; a loopback server opened under a name that resolves to 127.0.0.1 (DNS
  rebinding, simulated with chromium's host resolver rules) refuses too.

Never skipped: CI installs `chromium` with apt; playwright never downloads a browser of its own.
"""

from __future__ import annotations

import http.server
import shutil
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
from support.browser import chromium_page, show_job_changes
from support.hostile import HOSTILE_KEYWORD, HOSTILE_PATH, hostile_document, hostile_fields, hostile_queries
from support.paths import REPO
from support.servers import machine_addresses, server_env, streamlit_server, sync_root

pytestmark = [pytest.mark.browser, pytest.mark.processes]  # a `streamlit run` server and chromium

TIMEOUT_MS = 60_000  # a slow 2-core machine; the first request opens Milvus Lite
REFUSAL = "Not served here"


class Beacon(http.server.ThreadingHTTPServer):
    """An HTTP server on a free loopback port that records every connection and every request line."""

    daemon_threads = True

    def __init__(self):
        self.connections: list[str] = []
        self.requests: list[str] = []
        beacon = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def setup(self):
                beacon.connections.append(str(self.client_address))
                super().setup()

            def handle_one_request(self):
                super().handle_one_request()
                if getattr(self, "requestline", ""):
                    beacon.requests.append(self.requestline)

            def do_GET(self):  # noqa: N802 - http.server's naming
                self.send_response(204)
                self.end_headers()

            do_POST = do_HEAD = do_OPTIONS = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def beacon():
    server = Beacon()
    thread = threading.Thread(target=server.serve_forever, name="beacon", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _serve(root: Path, tmp_path: Path, address: str):
    """`streamlit run app.py` on `address`, with no KB_ or STREAMLIT_ variable of this environment."""
    return streamlit_server(tmp_path, _environment(root), address=address)


def _environment(root: Path) -> dict[str, str]:
    return server_env(root, drop_prefixes=("KB_", "STREAMLIT_"), KB_WATCH="0")


def _chromium(*extra_args: str):
    return chromium_page(TIMEOUT_MS, *extra_args)


def _wait_idle(page) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=TIMEOUT_MS)


def _select_first_row(page, grid, shows) -> None:
    """Select the first row of an `st.dataframe` (drawn on a canvas: click its selection marker at the left edge)
    until `shows` is visible. A grid that a rerun has just replaced may miss the first click; a click that
    took is seen within seconds, so another one is sent only after that long."""
    from playwright.sync_api import expect

    for attempt in range(3):
        grid.click(position={"x": 18, "y": 35 + 17})
        _wait_idle(page)
        try:
            expect(shows).to_be_visible(timeout=15_000)
            return
        except AssertionError:
            if attempt == 2:
                raise


@pytest.fixture
def hostile_server(tmp_path, beacon):
    """The shipped sample plus the hostile document (pointing at the beacon), synced by a separate process, then
    served on 127.0.0.1."""
    root = tmp_path / "root"
    shutil.copytree(REPO / "knowledge_base", root / "knowledge_base")
    (root / HOSTILE_PATH).write_text(hostile_document(beacon.url), encoding="utf-8")
    sync_root(_environment(root))
    with _serve(root, tmp_path, "127.0.0.1") as served:
        yield served


@pytest.mark.timeout(420)
def test_a_hostile_document_and_hostile_links_load_nothing_and_run_nothing(hostile_server, beacon):
    from playwright.sync_api import expect

    url = hostile_server.url
    fields = hostile_fields(beacon.url)
    query, nothing = hostile_queries(beacon.url)
    backtick_keyword = fields["keywords"][1]
    section = next(iter(fields["sections"]))
    with _chromium() as page:
        requests: list[str] = []
        dialogs: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        raw_json = page.get_by_role("heading", name="Raw JSON (what the agent receives)")

        # 1. The playground through a shared link: the answer, the why, the recent queries.
        page.goto(f"{url}/?q={quote(query)}")
        expect(raw_json).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        expect(page.get_by_test_id("stCode")).to_contain_text(f'"source": "{HOSTILE_PATH}"')
        main = page.get_by_test_id("stMain")
        expect(main.get_by_text(fields["title"], exact=False).first).to_be_visible()  # shown as typed
        expect(main.locator("code").filter(has_text=backtick_keyword).first).to_have_text(backtick_keyword)
        expect(main.locator("code").filter(has_text=query).first).to_have_text(query)  # recent queries
        image = main.get_by_role("link", name="body", exact=True)  # an image: its alt text as a link
        expect(image).to_have_attribute("href", f"{beacon.url}/body.png")
        expect(main.get_by_text("🖼").first).to_be_visible()
        expect(main.locator("img")).to_have_count(0)  # no <img> at all in the page's content
        chips = page.locator(".st-key-section-chips")
        chips.get_by_role("button", name=section, exact=True).click()
        expect(page.get_by_role("textbox", name="section_title (optional)")).to_have_value(section,
                                                                                          timeout=TIMEOUT_MS)
        _wait_idle(page)

        page.goto(f"{url}/?q={quote(nothing)}")  # a second link, in a fresh session
        expect(raw_json).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        expect(main.locator("code").filter(has_text=nothing).first).to_have_text(nothing)
        # A link's run is a replay (console-replay), never counted as needing attention; run from the page, the
        # same query is a question of its own, which Tool calls lists below.
        expect(page.get_by_role("textbox", name="Query", exact=True)).to_have_value(nothing)
        page.get_by_role("button", name="Look up").click()
        expect(page.get_by_text("History: your last 4 runs")).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)

        # 2. Documents: the inspector's four tabs, then the keyword map.
        page.goto(f"{url}/documents")
        expect(page.get_by_role("heading", name="Documents").first).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        search = page.get_by_role("textbox", name="Search title, file or keyword")
        search.fill(HOSTILE_KEYWORD)
        search.press("Enter")
        expect(page.get_by_text("1 of ", exact=False).first).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        _select_first_row(page, page.get_by_test_id("stDataFrame").first,
                          page.get_by_role("heading", name=fields["title"]))
        for tab in ("Frontmatter", "Raw file", "Chunks"):
            page.get_by_role("tab", name=tab).click()
            _wait_idle(page)
        expect(page.get_by_test_id("stTable")).to_contain_text(fields["summary"])
        expect(page.get_by_test_id("stExpander").filter(has_text="Details").first).to_be_visible()
        page.get_by_role("tab", name="Keyword map").click()
        _wait_idle(page)
        page.get_by_text("All keywords", exact=True).click()
        _wait_idle(page)
        find = page.get_by_role("textbox", name="Find a keyword")
        find.fill("k`")
        find.press("Enter")
        expect(page.get_by_text("1 of ", exact=False).first).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        _select_first_row(page, page.get_by_test_id("stDataFrame").first,
                          page.get_by_role("heading").filter(has_text="keyword.png"))

        # 3. Upload: the preview of a hostile file under a hostile name, then the upload itself.
        page.goto(f"{url}/upload")
        expect(page.get_by_role("heading", name="Upload documents")).to_be_visible(timeout=TIMEOUT_MS)
        page.get_by_role("combobox", name="Category").click()
        page.get_by_role("option", name="api", exact=True).click()
        name = "![u](beacon.png)`x`.md"  # image syntax in the name (a `:` in a name is refused by the name rule)
        page.locator("input[type=file]").set_input_files(files=[
            {"name": name, "mimeType": "text/markdown", "buffer": hostile_document(beacon.url).encode("utf-8")}])
        preview = page.get_by_test_id("stExpander").filter(has_text=f"{name} →")  # its preview, not a lint group
        expect(preview).to_contain_text(fields["summary"], timeout=TIMEOUT_MS)
        _wait_idle(page)
        # the same bytes are indexed already (HOSTILE_PATH): a duplicate, skipped unless ticked
        page.get_by_test_id("stCheckbox").filter(has_text="Upload duplicates anyway").locator("label").click()
        upload = page.get_by_role("button", name="Upload 1 file(s)")
        expect(upload).to_be_enabled(timeout=TIMEOUT_MS)
        _wait_idle(page)
        upload.click()
        show_job_changes(page, page.get_by_role("heading", name="Result"), TIMEOUT_MS)
        _wait_idle(page)

        # 4. Tool calls: the to-do list names the unanswered query; opening it runs it in the playground.
        page.goto(f"{url}/tool_calls")
        expect(page.get_by_role("heading", name="Needs attention")).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        picker = page.get_by_role("combobox", name="Fix a query, or open it in the playground")
        picker.scroll_into_view_if_needed()
        picker.click()
        expect(page.get_by_role("listbox")).to_be_visible(timeout=TIMEOUT_MS)
        page.get_by_role("option").filter(has_text=nothing).click()
        _wait_idle(page)
        page.get_by_role("button", name="Open in playground").click()
        expect(raw_json).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
        page.wait_for_load_state("networkidle")

        pwned = page.evaluate("() => window.__pwned ?? null")
    foreign = [u for u in requests if not u.startswith((url, "data:", "blob:"))]
    assert beacon.connections == [] and beacon.requests == [], beacon.requests
    assert foreign == [], foreign
    assert pwned is None and dialogs == []


@pytest.mark.timeout(240)
def test_served_on_every_interface_without_sign_in_every_page_refuses(tmp_path):
    """`--server.address 0.0.0.0`: from the machine's other address (what another machine would use) and from
    127.0.0.1, the console shows the refusal page and nothing else, deep links included."""
    from playwright.sync_api import expect

    root = tmp_path / "root"
    root.mkdir()
    with _serve(root, tmp_path, "0.0.0.0") as served, _chromium() as page:
        hosts = [*(ip for ip in machine_addresses() if ":" not in ip), "127.0.0.1"]  # 0.0.0.0 is IPv4 only
        for host in hosts:
            for path in ("", "upload", "documents"):
                page.goto(f"http://{host}:{served.port}/{path}")
                expect(page.get_by_role("heading", name=REFUSAL)).to_be_visible(timeout=TIMEOUT_MS)
                _wait_idle(page)
                expect(page.get_by_test_id("stAlert")).to_contain_text("This server listens on 0.0.0.0")
                expect(page.get_by_role("heading", name="Upload documents")).to_have_count(0)
                expect(page.get_by_test_id("stSidebar")).to_have_count(0)
    assert not (root / "kb.sqlite3").exists()  # nobody opened the knowledge base


@pytest.mark.timeout(240)
def test_a_loopback_server_opened_under_another_name_refuses(tmp_path):
    """DNS rebinding: a web page's own name resolving to 127.0.0.1 reaches a loopback server from the user's
    browser. The Host header gives it away; `localhost` works as before."""
    from playwright.sync_api import expect

    root = tmp_path / "root"
    root.mkdir()
    with _serve(root, tmp_path, "127.0.0.1") as served, \
            _chromium("--host-resolver-rules=MAP rebind.test 127.0.0.1") as page:
        page.goto(f"http://rebind.test:{served.port}/")
        expect(page.get_by_role("heading", name=REFUSAL)).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.get_by_text("rebind.test", exact=False).first).to_be_visible()
        page.goto(f"http://localhost:{served.port}/")
        expect(page.get_by_role("heading", name="Lookup playground")).to_be_visible(timeout=TIMEOUT_MS)
        _wait_idle(page)
