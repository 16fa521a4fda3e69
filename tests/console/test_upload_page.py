"""The upload page with whole batches: nothing is lost, nothing replaced without a tick."""

from __future__ import annotations

import hashlib

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from support.console import finish_jobs, run_page, stores
from support.console import upload_button as _upload_button
from support.console import upload_files as _files
from support.documents import doc
from support.stores import assert_consistent

LICENCE = ("<!--\n  Licensed to the Apache Software Foundation (ASF) under one or more contributor license "
           "agreements.\n-->\n")


def product_doc(title: str, keywords: list[str], summary: str, paragraphs: int = 6, lang: str = "en") -> str:
    line = ("The gateway forwards the request to the upstream and applies the plugin chain in priority order. "
            if lang == "en" else "网关会把请求转发到上游，并按照优先级依次执行插件链。")
    body = "\n\n".join(f"## {'Section' if lang == 'en' else '章节'} {i}\n\n{line * 3}" for i in range(paragraphs))
    return doc(title, keywords, summary, f"{LICENCE}\n# {title}\n\n{body}\n")


ROUTE_EN = product_doc("Route", ["Route", "APISIX", "API Gateway"], "Match requests and send them upstream.")
ROUTE_ZH = product_doc("路由", ["路由", "APISIX", "API 网关"], "匹配请求并转发到上游。", lang="zh")


def _result_shown(at: AppTest) -> bool:
    """The batch's own result (above the jobs panel, which keeps showing the latest upload job)."""
    return any(h.value == "Result" for h in at.subheader)


def _upload(at: AppTest, button=None) -> AppTest:
    """Press Upload: the batch goes to a job on the server; the result shows once it has ended."""
    (button or _upload_button(at)).click().run()
    assert not at.exception, at.exception
    return finish_jobs(at)


def _choose(at: AppTest, category: str) -> None:
    box = at.selectbox(key="category")
    if category in box.options:
        box.set_value(category)
    else:
        box.set_value("➕ New category…").run()
        at.text_input(key="new_category").set_value(category)


def _renames(at: AppTest):
    return [t for t in at.text_input if (t.key or "").startswith("rename-")]


def test_two_files_aimed_at_one_path_are_refused_until_one_is_renamed(app_root):  # noqa: F811
    at = run_page("upload")
    _choose(at, "gateway")
    at.file_uploader(key="files").set_value(_files(("route.md", ROUTE_EN), ("route.md", ROUTE_ZH))).run()
    assert not at.exception, at.exception
    clash = [e.value for e in at.error if "aimed at the same path" in e.value]
    assert len(clash) == 2  # in each file's preview; they are not "refused": a new name resolves it
    assert any(c.value == "2 need a new name" for c in at.caption)
    assert _upload_button(at).label == "Upload" and _upload_button(at).disabled
    assert any("nothing is written until then" in w.value for w in at.warning)
    assert not (app_root / "knowledge_base/gateway").exists()

    renames = _renames(at)
    assert len(renames) == 2
    renames[1].set_value("route-zh.md").run()
    assert not any("aimed at the same path" in e.value for e in at.error)
    assert len(_renames(at)) == 1  # the renamed file keeps its input (and its new name)
    _upload(at)
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["result"]) == ["indexed", "indexed"]
    assert (app_root / "knowledge_base/gateway/route.md").read_text(encoding="utf-8") == ROUTE_EN
    assert (app_root / "knowledge_base/gateway/route-zh.md").read_text(encoding="utf-8") == ROUTE_ZH
    with stores() as kb:
        assert_consistent(kb)


def test_replacing_needs_a_tick_per_file(synced_sample):  # noqa: F811
    target = synced_sample / "knowledge_base/troubleshooting/timeout.md"
    before = target.read_bytes()
    new_version = doc("Timeout v2", ["SocketTimeoutException"], "Read timeouts, revised.")
    at = run_page("upload")
    at.selectbox(key="category").set_value("troubleshooting")
    at.file_uploader(key="files").set_value(_files(("timeout.md", new_version),
                                                   ("retries.md", doc("Retries", ["RetryPolicy"])))).run()
    sha = hashlib.sha256(before).hexdigest()
    [tick] = at.checkbox
    assert tick.label == f"Replace knowledge_base/troubleshooting/timeout.md (version {sha[:12]})"
    assert _upload_button(at).label == "Upload 1 file(s)"
    _upload(at)
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows == {"retries.md": "indexed", "timeout.md": "not replaced"}
    assert target.read_bytes() == before

    at.checkbox[0].check().run()
    _upload(at)
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows == {"timeout.md": "replaced", "retries.md": "skipped"}  # identical to the indexed version
    [why] = [r["detail"] for r in at.dataframe[0].value.to_dict("records") if r["file"] == "retries.md"]
    assert why == "identical to the indexed version of knowledge_base/troubleshooting/retries.md: nothing to do"
    assert _upload_button(at).label == "Nothing to upload"
    assert target.read_text(encoding="utf-8") == new_version
    with stores() as kb:
        assert_consistent(kb)


