"""Small rendering helpers shared by the console pages (no kb_core calls of their own: `save_and_flash` runs the one
its caller hands it)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import streamlit as st

from kb_core import KnowledgeBaseError
from pages.shell.safe import escape_markdown, inline_code

SHOW = {"error": st.error, "warning": st.warning, "info": st.info, "success": st.success}  # by severity


def render_preview(file_name: str, preview, *, expanded: bool = True) -> None:
    """An upload preview as the Upload page shows it: target path, title, summary, keywords and the lint."""
    icon = "❌" if not preview.can_upload else ("⚠️" if preview.findings else "✅")
    with st.expander(f"{icon} {escape_markdown(file_name)} → {escape_markdown(preview.file_path or 'not accepted')}",
                     expanded=expanded):
        render_frontmatter(preview.frontmatter)
        for finding in preview.findings:
            SHOW[finding.severity](escape_markdown(finding.message))


def render_frontmatter(fm) -> None:
    """A previewed file's title, summary and keywords, each shown as the text it is."""
    if fm is None:
        return
    st.markdown(f"**{escape_markdown(fm.title or '(no title)')}**  \n{escape_markdown(fm.summary or '(no summary)')}")
    st.markdown("Keywords: " + (" ".join(inline_code(k) for k in fm.keywords) or "(none)"))


def playground_link(query: str) -> str:
    """A link that opens the playground (the default page) and runs `query` there: a LinkColumn's value."""
    from urllib.parse import quote

    return f"./?q={quote(query)}"


def table_key(prefix: str, items: Iterable[object]) -> str:
    """A widget key that changes with the rows shown: a row selection never points at a row that moved."""
    digest = hashlib.sha1("\x1f".join(map(str, items)).encode("utf-8")).hexdigest()[:10]
    return f"{prefix}-{digest}"


def selected_row(event) -> int | None:
    """The selected row of a single-row `st.dataframe` selection event, or None."""
    rows = event.selection.rows if event is not None else []
    return rows[0] if rows else None


# A table whose click anywhere on a row picks it: the row's checkbox selects the row, a click on any cell
# selects that cell (and so its row). Give it to `st.dataframe(..., on_select="rerun")`.
ROW_OR_CELL = ["single-row", "single-cell"]


def clicked_row(event, key: str) -> int | None:
    """The row a `ROW_OR_CELL` table's selection points at: the selected row, or the row of the selected cell.
    When both are set and point at different rows, the one that changed last wins (remembered under `key`)."""
    selection = event.selection if event is not None else None
    rows = tuple(int(r) for r in selection.rows) if selection is not None else ()
    cells = tuple(int(c[0]) for c in selection.cells) if selection is not None else ()
    state = st.session_state
    before_rows, before_cells, before = state.get(f"_clicked-{key}", ((), (), None))
    if cells and cells != before_cells:
        row = cells[0]
    elif rows and rows != before_rows:
        row = rows[0]
    elif before is not None and (before in rows or before in cells):
        row = before
    else:
        row = rows[0] if rows else (cells[0] if cells else None)
    state[f"_clicked-{key}"] = (rows, cells, row)
    return row


def field_value(value: Any) -> str:
    """A frontmatter value as one readable cell: lists joined, mappings as compact JSON, never `{...}`."""
    if value is None:
        return "—"
    if isinstance(value, list) and all(not isinstance(v, (list, dict)) for v in value):
        return ", ".join(str(v) for v in value) or "—"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value) or "—"


def show_flash(slot: str) -> None:
    """Show and drop the message a callback left for this place on the page (where the user is looking)."""
    flash = st.session_state.pop(f"flash-{slot}", None)
    if flash:
        kind, message = flash
        SHOW[kind](escape_markdown(message))  # messages name files, keywords and errors: shown as text


def flash(slot: str, kind: str, message: str) -> None:
    st.session_state[f"flash-{slot}"] = (kind, message)


T = TypeVar("T")


def save_and_flash(slot: str, action: Callable[[], T], message: Callable[[T], str], *,
                   kind: str = "success") -> T | None:
    """A button callback's write and what it says: run `action` (a kb_core call); a KnowledgeBaseError is flashed
    into `slot` as the error it is and None returned; otherwise `message(result)` is flashed as `kind` and the
    result returned. `show_flash(slot)` shows it where the user is looking."""
    try:
        result = action()
    except KnowledgeBaseError as exc:
        flash(slot, "error", str(exc))
        return None
    flash(slot, kind, message(result))
    return result
