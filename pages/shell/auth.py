"""Sign-in and roles in the console (Streamlit's `st.login`, OpenID Connect, `[auth]` in
`.streamlit/secrets.toml`). Without an `[auth]` section the console works as it always did, for one trusted
user on this machine; with one, a visitor signs in first and acts with the role `auth.roles` gives them.
`kb_core` enforces the role on every write (`KnowledgeBase.as_user`); the pages only hide what a role cannot
use."""

from __future__ import annotations

import streamlit as st

from kb_core import Actor, Role, Settings

# Without sign-in the console is one trusted local user: every right, recorded as "console".
CONSOLE = Actor("console", Role.ADMIN)


def signin_configured() -> bool:
    """Whether `.streamlit/secrets.toml` has an `[auth]` section (a missing file means no)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file, or one that does not parse: no sign-in configured
        return False


def signed_in_email() -> str | None:
    if not st.user.is_logged_in:
        return None
    email = st.user.get("email")
    return str(email) if email else None


def current_actor(settings: Settings) -> Actor:
    """Who this browser session acts as. Without sign-in configured, the local console user; otherwise the
    signed-in user with their role. Anyone else sees the sign-in page (or "no access") and the run ends."""
    if not signin_configured():
        return CONSOLE
    if not st.user.is_logged_in:
        _sign_in_page()
    email = signed_in_email()
    groups = st.user.get("groups") or []
    role = settings.role_map.role_of(email, groups if isinstance(groups, list) else [groups])
    if email is None or role is None:
        _no_access_page(email)
    return Actor(email, role)


def _sign_in_page() -> None:
    st.title("Knowledge base console")
    st.info("Sign in to use the console: who may look things up, upload or administer it is set by the team's "
            "roles (`auth.roles`).")
    st.button("Sign in", type="primary", on_click=st.login)
    st.stop()


def _no_access_page(email: str | None) -> None:
    st.title("Knowledge base console")
    who = f"`{email}`" if email else "This account (the provider gave no e-mail address)"
    st.error(f"{who} has no role here. Ask an administrator to add you to `auth.roles` (or `KB_ROLES`).")
    st.button("Sign out", on_click=st.logout)
    st.stop()


def render_user(actor: Actor) -> None:
    """The sidebar's line about who is signed in, with sign-out (only when sign-in is configured)."""
    if actor is CONSOLE:
        return
    st.sidebar.caption(f"Signed in as {actor.name.replace('`', '')} · {actor.role.label}")
    st.sidebar.button("Sign out", key="sign-out", on_click=st.logout)