def test_a_version_written_after_the_preview_is_not_overwritten(synced_sample):  # noqa: F811
    target = synced_sample / "knowledge_base/troubleshooting/timeout.md"
    mine = doc("Timeout (my edit)", ["SocketTimeoutException"], "My revision.")
    theirs = doc("Timeout (colleague)", ["SocketTimeoutException", "ReadTimeout"], "Their revision.")
    at = run_page("upload")
    at.selectbox(key="category").set_value("troubleshooting")
    at.file_uploader(key="files").set_value(_files(("timeout.md", mine), ("new-one.md", doc("New", ["NEW_ONE"]))))
    at.run()
    at.checkbox[0].check().run()  # the curator ticks "Replace" on the version the preview shows
    with stores() as colleague:  # ... and a colleague (another process) replaces it meanwhile
        colleague.documents.upload("timeout.md", theirs.encode(), "troubleshooting")
    _upload(at)
    assert not at.exception, at.exception
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows == {"timeout.md": "conflict", "new-one.md": "indexed"}  # the others go on
    [conflict] = [e.value for e in at.error if "timeout.md" in e.value]
    assert "changed since the version you based this upload on" in conflict and "nothing was written" in conflict
    assert target.read_text(encoding="utf-8") == theirs
    with stores() as kb:
        assert_consistent(kb)
        [row] = [r for r in kb.documents.list() if r.file_path.endswith("troubleshooting/timeout.md")]
        assert row.content_sha256 == hashlib.sha256(theirs.encode()).hexdigest()


def test_one_category_check_with_a_suggested_slug_and_no_preselected_category(app_root):  # noqa: F811
    at = run_page("upload")
    assert at.selectbox(key="category").value is None  # nothing chosen for the curator
    files = [(f"plugin-{i}.md", doc(f"Plugin {i}", [f"plugin_{i}"])) for i in range(7)]
    at.file_uploader(key="files").set_value(_files(*files)).run()
    assert [e.value for e in at.error] == ["choose a category (or create one) for these files"]
    assert _upload_button(at).disabled

    at.selectbox(key="category").set_value("➕ New category…").run()
    at.file_uploader(key="files").set_value([])
    at.text_input(key="new_category").set_value("Gateway Plugins").run()
    assert "did you mean 'gateway-plugins'?" in at.error[0].value  # checked as typed, before any file
    at.file_uploader(key="files").set_value(_files(*files)).run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "did you mean 'gateway-plugins'?" in errors[0]  # once, not 7 times
    next(b for b in at.button if b.label == "Use “gateway-plugins”").click().run()
    assert at.text_input(key="new_category").value == "gateway-plugins"
    assert not at.error
    _upload(at)
    assert list(at.dataframe[0].value["result"]) == ["indexed"] * 7
    assert len(list((app_root / "knowledge_base/gateway-plugins").glob("*.md"))) == 7

    at.text_input(key="new_category").set_value("plugins").run()  # another category: the old result goes
    assert not _result_shown(at) and not at.exception
    assert "7 file(s): 7 indexed" in at.success[0].value  # the jobs panel still says how the last upload ended
    at.text_input(key="new_category").set_value("gateway-plugins").run()
    assert _result_shown(at)
    at.file_uploader(key="files").set_value(_files(*files[:3])).run()  # other files: it goes too
    assert not _result_shown(at)


