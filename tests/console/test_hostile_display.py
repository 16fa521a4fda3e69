"""Nothing remote from content, under AppTest: a document whose title, keywords, summary,
section names, headings and body carry images (and backticks and `]` that would break out of code spans and
badges), looked up through hostile `?q=` links, inspected, previewed for upload and listed with the tool calls.

AppTest sees the Markdown source each element hands the browser: no source may contain `![` (the only way to
start an image), and the hostile values show up escaped exactly where they should. That Chromium then loads
nothing and runs no script is tests/browser/test_browser_safety.py."""

from __future__ import annotations

import pytest
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest
from support.console import APP, look_up
from support.documents import write_doc
from support.hostile import (
    HOSTILE_KEYWORD,
    HOSTILE_PATH,
    hostile_document,
    hostile_fields,
    hostile_queries,
    outside_code,
)

from pages.shell.safe import IMAGE_PLACEHOLDER, escape_markdown, inline_code

BEACON = "http://127.0.0.1:9"  # never contacted here: AppTest renders nothing
FIELDS = hostile_fields(BEACON)
QUERY, NOTHING = hostile_queries(BEACON)
BACKTICK_KEYWORD = FIELDS["keywords"][1]
SECTION = next(iter(FIELDS["sections"]))

# Elements whose text Streamlit shows as typed (no Markdown): their values may hold `![` verbatim. Their labels
# and help texts are Markdown and are checked all the same.
LITERAL_FIELDS = {
    "code": {"code_text"}, "json": {"body"}, "text": {"body"}, "text_input": {"value", "default", "placeholder"},
    "text_area": {"value", "default", "placeholder"}, "selectbox": {"options", "default", "raw_value"},
    "multiselect": {"options", "default", "raw_values"},
}


def _strings(message: Message, skip: set[str]):
    for field, value in message.ListFields():
        if field.name in skip:
            continue
        values = list(value) if hasattr(value, "__iter__") and not isinstance(value, (str, bytes)) else [value]
        for item in values:
            if isinstance(item, Message):
                yield from _strings(item, set())
            elif isinstance(item, str):
                yield item


def markdown_sources(at: AppTest) -> list[tuple[str, str]]:
    """(element type, text) for every piece of Markdown the current page hands the browser."""
    found = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        kind = getattr(node, "type", "")
        if isinstance(proto, Message) and kind not in ("dataframe", "arrow_data_frame", "table"):
            found.extend((kind, s) for s in _strings(proto, LITERAL_FIELDS.get(kind, set())))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    for table in at.table:  # st.table renders each cell (and header) as Markdown
        frame = table.value
        found += [("table", str(c)) for c in frame.columns]
        found += [("table", str(v)) for v in frame.astype(str).to_numpy().ravel()]
    return found


def assert_no_image(at: AppTest) -> list[tuple[str, str]]:
    """No element's Markdown starts an image (`![` outside code spans, not escaped)."""
    assert not at.exception, at.exception
    sources = markdown_sources(at)
    images = [(kind, text) for kind, text in sources if "![" in outside_code(text)]
    assert images == [], images
    return sources


@pytest.fixture
def hostile(synced_sample):
    from kb_core import load_settings, open_knowledge_base

    write_doc(synced_sample, HOSTILE_PATH, hostile_document(BEACON))
    kb = open_knowledge_base(load_settings())
    kb.documents.reconcile()
    assert kb.documents.entry(HOSTILE_PATH) is not None
    kb.close()
    return synced_sample


