"""The console under AppTest: the entry script, a page after one run (signed in or not), the jobs a click
started, what a page shows."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from support.paths import SUPPORT

APP = str(SUPPORT / "app_entry.py")
PAGES = "../../pages"  # tests/support/ -> pages/: AppTest.switch_page is relative to APP


def run_page(page: str, **session):
    """The app after one run, switched to `page` (a file under pages/, or "playground")."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in session.items():
        at.session_state[key] = value
    at.run()
    if page != "playground":
        at.switch_page(f"{PAGES}/{page}.py").run()
    return at


# Sign-in configured (st.login's secrets, an OpenID provider nobody reaches: AppTest sets the user itself)
SIGNIN_AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
               "client_id": "kb-console", "client_secret": "s" * 16,
               "server_metadata_url": "http://localhost:1/.well-known/openid-configuration"}


def signed_in_page(page: str, monkeypatch, email: str, role: str):
    """The app after one run as `email` signed in with `role` (`KB_ROLES`), switched to `page` (under pages/)."""
    import json

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("KB_ROLES", json.dumps({email: role}))
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = SIGNIN_AUTH
    at.user = {"is_logged_in": True, "email": email, "email_verified": True}
    at.run()
    at.switch_page(f"{PAGES}/{page}.py").run()
    return at


def wait_for_jobs(root: Path, timeout: float = 120) -> None:
    """Wait until no job of the knowledge base at `root` (its default SQLite file) is queued or running: the
    console's jobs run on their worker thread, after the script run that started them. Read from the database,
    as another process would."""
    from kb_core.jobs.store import JobStore
    from kb_core.storage.metadata_store import MetadataStore

    store = MetadataStore(f"sqlite:///{root / 'kb.sqlite3'}")
    try:
        jobs = JobStore(store)
        deadline = time.monotonic() + timeout
        while active := jobs.active():
            if time.monotonic() > deadline:
                pytest.fail(f"jobs still active after {timeout:.0f} s: {active}")
            time.sleep(0.05)
    finally:
        store.dispose()


def finish_jobs(at, root: Path | None = None):
    """Let the jobs a click started finish, then run the page again (what the panel's refresh does in a
    browser: AppTest runs no timers). `root`: the console's application root (default KB_APP_ROOT)."""
    wait_for_jobs(root or Path(os.environ["KB_APP_ROOT"]))
    at.run()
    assert not at.exception, at.exception
    return at


def shown(markdown: str) -> str:
    """The text a Markdown value shows once its backslash escapes are read (pages/shell/safe.py escapes what
    documents, queries and messages bring)."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def look_up(at, query: str):
    """Type a query into the playground and press "Look up"."""
    at.text_input(key="query").set_value(query)
    next(b for b in at.button if b.label == "Look up").click().run()  # the form's submit button
    assert not at.exception, at.exception
    return at


def history_shown(at) -> list[str]:
    """The playground's history as it shows it, newest first: each run's query as inline code, with
    " · section `…`" when it asked for one (the history is the acting user's, from the database)."""
    boxes = [e for e in at.expander if e.label.startswith("History")]
    return [m.value for m in boxes[0].markdown] if boxes else []



# -- sign-in and roles (tests/console/test_signin.py and the jobs page) -------------------------------------------
ROLES = {"vera@example.com": "viewer", "carl@example.com": "curator", "ada@example.com": "admin"}


def signin_app(user: dict | None, *, signin: bool = True):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    if signin:
        at.secrets["auth"] = SIGNIN_AUTH
    if user is not None:
        at.user = user
    return at


def signed_in_user(email: str) -> dict:
    return {"is_logged_in": True, "email": email, "email_verified": True}


def maintenance_buttons(at):
    at.session_state["documents_tab"] = "Maintenance"
    at.switch_page(f"{PAGES}/documents.py").run()
    return {b.label for b in at.button}


# -- uploads (tests/console/test_upload_page.py and the create-only test) -----------------------------------------
def upload_files(*items: tuple[str, str | bytes]) -> list[tuple[str, bytes, str]]:
    return [(name, body.encode() if isinstance(body, str) else body, "text/markdown") for name, body in items]


def open_stores():
    from kb_core import load_settings, open_knowledge_base

    return open_knowledge_base(load_settings())


@contextlib.contextmanager
def stores():
    kb = open_stores()
    try:
        yield kb
    finally:
        kb.close()


def upload_button(at):
    return next(b for b in at.button if b.label.startswith(("Upload", "Nothing")))