def test_markdown_extension_is_accepted_and_stored_as_md(app_root):  # noqa: F811
    at = run_page("upload")
    at.selectbox(key="category").set_value("api")
    at.file_uploader(key="files").set_value(_files(("consumer.markdown", doc("Consumer", ["ConsumerAPI"])))).run()
    assert not at.error
    assert "consumer.markdown → knowledge_base/api/consumer.md" in at.expander[0].label
    _upload(at)
    assert list(at.dataframe[0].value["result"]) == ["indexed"]
    assert (app_root / "knowledge_base/api/consumer.md").is_file()


def test_refused_files_are_listed_with_their_reasons(app_root, monkeypatch):  # noqa: F811
    monkeypatch.setenv("KB_MAX_UPLOAD_BYTES", "2048")
    at = run_page("upload")
    assert "2,048 bytes" in " ".join(c.value for c in at.caption)  # the stated limit is the real one
    assert at.file_uploader(key="files").proto.max_upload_size_mb == 1
    at.selectbox(key="category").set_value("api")
    at.file_uploader(key="files").set_value(_files(("logo.md", b"\x89PNG\r\n\x1a\n\x00\x00"),
                                                   ("huge.md", "x" * 4096), ("empty.md", "  \n"))).run()
    refused = [e.value for e in at.error if not e.value.startswith(("logo.md looks", "huge.md is", "empty.md is"))]
    assert refused == ["logo.md: logo.md looks binary (it contains NUL bytes), not Markdown text",
                       "huge.md: huge.md is 4,096 bytes; the limit is 2,048 (KB_MAX_UPLOAD_BYTES)",
                       "empty.md: empty.md is empty"]
    assert any(m.value.startswith("**Refused (3)**") for m in at.markdown)
    button = _upload_button(at)
    assert button.label == "Nothing to upload" and button.disabled


def test_a_file_placed_by_hand_but_not_indexed_is_indexed_without_a_tick(app_root):  # noqa: F811
    text = doc("Upstream health checks", ["HealthCheck", "Upstream"], "Active and passive checks.")
    (app_root / "knowledge_base/api").mkdir(parents=True)
    (app_root / "knowledge_base/api/health.md").write_text(text, encoding="utf-8")
    at = run_page("upload")
    at.selectbox(key="category").set_value("api")
    at.file_uploader(key="files").set_value(_files(("health.md", text))).run()
    assert any("is on disk but not indexed" in i.value for i in at.info) and not at.checkbox
    _upload(at)
    assert list(at.dataframe[0].value["result"]) == ["indexed"]
    with stores() as kb:
        assert_consistent(kb)


def test_identical_content_in_another_category_is_flagged_as_a_duplicate(synced_sample):  # noqa: F811
    data = (synced_sample / "knowledge_base/api/payment-errors.md").read_bytes()
    at = run_page("upload")
    at.selectbox(key="category").set_value("troubleshooting")
    at.file_uploader(key="files").set_value([("payment-errors.md", data, "text/markdown")]).run()
    assert any(w.value.startswith("duplicate of knowledge_base/api/payment-errors.md") for w in at.warning)


def _in_order(at: AppTest) -> list[str]:
    """The main area's elements as a reader meets them, top to bottom: "type: text" (a button by its label, an
    expander by its label, a message by its text)."""
    found = []
    for node in at.main:
        text = getattr(node, "label", None) if node.type in ("button", "expander", "checkbox", "metric") else \
            getattr(node, "value", None)
        if isinstance(text, str):
            found.append(f"{node.type}: {text}")
    return found


def _first(order: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(order) if line.startswith(prefix))


