"""Sign-in and roles in the console: with `[auth]` configured an anonymous visitor sees only the
sign-in page, a viewer reads but cannot upload or delete, a curator can; without it the console is what it
always was. AppTest for each role's pages; a real `streamlit run app.py` in chromium signing in through a
local OpenID provider (oidc-provider-mock) for the whole flow."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

import pytest
from support.browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT
from support.console import ROLES
from support.console import maintenance_buttons as _maintenance
from support.console import signed_in_user as _user
from support.console import signin_app as _app
from support.documents import doc
from support.servers import free_port, server_env, streamlit_server


def _texts(at) -> str:
    return " ".join([*(m.value for m in at.markdown), *(c.value for c in at.caption),
                     *(i.value for i in at.info), *(e.value for e in at.error), *(t.value for t in at.title)])


@pytest.fixture
def roles(synced_sample, monkeypatch):
    import json

    monkeypatch.setenv("KB_ROLES", json.dumps(ROLES))
    return synced_sample


def test_anonymous_sees_only_sign_in(roles):
    at = _app({"is_logged_in": False})
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in"]
    assert "Sign in to use the console" in _texts(at)
    assert not at.text_input and not at.dataframe  # no playground, no status, no documents


def test_a_signed_in_user_without_a_role_has_no_access(roles):
    at = _app(_user("mallory@elsewhere.net"))
    at.run()
    assert "has no role here" in _texts(at) and [b.label for b in at.button] == ["Sign out"]


@pytest.mark.parametrize("verified", [False, "false", None])
def test_an_unverified_email_of_an_admin_gets_no_role(roles, verified):
    """A token with `email_verified: false` (or none: Microsoft Entra ID sends none) for an admin's
    address must not reach Settings."""
    claims = {"is_logged_in": True, "email": "ada@example.com", "iss": "https://idp.example", "sub": "x-1"}
    if verified is not None:
        claims["email_verified"] = verified
    at = _app(claims)
    at.run()
    assert not at.exception
    text = _texts(at)
    assert "does not say `ada@example.com` is verified" in text and "sub:https://idp.example|x-1" in text
    assert [b.label for b in at.button] == ["Sign out"] and "Signed in as" not in text
    at.switch_page("../../pages/settings.py").run()
    assert "Signed in as" not in _texts(at) and not at.text_input


def test_an_account_without_a_verified_email_gets_its_role_by_issuer_and_subject(synced_sample, monkeypatch):
    import json

    monkeypatch.setenv("KB_ROLES", json.dumps({"sub:https://login.example/tenant/v2.0/|a1b2": "curator"}))
    at = _app({"is_logged_in": True, "email": "someone@example.com", "iss": "https://login.example/tenant/v2.0",
               "sub": "a1b2"})
    at.run()
    assert not at.exception
    assert "Signed in as a1b2 (https://login.example/tenant/v2.0) · curator" in _texts(at)


def test_a_viewer_looks_things_up_but_has_no_upload_page_and_no_write_buttons(roles):
    at = _app(_user("vera@example.com"))
    at.run()
    assert not at.exception
    assert "Signed in as vera@example.com · viewer" in _texts(at)
    at.text_input(key="query").set_value("ERR_TIMEOUT")
    next(b for b in at.button if b.label == "Look up").click().run()
    assert "payment-errors.md" in _texts(at)
    at.query_params["doc"] = "api/payment-errors.md"
    at.switch_page("../../pages/documents.py").run()
    assert "Trash" not in {t.label for t in at.tabs}  # restoring and purging are a curator's
    assert "Raw file" in {t.label for t in at.tabs} and "Edit" not in {t.label for t in at.tabs}  # the inspector
    labels = {b.label for b in at.button} | _maintenance(at)
    assert not any(label.startswith(("Delete", "Reconcile", "Re-index", "Save")) for label in labels), labels
    at.session_state["documents_tab"] = "Keyword map"  # a keyword's documents: read, not edited
    at.run()
    frame = next(f for f in at.dataframe if "hits for the bare keyword" in f.value.columns)
    at.session_state[frame.key] = {"selection": {"rows": [list(frame.value["keyword"]).index("超时")],
                                                 "columns": [], "cells": []}}
    at.run()
    assert not at.exception, at.exception
    assert "Editing needs the curator role; you are signed in as a viewer." in _texts(at)
    assert not [e for e in at.expander if e.label.startswith("Rename or remove")] and not at.text_area
    at.switch_page("../../pages/upload.py").run()  # not in a viewer's navigation, yet a shared /upload link says why
    assert not at.exception, at.exception
    assert "Uploading needs the curator role; you are signed in as a viewer." in _texts(at)
    assert not at.file_uploader


def test_a_curator_uploads_but_does_not_reconcile(roles):
    at = _app(_user("carl@example.com"))
    at.run()
    at.query_params["doc"] = "api/payment-errors.md"
    at.switch_page("../../pages/documents.py").run()
    labels = {b.label for b in at.button}
    assert any(label.startswith("Delete") for label in labels)
    assert {"Trash", "Edit"} <= {t.label for t in at.tabs}  # the inspector's Edit tab too
    labels = _maintenance(at)
    assert "Reconcile" not in labels and "Re-index all" not in labels
    assert "Reconcile and re-index need the admin role" in _texts(at)
    at.switch_page("../../pages/upload.py").run()
    assert not at.exception and "needs the curator role" not in _texts(at)


def test_an_admin_has_everything(roles):
    at = _app(_user("ada@example.com"))
    at.run()
    labels = _maintenance(at)
    assert "Reconcile" in labels and "Re-index all" in labels
    assert any("KB_ROLES" in str(frame.value) for frame in at.dataframe)  # an admin sees the settings


def test_without_sign_in_configured_the_console_is_as_before(synced_sample):
    at = _app(None, signin=False)
    at.run()
    assert not at.exception and "Sign in" not in {b.label for b in at.button}
    assert "Reconcile" in _maintenance(at) and "Signed in as" not in _texts(at)


# -- the whole flow in a real browser -----------------------------------------------------------------------
@contextlib.contextmanager
def _provider():
    from oidc_provider_mock import User, run_server_in_thread

    users = [User(sub=email, claims={"email": email, "email_verified": True}) for email in ROLES]
    with run_server_in_thread(user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@contextlib.contextmanager
def _console(root: Path, tmp_path: Path, provider: str):
    port = free_port()
    secrets_file = tmp_path / "secrets.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "http://localhost:{port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(32)}"\n'
        'client_id = "kb-console"\nclient_secret = "kb-console-secret"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n', encoding="utf-8")
    import json

    env = server_env(root, KB_ROLES=json.dumps(ROLES), KB_WATCH="0")
    with streamlit_server(tmp_path, env, port=port, args=("--secrets.files", str(secrets_file))) as served:
        yield f"http://localhost:{port}", served.log


def _sign_in(page, url: str, email: str) -> None:
    page.goto(url)
    page.get_by_role("button", name="Sign in").click(timeout=60_000)
    page.wait_for_url("**/authorize**", timeout=60_000)  # the provider's form
    page.locator("input[name=sub]").fill(email)
    page.locator("button[value=authorize], button[type=submit]").first.click()
    page.get_by_text(f"Signed in as {email}").wait_for(timeout=60_000)


@pytest.mark.browser
@pytest.mark.processes
def test_sign_in_through_a_real_openid_provider(tmp_path):
    from playwright.sync_api import sync_playwright

    root = tmp_path / "root"
    (root / "knowledge_base/api").mkdir(parents=True)
    (root / "knowledge_base/api/orders.md").write_text(doc("Orders", ["ORDER_LOCKED"]), encoding="utf-8")
    with _provider() as provider, _console(root, tmp_path, provider) as (url, log), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            anonymous = browser.new_page(viewport=VIEWPORT)
            anonymous.goto(url)
            anonymous.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
            assert anonymous.get_by_text("Lookup playground").count() == 0  # no navigation, no console

            viewer = browser.new_context(viewport=VIEWPORT).new_page()
            _sign_in(viewer, url, "vera@example.com")
            assert viewer.get_by_role("link", name="Upload").count() == 0
            viewer.get_by_role("textbox", name="Query", exact=True).fill("ORDER_LOCKED")
            viewer.get_by_role("button", name="Look up").click()
            viewer.get_by_text("knowledge_base/api/orders.md").first.wait_for(timeout=60_000)  # a viewer reads
            # the first-run "Index … now" offer is an admin's: a viewer is not shown it
            assert viewer.get_by_role("button", name="Index 1 document now").count() == 0

            curator = browser.new_context(viewport=VIEWPORT).new_page()
            _sign_in(curator, url, "carl@example.com")
            curator.get_by_role("link", name="Upload").click()
            curator.get_by_text("Upload documents").first.wait_for(timeout=60_000)

            admin = browser.new_context(viewport=VIEWPORT).new_page()
            _sign_in(admin, url, "ada@example.com")
            admin.get_by_role("button", name="Index 1 document now").wait_for(timeout=60_000)
        finally:
            browser.close()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
