"""Streamlit entry point of the knowledge-base console: `streamlit run app.py`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_ROOT = Path(__file__).resolve().parent
# Relative settings (knowledge_base/, the SQLite file, the Milvus Lite folder) resolve next to this file,
# so `streamlit run /elsewhere/app.py` finds them too.
os.environ.setdefault("KB_APP_ROOT", str(APP_ROOT))
# The console watches the folder (one watcher per knowledge base across processes); KB_WATCH=0 turns it off.
os.environ.setdefault("KB_WATCH", "1")
if str(APP_ROOT) not in sys.path:
    sys.path.insert(0, str(APP_ROOT))

import streamlit as st  # noqa: E402

from kb_core import Role  # noqa: E402
from pages.shell.auth import console_access, render_user  # noqa: E402
from pages.shell.exposure import current_exposure, render_refusal  # noqa: E402
from pages.shell.sidebar import render_status  # noqa: E402
from pages.shell.wiring import PageEnded, knowledge_base, run_by_app_py  # noqa: E402

st.set_page_config(page_title="Knowledge base console", page_icon="📚", layout="wide")
# Served beyond loopback without sign-in: every URL shows why instead of the console (pages/shell/exposure.py).
refusal = current_exposure()
# With sign-in configured: who this session is, or the sign-in / no-access page instead (pages/shell/auth.py).
actor, gate = (None, None) if refusal else console_access()

# One script per page at the top of pages/, no url_path: each URL is its file name (/upload is pages/upload.py),
# the same name Streamlit's legacy pages/ mode gives it on a fresh server's first request (see pages/__init__.py).
# A page a role may not use is not offered in the navigation, yet its URL still opens it (hidden), where it says
# which role it needs - a shared /upload link must not land silently on the playground (kb_core refuses the
# writes anyway).
PAGES = APP_ROOT / "pages"
may_write = actor is None or actor.may(Role.CURATOR)
may_admin = actor is None or actor.may(Role.ADMIN)
navigation = st.navigation(
    [
        st.Page(PAGES / "playground.py", title="Lookup playground", icon="🔎", default=True),
        st.Page(PAGES / "documents.py", title="Documents", icon="📚"),
        st.Page(PAGES / "upload.py", title="Upload", icon="⬆️", visibility="visible" if may_write else "hidden"),
        st.Page(PAGES / "tool_calls.py", title="Tool calls", icon="🧾"),
        st.Page(PAGES / "evaluation.py", title="Evaluation", icon="📏"),
        st.Page(PAGES / "settings.py", title="Settings", icon="⚙️", visibility="visible" if may_admin else "hidden"),
    ],
    position="hidden" if refusal or gate else "sidebar",
)
if refusal:
    render_refusal(refusal)  # ends the run: no page, no knowledge base, no sidebar status
if gate:
    gate()  # ends the run: the sign-in (or no-access) page only
failed: Exception | None = None
with run_by_app_py():
    kb = knowledge_base()
    try:
        navigation.run()
    except PageEnded:  # the page ended early (`end_page`): the sidebar is still drawn below
        pass
    except Exception as exc:  # noqa: BLE001 - a page's bug: the sidebar first, then Streamlit shows the error
        failed = exc
render_user(kb.actor)
render_status(kb)  # after the page, so the sidebar shows what the page's action just changed
if failed is not None:
    raise failed