def test_duplicates_are_skipped_unless_ticked_problems_first_and_warnings_grouped(synced_sample):  # noqa: F811
    indexed = (synced_sample / "knowledge_base/api/payment-errors.md").read_bytes()
    plugins = [(f"plugin-{i}.md", doc(f"Plugin {i}", ["GatewayPlugin", f"plugin_{i}"])) for i in range(6)]
    batch = _files(("payment-copy.md", indexed),  # the content of an indexed document
                   *plugins, ("plugin-0-again.md", plugins[0][1]),  # twice in one batch
                   ("logo.md", b"\x89PNG\r\n\x1a\n\x00\x00"))  # refused
    at = run_page("upload")
    at.selectbox(key="category").set_value("troubleshooting")
    at.file_uploader(key="files").set_value(batch).run()
    assert not at.exception, at.exception
    assert any(c.value == "2 duplicate: skipped · 6 new · 1 refused" for c in at.caption)
    order = _in_order(at)
    # problems first, then the box and the button, then the skipped files, the grouped keywords, the panels
    assert _first(order, "markdown: **Refused (1)**") < _first(order, "checkbox: Upload duplicates anyway") \
        < _first(order, "button: Upload 6 file(s)") < _first(order, "expander: Skipped (2)") \
        < _first(order, "markdown: **L0 will be ambiguous for 1 keyword(s)**") \
        < _first(order, "expander: ✅ plugin-0.md")
    skipped = next(e for e in at.expander if e.label.startswith("Skipped (2)"))
    reasons = [m.value for m in skipped.markdown]
    assert reasons[0].startswith("⏭️ payment-copy.md — duplicate of knowledge_base/api/payment-errors.md: ")
    assert reasons[1].startswith("⏭️ plugin-0-again.md — duplicate of plugin-0.md (this batch): ")
    # one line per keyword with its count, the documents behind an expander; no box per keyword per file
    [group] = [e for e in at.expander if e.label.startswith("⚠️ ")]
    assert group.label == "⚠️ GatewayPlugin — 6 documents (6 of this batch)"
    assert not any("L0 will be ambiguous" in w.value for w in at.warning)

    _upload(at)
    order = _in_order(at)
    assert order.index("subheader: Result") < _first(order, "subheader: Preview")  # the summary on top
    assert [m.value for m in at.main.metric] == ["6", "2", "1"]  # indexed, skipped, failed
    assert [m.label for m in at.main.metric] == ["Indexed", "Skipped", "Failed"]
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows == {**{name: "indexed" for name, _b in plugins}, "payment-copy.md": "skipped",
                    "plugin-0-again.md": "skipped", "logo.md": "refused"}
    assert not (synced_sample / "knowledge_base/troubleshooting/payment-copy.md").exists()

    at.checkbox(key="upload_duplicates").check().run()  # the duplicates anyway: now they are new files
    assert _upload_button(at).label == "Upload 2 file(s)"
    _upload(at)
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows["payment-copy.md"] == rows["plugin-0-again.md"] == "indexed"
    assert (synced_sample / "knowledge_base/troubleshooting/payment-copy.md").read_bytes() == indexed
    with stores() as kb:
        assert_consistent(kb)


def _docs_tree() -> list[tuple[str, bytes, str]]:
    """A folder as a browser's directory upload delivers it: each file named by its path in the chosen folder,
    the folder's own name first (`webkitRelativePath`, which Streamlit passes on as `UploadedFile.name`)."""
    start_en = product_doc("Getting started", ["getting started", "install"], "Install and run the gateway.")
    start_zh = product_doc("快速入门", ["快速入门", "安装"], "安装并运行网关。", lang="zh")
    limit_en = product_doc("limit-req", ["limit-req", "leaky bucket"], "Rate limiting with a leaky bucket.")
    limit_zh = product_doc("limit-req 插件", ["limit-req 插件", "漏桶"], "使用漏桶算法限制请求速率。", lang="zh")
    return _files(("docs/en/latest/getting-started.md", start_en),
                  ("docs/en/latest/plugins/limit-req.md", limit_en),
                  ("docs/zh/latest/getting-started.md", start_zh),
                  ("docs/zh/latest/plugins/limit-req.md", limit_zh),
                  ("docs/zh/latest/my plugins/draft.md", doc("Draft", ["draft-plugin"])),  # refused: a space
                  ("docs/assets/images/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00"),  # not Markdown: skipped
                  ("docs/.vitepress/config.md", "# site config\n"))  # hidden folder: skipped, as the scan does


