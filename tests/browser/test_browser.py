"""End to end in a real browser: `streamlit run app.py` driven by Debian's chromium through PyPI playwright.

Upload a document, find it in the playground, inspect it (a click on a cell) and delete it on the Documents page,
check the playground no longer finds it, restore it from the Trash tab byte for byte and follow its `?doc=` link.
Upload a document, find it in the playground, inspect and delete it on the Documents page, and check the
playground no longer finds it; start *Re-index all*, close the tab, and see the job finish from a new one.
Screenshots of each page land in `test-artifacts/` for a human to look at.
Never skipped: CI installs `chromium` with apt; playwright never downloads a browser of its own.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import pytest
from support.browser import VIEWPORT, chromium_page, show_job_changes
from support.documents import doc, write_doc
from support.paths import REPO
from support.servers import server_env, streamlit_server, sync_root

pytestmark = [pytest.mark.browser, pytest.mark.processes]  # a `streamlit run` server and chromium

ARTIFACTS = REPO / "test-artifacts"
SOURCE = "knowledge_base/api/payment-errors.md"
TIMEOUT_MS = 60_000  # a slow 2-core machine; the first request opens Milvus Lite

PAYMENT_DOC = doc(
    "支付网关错误码定义",
    ["ERR_TIMEOUT", "超时", "支付网关"],
    "支付网关返回的错误码、含义与处理方式",
    "# 错误码\n\n## ERR_TIMEOUT\n\n支付网关在 30 秒内没有响应。客户端应使用同一幂等键重试，最多 3 次。\n\n"
    "## ERR_DECLINED\n\n发卡行拒绝了交易，不要重试，提示用户更换支付方式。\n",
)


@contextlib.contextmanager
def _serve(root: Path, tmp_path: Path):
    """`streamlit run app.py` on a free port over `root` (tests/support/servers.py: streamlit_server)."""
    with streamlit_server(tmp_path, server_env(root)) as served:
        yield {"url": served.url, "root": root, "log": served.log}


@pytest.fixture
def server(tmp_path):
    """A real `streamlit run app.py` over a fresh, empty application root."""
    root = tmp_path / "root"
    root.mkdir()
    with _serve(root, tmp_path) as served:
        yield served


@pytest.fixture
def sample_server(tmp_path):
    """The same over a copy of the shipped sample, synced first by a separate process (Milvus Lite admits one
    process at a time, and the server must be the one holding it)."""
    root = tmp_path / "root"
    shutil.copytree(REPO / "knowledge_base", root / "knowledge_base")
    with _synced_server(root, tmp_path) as served:
        yield served


def _synced_server(root: Path, tmp_path: Path):
    """`root` synced by a separate process first (Milvus Lite admits one process at a time, and the server must be
    the one holding it), then served."""
    sync_root(server_env(root))
    return _serve(root, tmp_path)


REINDEXED = 300  # documents: enough for a re-index of a good ten seconds on two cores


@pytest.fixture
def large_server(tmp_path):
    """A knowledge base of REINDEXED small documents, synced, served."""
    root = tmp_path / "root"
    for i in range(REINDEXED):
        write_doc(root, f"knowledge_base/ops/runbook-{i:03d}.md",
                  doc(f"Runbook {i}", [f"RUNBOOK_{i:03d}"], f"Relay {i} recovery",
                      f"# Runbook {i}\n\n## Detect\n\nRelay {i} misses three heartbeats in a row.\n\n"
                      f"## Recover\n\nRestart relay {i}, then check the queue depth of shard {i % 7}.\n"))
    with _synced_server(root, tmp_path) as served:
        yield served


@pytest.fixture
def page():
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(TIMEOUT_MS) as opened:
        yield opened


APP_PAGES = ["Lookup playground", "Documents", "Upload", "Tool calls", "Evaluation", "Settings"]  # app.py navigation


def _open(page, server, path: str, title: str) -> None:
    """Load a page and wait for its title, app.py's navigation and the sidebar status (rendered after the page,
    on every page)."""
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/{path}")
    expect(page.get_by_role("heading", name=title)).to_be_visible(timeout=TIMEOUT_MS)
    sidebar = page.get_by_test_id("stSidebar")
    nav = sidebar.get_by_role("navigation")
    for name in APP_PAGES:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    expect(sidebar.get_by_role("heading", name="Status", exact=True)).to_be_visible(timeout=TIMEOUT_MS)
    expect(sidebar.get_by_test_id("stMetric").first).to_be_visible()
    expect(page.get_by_text("Page not found")).to_have_count(0)  # Streamlit's modal for an unknown url path


def _sidebar_metric(page, label: str):
    """The value of one sidebar status metric (L0, Database, Milvus)."""
    metric = page.get_by_test_id("stSidebar").get_by_test_id("stMetric").filter(
        has=page.get_by_test_id("stMetricLabel").get_by_text(label, exact=True))
    return metric.get_by_test_id("stMetricValue")


def _wait_idle(page) -> None:
    """Wait until Streamlit has finished the current script run (its 'Running…' indicator is gone)."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=TIMEOUT_MS)


