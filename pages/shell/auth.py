"""Sign-in and roles in the console (Streamlit's `st.login`, OpenID Connect, `[auth]` in
`.streamlit/secrets.toml`). Without an `[auth]` section the console works as it always did, for one trusted
user on this machine; with one, a visitor signs in first and acts with the role `auth.roles` gives them.
`kb_core` enforces the role on every write (`KnowledgeBase.as_user`); the pages only hide what a role cannot
use."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from kb_core import Actor, Role, load_settings
from kb_core.console import RoleMap, SignedIn, audiences_of
from pages.shell.exposure import sign_in_configured
from pages.shell.safe import escape_markdown, inline_code

# Without sign-in the console is one trusted local user: every right, recorded as "console".
CONSOLE = Actor("console", Role.ADMIN)


@st.cache_resource(show_spinner=False)
def _role_map() -> RoleMap:
    return load_settings().role_map


def console_access() -> tuple[Actor | None, Callable[[], None] | None]:
    """Who this browser session acts as, or the page to show instead (sign in, or no access)."""
    if not sign_in_configured():
        return CONSOLE, None
    if not st.user.is_logged_in:
        return None, _sign_in_page
    who = SignedIn.of_claims({name: st.user.get(name) for name in _CLAIMS})
    role = _role_map().role_of_sign_in(who)
    if role is None:
        return None, lambda: _no_access_page(who)
    return Actor(who.name, role, audiences_of(role, who.groups, load_settings().group_audiences)), None


_CLAIMS = ("email", "email_verified", "iss", "sub", "groups")


def _sign_in_page() -> None:
    st.title("Knowledge base console")
    st.info("Sign in to use the console: who may look things up, upload or administer it is set by the team's "
            "roles (`auth.roles`).")
    st.button("Sign in", type="primary", on_click=st.login)
    st.stop()


def _no_access_page(who: SignedIn) -> None:
    st.title("Knowledge base console")
    if who.email:
        st.error(f"{inline_code(who.email)} has no role here. Ask an administrator to add you to `auth.roles` "
                 "(or `KB_ROLES`).")
    elif who.claimed_email:
        st.error(f"The provider does not say {inline_code(who.claimed_email)} is verified (`email_verified`), so "
                 "it grants no role. Verify the address with the provider, or ask an administrator to add this "
                 f"account by its subject: {inline_code(f'sub:{who.issuer}|{who.subject}')}.")
    else:
        st.error("This account has no role here (the provider gave no e-mail address). Ask an administrator to "
                 f"add it by its subject: {inline_code(f'sub:{who.issuer}|{who.subject}')}.")
    st.button("Sign out", on_click=st.logout)
    st.stop()


def render_user(actor: Actor) -> None:
    """The sidebar's line about who is signed in, with sign-out (only when sign-in is configured)."""
    if actor == CONSOLE:
        return
    st.sidebar.caption(f"Signed in as {escape_markdown(actor.name)} · {actor.role.label}")
    st.sidebar.button("Sign out", key="sign-out", on_click=st.logout)