def test_a_folder_lands_under_the_category_with_its_sub_folders(app_root):  # noqa: F811
    tree = _docs_tree()
    at = run_page("upload")
    _choose(at, "apisix")
    at.segmented_control(key="upload_kind").set_value("A folder").run()
    uploader = at.file_uploader(key="folder")
    assert uploader.accept_directory and uploader.allowed_type == []  # other files arrive, to be counted
    uploader.set_value(tree).run()
    assert not at.exception, at.exception
    skipped = " ".join(c.value for c in at.caption if c.value.startswith("Skipped"))
    assert "1 non-Markdown file(s): docs/assets/images/logo.png" in skipped
    assert "1 hidden file(s): docs/.vitepress/config.md" in skipped
    assert any(c.value == "4 new · 1 refused" for c in at.caption)
    labels = [e.label for e in at.expander]
    for lang in ("en", "zh"):  # the same name in two folders: two documents, no clash
        page = f"docs/{lang}/latest/plugins/limit-req.md"
        assert f"✅ {page} → knowledge_base/apisix/{page}" in labels
    assert len(labels) == 4  # the refused file is listed once, under "Refused", not in an expander too
    refused = [e.value for e in at.error if "draft.md" in e.value]
    assert len(refused) == 1 and refused[0].startswith("docs/zh/latest/my plugins/draft.md: invalid category")
    assert "the folder name 'my plugins' is not allowed" in refused[0]
    assert _upload_button(at).label == "Upload 4 file(s)"

    _upload(at)
    assert not at.exception, at.exception
    rows = {r["file"]: (r["result"], r["document"]) for r in at.dataframe[0].value.to_dict("records")}
    assert rows["docs/zh/latest/getting-started.md"] == ("indexed",
                                                         "knowledge_base/apisix/docs/zh/latest/getting-started.md")
    assert [r for r, _d in rows.values()] == ["indexed"] * 4 + ["refused"]
    base = app_root / "knowledge_base/apisix"
    assert sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()) == [
        "docs/en/latest/getting-started.md", "docs/en/latest/plugins/limit-req.md",
        "docs/zh/latest/getting-started.md", "docs/zh/latest/plugins/limit-req.md"]
    with stores() as kb:
        assert_consistent(kb)
        assert {r.category for r in kb.documents.list()} == {"apisix/docs/en/latest", "apisix/docs/en/latest/plugins",
                                                        "apisix/docs/zh/latest", "apisix/docs/zh/latest/plugins"}
    assert _upload_button(at).label == "Nothing to upload"  # the same folder again: every file is identical

    # the folder again with one page revised: a replace, at its nested path, needs its tick
    revised = product_doc("limit-req", ["limit-req", "leaky bucket", "burst"], "Rate limiting, revised.")
    tree[1] = ("docs/en/latest/plugins/limit-req.md", revised.encode(), "text/markdown")
    at.file_uploader(key="folder").set_value(tree).run()
    [tick] = [c for c in at.checkbox if c.label.startswith("Replace")]
    assert tick.label.startswith("Replace knowledge_base/apisix/docs/en/latest/plugins/limit-req.md (version ")
    tick.check().run()
    _upload(at)
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows == {"docs/en/latest/plugins/limit-req.md": "replaced", "docs/zh/latest/my plugins/draft.md": "refused",
                    **{f"docs/{lang}/latest/{page}": "skipped" for lang, page in (
                        ("en", "getting-started.md"), ("zh", "getting-started.md"), ("zh", "plugins/limit-req.md"))}}
    assert (base / "docs/en/latest/plugins/limit-req.md").read_text(encoding="utf-8") == revised