def _linked(query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["q"] = query
    at.run()
    return at


def test_the_playground_shows_a_hostile_document_and_query_as_text(hostile):
    at = _linked(QUERY)
    sources = assert_no_image(at)
    text = "\n".join(s for _, s in sources)
    assert f'"source": "{HOSTILE_PATH}"' in at.code[0].value  # the `?q=` link ran and found it
    assert IMAGE_PLACEHOLDER + f"[body]({BEACON}/body.png)" in text  # the body's images: placeholder and link
    assert IMAGE_PLACEHOLDER + "[reference][logo]" in text
    # the L0 line: title escaped, the backtick keyword in a code span of its own, the matched one as a chip
    assert escape_markdown(FIELDS["title"]) in text
    assert inline_code(BACKTICK_KEYWORD) in text and f":orange-background[**{HOSTILE_KEYWORD}**]" in text
    assert [m.value for m in at.markdown if m.value.startswith("`")][-1] == inline_code(QUERY)  # recent queries
    chips = {b.label: b for b in at.button if str(b.key).startswith("chip-") and b.key != "chip-whole"}
    assert list(chips) == [escape_markdown(SECTION)]

    chips[escape_markdown(SECTION)].click().run()  # the section chip asks again with that section
    assert_no_image(at)
    assert at.text_input(key="section_title").value == SECTION
    assert ":violet-badge[section: Setup]" in "\n".join(m.value for m in at.markdown)  # the heading it names

    at.query_params.clear()  # a second shared link of its own (no section): no keyword, at most an L1 passage
    at.query_params["q"] = NOTHING
    at.run()
    assert_no_image(at)
    assert '"primary": null' in at.code[0].value
    recent = [m.value for m in at.markdown if m.value.startswith("`")]
    assert recent[:2] == [inline_code(NOTHING), f"{inline_code(QUERY)} · section {inline_code(SECTION)}"]

    look_up(at, NOTHING)  # a link's run is a replay, never needing attention; typed, it is a question of its own
    assert_no_image(at)
    at.switch_page("../../pages/tool_calls.py").run()
    assert_no_image(at)
    assert NOTHING in at.selectbox(key="attention_query").options  # plain options: shown as typed
    at.selectbox(key="attention_query").set_value(NOTHING).run()  # its fix: L1's document, the query as a keyword
    assert_no_image(at)
    assert next(t for t in at.text_input if t.label == "Add as a keyword").value == NOTHING.strip()


def test_the_inspector_and_the_keyword_map_show_a_hostile_document_as_text(hostile):
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("../../pages/documents.py").run()
    frame = next(f for f in at.dataframe if "file" in f.value.columns)
    at.session_state[frame.key] = {"selection": {"rows": [list(frame.value["file"]).index(HOSTILE_PATH)],
                                                 "columns": [], "cells": []}}
    at.run()
    sources = assert_no_image(at)
    assert escape_markdown(FIELDS["title"]) in [h.value for h in at.subheader]
    fields = at.table[0].value.set_index("field")["value"].to_dict()
    assert fields["summary"] == escape_markdown(FIELDS["summary"])
    assert escape_markdown(", ".join(FIELDS["keywords"])) == fields["keywords"]
    labels = [e.label for e in at.expander]
    assert any(escape_markdown(f"![heading]({BEACON}/heading.png) Details") in label for label in labels), labels
    content = next(s for kind, s in sources if kind == "markdown" and "# Hostile" in s)
    # raw HTML is left to Streamlit, which shows it as text (tests/browser/test_browser_safety)
    assert "<script>" in content
    assert next(t for t in at.text_input if t.label == "Title").value == FIELDS["title"]  # the Edit tab, as typed
    next(t for t in at.text_input if t.label == "Title").set_value(FIELDS["title"] + " ![again](x.png)")
    next(b for b in at.button if b.label == "Preview changes").click().run()
    assert_no_image(at)  # the diff is code, the upload preview escaped
    assert any("![again](x.png)" in c.value for c in at.code if c.language == "diff")

    at.session_state["documents_tab"] = "Keyword map"
    at.run()
    at.radio(key="kw_filter").set_value("All keywords").run()
    frame = next(f for f in at.dataframe if "keyword" in f.value.columns)
    row = [k.casefold() for k in frame.value["keyword"]].index(BACKTICK_KEYWORD.casefold())
    at.session_state[frame.key] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert_no_image(at)
    assert any(BEACON in h.value and "\\`" in h.value for h in at.subheader)
    next(t for t in at.text_input if t.label == "New keyword").set_value(f"![renamed]({BEACON}/renamed.png)")
    at.button(key="kw-bulk-preview").click().run()  # a plan naming the hostile keyword and its new spelling
    assert_no_image(at)
    assert any("rename" in m.value and BEACON in m.value for m in at.markdown)


def test_the_upload_preview_shows_a_hostile_file_as_text(app_root):
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("../../pages/upload.py").run()
    at.selectbox(key="category").set_value("➕ New category…").run()
    at.text_input(key="new_category").set_value("api")
    name = "![u](beacon.png)`x`.md"  # image syntax in a file name (`:` in a name is refused by the name rule)
    at.file_uploader(key="files").set_value([(name, hostile_document(BEACON).encode(), "text/markdown")]).run()
    sources = assert_no_image(at)
    assert any(escape_markdown(name) in e.label for e in at.expander), [e.label for e in at.expander]
    text = "\n".join(s for _, s in sources)
    assert escape_markdown(FIELDS["title"]) in text and inline_code(BACKTICK_KEYWORD) in text
