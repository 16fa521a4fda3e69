"""The console's single wiring point: the only place that opens the knowledge base and caches it."""

from __future__ import annotations

import contextlib
import contextvars
import runpy
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, open_knowledge_base
from kb_core.console import counted_warnings_on_stderr
from pages.shell.auth import console_access
from pages.shell.safe import escape_markdown

APP_PY = Path(__file__).resolve().parents[2] / "app.py"
_app_py_runs_this = contextvars.ContextVar("app_py_runs_this", default=False)


_OPENING = ("Opening the knowledge base: reading the keyword index from the folder, checking the database and "
            "starting Milvus. This happens once per server; later pages open at once.")
_opened: list[bool] = []  # non-empty once this process has opened it (the first open takes seconds)


def _close(kb: KnowledgeBase) -> None:
    """Whoever clears the resource cache (AppTest runs, a server reloading its settings) closes what it held:
    its Milvus Lite server, its follower and job threads would otherwise outlive it."""
    kb.close()


@st.cache_resource(show_spinner="Opening the knowledge base…", on_release=_close)
def _open_knowledge_base() -> KnowledgeBase:
    counted_warnings_on_stderr()  # the server's terminal: a flood of one warning is counted, not repeated
    kb = open_knowledge_base()
    _opened.append(True)
    # The console will show the summaries (document list, files gone, status) on its first pages: compute them
    # in the background now rather than in a curator's first click (about a second at 10,000 documents).
    threading.Thread(target=kb.warm_summaries, name="kb-warm-summaries", daemon=True).start()
    return kb


@contextlib.contextmanager
def run_by_app_py() -> Iterator[None]:
    """app.py runs its page inside this block, so `hand_over_to_app_py()` can tell app.py started the page."""
    token = _app_py_runs_this.set(True)
    try:
        yield
    finally:
        _app_py_runs_this.reset(token)


class PageEnded(Exception):  # noqa: N818 - a signal, not an error
    """A page has drawn all it has to say on this run (`end_page`); app.py goes on to draw the sidebar."""


def end_page() -> NoReturn:
    """End the page here, as `st.stop()` would, but let app.py draw the sidebar (status, jobs, who is signed in)
    after it: `st.stop()` inside a page would end the whole run and the status would vanish on that page."""
    raise PageEnded


def hand_over_to_app_py() -> None:
    """If Streamlit started a page file on its own, run app.py in its place and end this script run.

    That happens only before the server's first `st.navigation` call: until then Streamlit serves a deep link
    such as `/upload` as the legacy multipage app of the `pages/` folder, i.e. runs `pages/upload.py` alone
    (see `pages/__init__.py`). app.py's `st.navigation` ends that mode for every session (documented Streamlit
    behaviour), resolves the same URL to the same page and runs it with the sidebar, all within this run.
    """
    if _app_py_runs_this.get():
        return
    runpy.run_path(str(APP_PY), run_name="__main__")
    st.stop()  # the page already ran inside app.py: skip the rest of this file


def knowledge_base() -> KnowledgeBase:
    """The process-wide `KnowledgeBase`, acting for this session's user; on failure shows the reason and stops
    the page.

    Every page calls this first, which also routes a page file Streamlit started on its own through app.py.
    """
    hand_over_to_app_py()
    # the first open takes seconds: say what happens where the status will be, instead of a bare spinner
    note = st.sidebar.empty() if not _opened else None
    if note is not None:
        note.info(_OPENING, icon="⏳")
    try:
        base = _open_knowledge_base()
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(f"The knowledge base could not be opened: {exc}"))
        # no knowledge base, no status to draw: the sidebar says so instead of going blank
        st.sidebar.error("No status: the knowledge base did not open (the page says why).")
        st.stop()
        raise  # unreachable: st.stop() ends the script run
    finally:
        if note is not None:
            note.empty()
    # This session's user (or the local console user without sign-in): kb_core checks their role on writes.
    actor, gate = console_access()
    if gate is not None:
        gate()  # app.py showed this page already; a page file run on its own ends here too
    return base.as_user(actor)