def _mixed_batch() -> tuple[list[tuple[str, bytes, str]], bytes]:
    """50 files as a curator drags them in from two source folders (en/ and zh/)."""
    generic = ["APISIX", "API Gateway", "Plugin", "AI", "CLI"]
    items: list[tuple[str, str | bytes]] = []
    for i in range(22):
        items.append((f"plugin-{i:02d}.md", product_doc(f"Plugin {i:02d}", [f"plugin-{i:02d}", *generic[:3]],
                                                       f"What plugin {i:02d} does and how to configure it.")))
        items.append((f"插件-{i:02d}.md", product_doc(f"插件 {i:02d}", [f"插件-{i:02d}", "APISIX", "API 网关"],
                                                     f"插件 {i:02d} 的作用与配置。", lang="zh")))
    items.append(("route.md", ROUTE_EN))  # en/route.md
    items.append(("route.md", ROUTE_ZH))  # zh/route.md
    already = product_doc("Limit requests", ["limit-req", "APISIX"], "Leaky bucket rate limiting.")
    items.append(("limit-req-copy.md", already))  # identical to a document indexed before
    items.append(("broken-yaml.md", "---\ntitle: [unclosed\nkeywords: APISIX\n---\n\n# Broken\n\nbody\n"))
    items.append(("binary.md", b"\x00\x01\x02 not text"))
    items.append(("cli.md", product_doc("CLI", ["CLI", "AI"], "The command line.")))  # only weak keywords
    return _files(*items), already.encode()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_mixed_batch_of_fifty_files_loses_none(app_root):  # noqa: F811
    files, already = _mixed_batch()
    assert len(files) == 50
    with stores() as kb:
        kb.documents.upload("limit-req.md", already, "gateway")
    at = run_page("upload")
    _choose(at, "docs")
    at.file_uploader(key="files").set_value(files).run()
    assert not at.exception, at.exception
    assert _upload_button(at).disabled  # the two route.md first
    warnings = " | ".join(w.value for w in at.warning)
    assert "duplicate of knowledge_base/gateway/limit-req.md" in warnings
    assert "L0 will be ambiguous for" not in warnings  # grouped per keyword instead, within the batch too
    [apisix] = [e for e in at.expander if e.label.startswith("⚠️ APISIX — ")]
    assert "knowledge_base/docs/插件-00.md" in apisix.markdown[0].value
    _renames(at)[1].set_value("route-zh.md").run()
    button = _upload_button(at)
    assert button.label == "Upload 48 file(s)" and not button.disabled  # the copy is skipped
    _upload(at, button)
    assert not at.exception, at.exception
    results = at.dataframe[0].value.to_dict("records")
    by_result: dict[str, list[str]] = {}
    for row in results:
        by_result.setdefault(row["result"], []).append(row["file"])
    assert by_result.pop("refused") == ["binary.md"]
    assert by_result.pop("skipped") == ["limit-req-copy.md"]
    assert by_result == {"indexed": [f[0] for f in files if f[0] not in ("binary.md", "limit-req-copy.md")]}
    with stores() as kb:
        assert_consistent(kb)
        stored = {r.file_path for r in kb.documents.list()}
        expected = {f"knowledge_base/docs/{name}" for name, _d, _m in files
                    if name not in ("binary.md", "route.md", "limit-req-copy.md")}
        assert stored == expected | {"knowledge_base/docs/route.md", "knowledge_base/docs/route-zh.md",
                                     "knowledge_base/gateway/limit-req.md"}
        kept = [(name, data) for name, data, _m in files if name not in ("binary.md", "route.md", "limit-req-copy.md")]
        assert {name: (app_root / "knowledge_base/docs" / name).read_bytes() for name, _d in kept} == dict(kept)
        assert kb.lookup_knowledge("plugin-07")["primary"]["source"] == "knowledge_base/docs/plugin-07.md"
        assert kb.lookup_knowledge("路由")["primary"]["source"] == "knowledge_base/docs/route-zh.md"


@pytest.mark.parametrize(("limit", "widget_mb", "warned"),
                         [(5 * 1024 * 1024, 5, False), (300 * 1024 * 1024, None, True)])
def test_the_uploader_states_the_setting_and_warns_when_the_server_allows_less(app_root, monkeypatch,  # noqa: F811
                                                                                limit, widget_mb, warned):
    monkeypatch.setenv("KB_MAX_UPLOAD_BYTES", str(limit))
    at = run_page("upload")
    uploader_mb = at.file_uploader(key="files").proto.max_upload_size_mb
    assert uploader_mb == (widget_mb or st.get_option("server.maxUploadSize"))
    assert any("raise server.maxUploadSize" in w.value for w in at.warning) is warned


def test_a_folder_into_a_category_of_its_own_name_is_not_named_twice(app_root):  # noqa: F811
    """An "apisix" folder uploaded into the category apisix went to apisix/apisix/...: the box that keeps the
    folder's own name starts unticked then (and ticked for another category)."""
    tree = [("apisix/docs/en/route.md", product_doc("Route", ["route"], "Routes match requests.").encode(),
             "text/markdown")]
    at = run_page("upload")
    _choose(at, "apisix")
    at.segmented_control(key="upload_kind").set_value("A folder").run()
    at.file_uploader(key="folder").set_value(tree).run()
    assert not at.exception, at.exception
    assert at.checkbox(key="keep_top").value is False
    assert "✅ apisix/docs/en/route.md → knowledge_base/apisix/docs/en/route.md" in [e.label for e in at.expander]
    _choose(at, "gateway")
    at.run()
    assert at.checkbox(key="keep_top").value is True
    assert "✅ apisix/docs/en/route.md → knowledge_base/gateway/apisix/docs/en/route.md" in [
        e.label for e in at.expander]