def _screenshot(page, name: str) -> None:
    """The whole page: Streamlit scrolls inside its main section, so grow the viewport to the content first."""
    height = page.evaluate("""() => Math.max(1000, ...[...document.querySelectorAll(
        '[data-testid=stMain], [data-testid=stMainBlockContainer], [data-testid=stSidebarContent]')]
        .map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(height + 200, 8000)})
    page.wait_for_timeout(500)  # let the layout settle at the new size
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    page.set_viewport_size(VIEWPORT)


def _click_row(page, grid, row: int) -> None:
    """Select a row of an `st.dataframe` with row selection: its cells are drawn on a canvas, so click the row's
    selection marker at the left edge (header and rows are 35 px high), then wait for the rerun."""
    grid.scroll_into_view_if_needed()
    grid.click(position={"x": 18, "y": 35 * (row + 1) + 17})
    _wait_idle(page)


def _click_cell(page, grid, row: int, x: int = 300) -> None:
    """Click a cell of a row (not its selection marker): with cell selection on, that selects the row too."""
    grid.scroll_into_view_if_needed()
    grid.click(position={"x": x, "y": 35 * (row + 1) + 17})
    _wait_idle(page)


def _look_up(page, query: str) -> None:
    from playwright.sync_api import expect

    box = page.get_by_role("textbox", name="Query", exact=True)
    box.fill(query)
    page.get_by_role("button", name="Look up").click()
    expect(page.get_by_role("heading", name="Raw JSON (what the agent receives)")).to_be_visible(timeout=TIMEOUT_MS)
    _wait_idle(page)


@pytest.mark.timeout(180)
def test_a_deep_link_on_a_fresh_server_runs_app_py(server, page):
    """The first request of a fresh server is a deep link (a bookmark, a reload after a restart). Streamlit treats
    the `pages/` folder next to app.py as a legacy (v1) multipage app until some run calls `st.navigation`, and
    runs pages/upload.py on its own; the page hands the run over to app.py (pages/__init__.py). Without that, the
    sidebar would list every pages/*.py by file name and show no status; with page scripts Streamlit does not
    find, it would show its "Page not found" dialog over the right page."""
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/upload")
    expect(page.get_by_role("heading", name="Upload documents")).to_be_visible(timeout=TIMEOUT_MS)
    _wait_idle(page)
    sidebar = page.get_by_test_id("stSidebar")
    nav = sidebar.get_by_role("navigation")
    links = [" ".join(text.split()) for text in nav.get_by_role("link").all_inner_texts()]
    missing = [name for name in APP_PAGES if nav.get_by_role("link", name=name, exact=True).count() == 0]
    assert not missing and len(links) == len(APP_PAGES), (
        f"the sidebar lists {links}, not app.py's st.navigation pages: Streamlit ran the page file on its own "
        "(v1 multipage mode, triggered by the `pages/` folder next to app.py)")
    expect(sidebar.get_by_role("heading", name="Status", exact=True)).to_be_visible()
    expect(sidebar.get_by_test_id("stMetric")).to_have_count(3)
    expect(page.get_by_text("Page not found")).to_have_count(0)  # Streamlit's modal for an unknown url path

    # The server has left the legacy mode for good: the next page comes from app.py's navigation as usual.
    nav.get_by_role("link", name="Tool calls", exact=True).click()
    expect(page.get_by_role("heading", name="Tool calls", exact=False).first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page).to_have_url(f"{server['url']}/tool_calls")
    _wait_idle(page)
    expect(sidebar.get_by_role("heading", name="Status", exact=True)).to_be_visible()
    expect(page.get_by_text("Page not found")).to_have_count(0)


@pytest.mark.timeout(300)
def test_upload_look_up_delete_in_a_real_browser(server, page):
    from playwright.sync_api import expect

    root: Path = server["root"]
    on_disk = root / SOURCE

    # 0. The home page is the playground (what a user opens first).
    _open(page, server, "", "Lookup playground")
    expect(page.get_by_text("Type a query")).to_be_visible()

    # 1. Upload into the category `api` (none is chosen for the curator).
    _open(page, server, "upload", "Upload documents")
    expect(page.get_by_text("per file, set by KB_MAX_UPLOAD_BYTES")).to_be_visible()
    category = page.get_by_role("combobox", name="Category")
    category.click()
    page.get_by_role("option", name="api", exact=True).click()
    expect(category).to_have_value("api")
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "payment-errors.md", "mimeType": "text/markdown", "buffer": PAYMENT_DOC.encode("utf-8")}]
    )
    preview = page.get_by_test_id("stExpander").filter(has_text="payment-errors.md")
    expect(preview).to_contain_text(SOURCE, timeout=TIMEOUT_MS)
    expect(preview).to_contain_text("支付网关错误码定义")
    expect(preview).to_contain_text("ERR_TIMEOUT")
    page.get_by_role("button", name="Upload 1 file(s)").click()
    # the upload runs as a job; its result shows above the preview once the page is redrawn
    show_job_changes(page, page.get_by_role("heading", name="Result"), TIMEOUT_MS)
    # st.dataframe draws its cells on a canvas: the summary above it carries the outcome as readable text
    expect(page.get_by_text("1 indexed", exact=True)).to_be_visible()
    expect(page.get_by_test_id("stDataFrame").first).to_be_visible()  # the result (the jobs panel keeps one too)
    for store in ("L0", "Database", "Milvus"):
        expect(_sidebar_metric(page, store)).to_have_text("1")
    _wait_idle(page)
    _screenshot(page, "upload.png")
    assert on_disk.read_text(encoding="utf-8") == PAYMENT_DOC

    # 2. The playground answers an exact L0 hit.
    _open(page, server, "", "Lookup playground")
    _look_up(page, "ERR_TIMEOUT")
    expect(page.get_by_text("exact_L0", exact=True).first).to_be_visible()
    expect(page.get_by_text("confidence: high", exact=True)).to_be_visible()
    raw = page.get_by_test_id("stCode")
    expect(raw).to_contain_text(f'"source": "{SOURCE}"')
    expect(raw).to_contain_text('"found": true')
    _screenshot(page, "playground.png")

    # 3. Documents: listed, inspected, deleted (file gone from disk).
    _open(page, server, "documents", "Documents")
    expect(page.get_by_text("1 of 1 documents")).to_be_visible()
    _wait_idle(page)
    _click_cell(page, page.get_by_test_id("stDataFrame").first, 0)  # a click on any cell opens the inspector
    expect(page.get_by_role("heading", name="支付网关错误码定义")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page).to_have_url(re.compile(r"/documents\?doc=api(%2F|/)payment-errors\.md$"))  # a link to it
    expect(page.get_by_role("tab", name="Frontmatter")).to_be_visible()
    page.get_by_role("tab", name="Chunks").click()
    page.get_by_role("textbox", name="Search in this document's chunks").fill("幂等")
    page.keyboard.press("Enter")
    expect(page.get_by_text("contain “幂等”")).to_be_visible(timeout=TIMEOUT_MS)
    _wait_idle(page)
    _screenshot(page, "documents.png")
    page.get_by_role("button", name="Delete…").click()
    expect(page.get_by_text("Its file goes to the trash", exact=False)).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Confirm delete").click()
    expect(page.get_by_text(f"deleted {SOURCE}: its file is in the trash")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text("0 of 0 documents")).to_be_visible()
    for store in ("L0", "Database", "Milvus"):
        expect(_sidebar_metric(page, store)).to_have_text("0")
    _wait_idle(page)
    assert not on_disk.exists()
    _screenshot(page, "documents-after-delete.png")

    # 4. The playground no longer finds it, and says why: nothing is indexed any more.
    _open(page, server, "", "Lookup playground")
    _look_up(page, "ERR_TIMEOUT")
    expect(page.get_by_text("The index is empty - no document is indexed", exact=False)).to_be_visible()
    expect(page.get_by_text("exact_L0", exact=True)).to_have_count(0)
    expect(page.get_by_text("No L0 match.")).to_be_visible()
    raw = page.get_by_test_id("stCode")
    expect(raw).to_contain_text('"found": false')
    expect(raw).not_to_contain_text(SOURCE)

    # 5. The Trash tab brings it back, byte for byte, into every store.
    _open(page, server, "documents", "Documents")
    page.get_by_role("tab", name="Trash").click()
    expect(page.get_by_text("1 deleted document(s)", exact=False)).to_be_visible(timeout=TIMEOUT_MS)
    _wait_idle(page)
    _click_cell(page, page.get_by_test_id("stDataFrame").first, 0)
    restore = page.get_by_role("button", name="Restore")
    expect(restore).to_be_visible(timeout=TIMEOUT_MS)
    _screenshot(page, "trash.png")
    restore.click()
    expect(page.get_by_text(f"restored {SOURCE} (indexed)")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text("The trash is empty.")).to_be_visible()
    for store in ("L0", "Database", "Milvus"):
        expect(_sidebar_metric(page, store)).to_have_text("1")
    _wait_idle(page)
    assert on_disk.read_bytes() == PAYMENT_DOC.encode("utf-8")

    # 6. A link to the document opens its inspector in a fresh page load; the playground finds it again.
    page.goto(f"{server['url']}/documents?doc=api/payment-errors.md")
    expect(page.get_by_role("heading", name="支付网关错误码定义")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_role("tab", name="Raw file")).to_be_visible()
    expect(page.get_by_text("1 of 1 documents")).to_be_visible()
    _wait_idle(page)
    expect(page).to_have_url(re.compile(r"/documents\?doc=api(%2F|/)payment-errors\.md$"))
    _open(page, server, "", "Lookup playground")
    _look_up(page, "ERR_TIMEOUT")
    expect(page.get_by_text("exact_L0", exact=True).first).to_be_visible()
    expect(page.get_by_test_id("stCode")).to_contain_text(f'"source": "{SOURCE}"')


@pytest.mark.timeout(300)
def test_a_batch_with_two_files_for_one_path_in_a_real_browser(server, page):
    """The English and the Chinese route.md in one batch: refused until one is renamed, then both go in."""
    from playwright.sync_api import expect

    route_en = doc("Route", ["Route", "APISIX"], "Match requests and send them upstream.", "# Route\n\nMatch.\n")
    route_zh = doc("路由", ["路由", "APISIX"], "匹配请求并转发到上游。", "# 路由\n\n匹配请求。\n")
    _open(page, server, "upload", "Upload documents")
    page.get_by_role("combobox", name="Category").click()
    page.get_by_role("option", name="api", exact=True).click()
    page.locator("input[type=file]").set_input_files(files=[
        {"name": "route.md", "mimeType": "text/markdown", "buffer": route_en.encode()},
        {"name": "route.md", "mimeType": "text/markdown", "buffer": route_zh.encode()},
        {"name": "logo.md", "mimeType": "text/markdown", "buffer": b"\x89PNG\x00\x00"},
    ])
    expect(page.get_by_text("nothing is written until then", exact=False)).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text("logo.md: logo.md looks binary", exact=False)).to_be_visible()  # not a tooltip
    expect(page.get_by_text("2 need a new name · 1 refused", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Upload", exact=True)).to_be_disabled()
    _wait_idle(page)
    _screenshot(page, "upload-batch-clash.png")
    page.get_by_role("textbox", name="New file name").nth(1).fill("route-zh.md")
    page.get_by_role("textbox", name="New file name").nth(1).press("Enter")
    upload = page.get_by_role("button", name="Upload 2 file(s)")
    expect(upload).to_be_enabled(timeout=TIMEOUT_MS)
    _wait_idle(page)
    upload.click()
    show_job_changes(page, page.get_by_text("2 indexed, 1 refused", exact=True), TIMEOUT_MS)
    root: Path = server["root"]
    assert (root / "knowledge_base/api/route.md").read_text(encoding="utf-8") == route_en
    assert (root / "knowledge_base/api/route-zh.md").read_text(encoding="utf-8") == route_zh


@pytest.mark.timeout(300)
def test_an_ambiguous_query_shows_both_panels_and_why(sample_server, page):
    """The sample's "超时" is claimed by two documents: primary (low confidence) + L1 supplement + the why."""
    from playwright.sync_api import expect

    _open(page, sample_server, "", "Lookup playground")
    for store, count in (("L0", "9"), ("Database", "10"), ("Milvus", "10")):
        expect(_sidebar_metric(page, store)).to_have_text(count)
    _look_up(page, "超时")
    expect(page.get_by_text("confidence: low", exact=True)).to_be_visible()
    expect(page.get_by_text("semantic_L1", exact=True).first).to_be_visible()
    expect(page.get_by_text("several L0 hits: L1 called to supplement")).to_be_visible()
    # the query *is* the keyword `超时`, exactly, on both documents: L1's order breaks the tie (an exact
    # keyword outranks the longer `接口超时` that merely contains it)
    expect(page.get_by_text("tied with 1 other document(s) on “超时” (claimed by 2); L1 ranks it highest")
           ).to_be_visible()
    raw = page.get_by_test_id("stCode")
    expect(raw).to_contain_text('"source": "knowledge_base/troubleshooting/timeout.md"')
    _screenshot(page, "playground-why.png")

    # The primary's sections as chips: a click asks again with that section_title, as an agent would.
    chips = page.locator(".st-key-section-chips")
    expect(chips.get_by_role("button")).to_have_count(5)  # the whole document + its four `##` sections
    chips.get_by_role("button", name="2. 线程池与连接池", exact=True).click()
    raw = page.get_by_test_id("stCode")
    expect(raw).to_contain_text('"section": "2. 线程池与连接池"', timeout=TIMEOUT_MS)
    _wait_idle(page)
    expect(raw).to_contain_text("busyThreads")
    expect(raw).not_to_contain_text("traceId")  # section 1 is not served
    expect(page.get_by_role("textbox", name="section_title (optional)")).to_have_value("2. 线程池与连接池")
    _screenshot(page, "playground-sections.png")
    # the rest of the Tool calls page's material: one exact hit, one query nothing answers
    _look_up(page, "ERR_TIMEOUT")
    expect(page.get_by_text("confidence: high", exact=True)).to_be_visible()
    _look_up(page, "flux capacitor warranty")
    expect(page.get_by_test_id("stCode")).to_contain_text('"found": false')

    # The keyword map names the clash; fix it from there: the payment document drops `超时`.
    _open(page, sample_server, "documents", "Documents")
    page.get_by_role("tab", name="Keyword map").click()
    expect(page.get_by_text("Ambiguous keywords")).to_be_visible()
    _wait_idle(page)
    _screenshot(page, "keyword-map.png")
    _click_row(page, page.get_by_test_id("stDataFrame").first, 0)  # problems first: `超时`
    expect(page.get_by_role("heading", name="“超时”")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("combobox", name="Edit the keywords of").click()
    page.get_by_role("option", name="knowledge_base/api/payment-errors.md", exact=True).click()
    _wait_idle(page)
    box = page.get_by_role("textbox", name="Keywords (one per line)")
    expect(box).to_have_value("ERR_TIMEOUT\n超时\n支付网关")
    box.fill("ERR_TIMEOUT\nERR_DECLINED\n支付网关")
    box.press("Control+Enter")  # a text area submits on Ctrl+Enter (or on leaving it)
    preview = page.get_by_test_id("stExpander").filter(has_text="payment-errors.md →")
    expect(preview).to_contain_text("replaces the existing", timeout=TIMEOUT_MS)
    _wait_idle(page)
    _screenshot(page, "keyword-edit.png")
    page.get_by_role("button", name="Save and re-index").click()
    expect(page.get_by_text("keywords saved", exact=False)).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text("No keyword makes L0 ambiguous.")).to_be_visible()
    _wait_idle(page)
    saved = (sample_server["root"] / "knowledge_base/api/payment-errors.md").read_text(encoding="utf-8")
    assert "keywords: [ERR_TIMEOUT, ERR_DECLINED, 支付网关]\n" in saved

    _open(page, sample_server, "", "Lookup playground")
    _look_up(page, "超时")
    expect(page.get_by_text("confidence: high", exact=True)).to_be_visible()
    expect(page.get_by_test_id("stCode")).to_contain_text('"source": "knowledge_base/troubleshooting/timeout.md"')

    # Tool calls: the charts over time and the to-do list; the low-confidence and the unanswered query need
    # attention, the exact hit does not. Opening one runs it in the playground (a fresh session: the answer
    # can only come from the link).
    _open(page, sample_server, "tool_calls", "Tool calls")
    charts = page.get_by_test_id("stVegaLiteChart")
    expect(charts).to_have_count(3)
    for i in range(3):  # vega-embed draws asynchronously
        expect(charts.nth(i).locator("canvas, svg").first).to_be_visible()
    expect(page.get_by_role("heading", name="Needs attention")).to_be_visible()
    _wait_idle(page)
    _screenshot(page, "tool-calls.png")
    picker = page.get_by_role("combobox", name="Fix a query, or open it in the playground")
    # the picker sits at the bottom edge of the 1000 px viewport: a click while Streamlit's scroll container
    # is still bringing it into view lands beside it; scroll first, then open it and wait for the list
    picker.scroll_into_view_if_needed()
    picker.click()
    expect(page.get_by_role("listbox")).to_be_visible(timeout=TIMEOUT_MS)
    options = page.get_by_role("option")
    expect(options.filter(has_text="flux capacitor warranty")).to_have_count(1)
    expect(options.filter(has_text="ERR_TIMEOUT")).to_have_count(0)
    options.filter(has_text="超时").click()
    expect(picker).to_have_value("超时")
    _wait_idle(page)
    page.get_by_role("button", name="Open in playground").click()
    expect(page).to_have_url(re.compile(r"/\?q=%E8%B6%85%E6%97%B6$"), timeout=TIMEOUT_MS)
    expect(page.get_by_role("heading", name="Raw JSON (what the agent receives)")).to_be_visible(timeout=TIMEOUT_MS)
    _wait_idle(page)
    expect(page.get_by_role("textbox", name="Query", exact=True)).to_have_value("超时")
    raw = page.get_by_test_id("stCode")
    expect(raw).to_contain_text('"source": "knowledge_base/troubleshooting/timeout.md"')
    expect(raw).to_contain_text('"confidence": "high"')  # the keyword fix above made it unique


@pytest.mark.timeout(300)
def test_a_test_bench_link_shows_its_settings_and_highlighted_rows(sample_server, page):
    """A link holds a test: it opens with the bench's controls set, the agent's exact answer as
    the default view, and the bench's rows beside it with the query's terms highlighted (rendered, not shown as
    directive text). A control changed and run again puts the new test in the URL."""
    from playwright.sync_api import expect

    _open(page, sample_server, "?q=%E8%B6%85%E6%97%B6&retriever=bm25&k=5&category=troubleshooting",
          "Lookup playground")
    expect(page.get_by_role("heading", name="Raw JSON (what the agent receives)")).to_be_visible(timeout=TIMEOUT_MS)
    _wait_idle(page)
    expect(page.get_by_role("tab", name="What the agent receives")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("combobox", name="Retriever")).to_have_value("BM25 only")
    page.get_by_role("tab", name=re.compile(r"^Test bench · BM25 only · top 5 · in troubleshooting")).click()
    first = page.locator(".st-key-bench-row-1")
    expect(first).to_be_visible()
    expect(first).to_contain_text("knowledge_base/troubleshooting/")
    expect(first).to_contain_text("BM25 score")
    expect(first.get_by_text("超时", exact=True).first).to_be_visible()  # a highlighted run is its own element
    expect(page.get_by_text("orange-background")).to_have_count(0)  # the directive rendered, never shown
    _screenshot(page, "playground-bench.png")

    page.get_by_role("spinbutton", name="Minimum score").fill("2")
    page.get_by_role("spinbutton", name="Minimum score").press("Enter")
    _wait_idle(page)
    page.get_by_role("button", name="Look up").click()
    expect(page).to_have_url(re.compile(r"min_score=2\.0"), timeout=TIMEOUT_MS)
    _wait_idle(page)
    expect(page.get_by_role("tab", name=re.compile(r"BM25 score ≥ 2 · "))).to_be_visible()
def _job_row(root: Path, job_id: int):
    """The job's row as any process reads it."""
    from kb_core.jobs.store import JobStore
    from kb_core.storage.metadata_store import MetadataStore

    metadata = MetadataStore(f"sqlite:///{root / 'kb.sqlite3'}")
    try:
        return JobStore(metadata).get(job_id)
    finally:
        metadata.dispose()


def _until(condition, what: str, timeout: float = 120):
    import time

    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.1)
    return value


@pytest.mark.timeout(420)
def test_re_index_all_goes_on_after_the_tab_closes_and_a_new_tab_sees_it_end(large_server, page):
    """*Re-index all* is a job on the server. Started in one tab, which is then closed mid-way, it goes
    on and re-indexes every document; a new tab (a new session) shows it running and then how it ended."""
    from playwright.sync_api import expect

    root: Path = large_server["root"]
    _open(page, large_server, "documents", "Documents")
    page.get_by_role("tab", name="Maintenance").click()
    page.get_by_role("button", name="Re-index all").click()
    expect(page.get_by_text("Re-index all started as job 1", exact=False)).to_be_visible(timeout=TIMEOUT_MS)
    panel_bar = page.get_by_test_id("stProgress")
    expect(panel_bar).to_be_visible(timeout=TIMEOUT_MS)  # the panel refreshes itself: no click needed
    expect(panel_bar).to_contain_text(f"of {REINDEXED}", timeout=TIMEOUT_MS)
    at_close = _until(lambda: (row := _job_row(root, 1)) and row.state.value == "running" and row.done >= 5 and row,
                      "the job to be under way")
    assert at_close.done < REINDEXED
    page.close()  # the tab that started it is gone ...
    _until(lambda: _job_row(root, 1).done > at_close.done, "progress with no tab open")  # ... the job is not

    context = page.context.browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    fresh = context.new_page()  # a new tab: a new session that started nothing
    _open(fresh, large_server, "documents", "Documents")
    fresh.get_by_role("tab", name="Maintenance").click()
    watched = _job_row(root, 1).active
    if watched:  # still running: this tab shows it, with its progress
        expect(fresh.get_by_text("job 1 · running", exact=False)).to_be_visible(timeout=TIMEOUT_MS)
        expect(fresh.get_by_test_id("stProgress")).to_contain_text(f"of {REINDEXED}")
        _screenshot(fresh, "jobs-running.png")
    ended = fresh.get_by_text("Re-index all (job 1, succeeded", exact=False)
    expect(ended).to_be_visible(timeout=240_000)  # the panel notices the end by itself (a rerun of the panel alone)
    expect(ended).to_contain_text(f"{REINDEXED} re-indexed")
    # ended while this tab looked on or before: Maintenance has nothing to type into, so it redrew itself
    expect(fresh.get_by_role("button", name="Show the changes")).to_have_count(0)
    expect(fresh.get_by_test_id("stProgress")).to_have_count(0)
    row = _job_row(root, 1)
    assert row.state.value == "succeeded" and row.done == row.total == REINDEXED
    assert row.counts == {"reindexed": REINDEXED} and row.error_count == 0
    _wait_idle(fresh)
    _screenshot(fresh, "jobs.png")
