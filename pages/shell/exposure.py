"""Loopback by default: without sign-in, the console serves only the machine it runs on.

`.streamlit/config.toml` binds `server.address = "127.0.0.1"`. app.py asks `exposure()` before anything else on
every run (every page, a deep link included, runs through app.py: see `pages/__init__.py`); while no sign-in is
configured, a server that is reachable from elsewhere shows `render_refusal()` instead of the console. It is
reachable from elsewhere when:

- `server.address` is not a loopback address (empty means every interface, as Streamlit's own default);
- the connection comes from another address (`st.context.ip_address`; uvicorn puts a local reverse proxy's
  `X-Forwarded-For` there), or a proxy says it forwards one (`X-Forwarded-For`, `Forwarded`);
- the browser asked for a host name that is not a loopback one (`Host`): a reverse proxy or a port forwarder
  under another name, or a web page that rebinds its own DNS name to 127.0.0.1 to reach this server.

Sign-in counts as configured when `.streamlit/secrets.toml` has an `[auth]` section (Streamlit's `st.login`).
The checks are advisory for a mis-deployment, not a firewall: a server bound to loopback is what keeps other
machines out (docs/security.md).
"""

from __future__ import annotations

import functools
import ipaddress
import socket

import streamlit as st

from pages.shell.safe import escape_markdown, inline_code

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _loopback_ip(text: str) -> bool | None:
    """True/False for an IP address (v4, v6, v4-mapped v6, with or without brackets); None for a name."""
    try:
        ip = ipaddress.ip_address(text.strip().strip("[]").split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _loopback_name(name: str) -> bool:
    name = name.strip().rstrip(".").lower()
    return name in LOOPBACK_NAMES or name.endswith(".localhost")  # RFC 6761: *.localhost is this machine


@functools.lru_cache(maxsize=32)
def is_loopback_address(address: str | None) -> bool:
    """Whether a server bound to `address` can be reached from this machine only.

    Empty (Streamlit's default: every interface), `0.0.0.0`, `::` and LAN addresses are not; `127.0.0.0/8`,
    `::1`, `localhost` and a Unix socket (`unix://...`) are; another name is if every address it resolves to
    is loopback (resolved once per process)."""
    if not address:
        return False
    if address.startswith("unix://"):
        return True
    literal = _loopback_ip(address)
    if literal is not None:
        return literal
    if _loopback_name(address):
        return True
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(address, None)}
    except OSError:
        return False
    return bool(resolved) and all(_loopback_ip(ip) for ip in resolved)


def is_loopback_host(host: str | None) -> bool:
    """Whether a request's `Host` header names this machine's loopback: a loopback IP or `localhost`, with or
    without a port. Names are never resolved here: a rebinding attacker's name resolves to 127.0.0.1 too."""
    if not host:
        return True  # no Host: not a browser request through a name (AppTest, a raw socket)
    host = host.strip()
    if host.startswith("["):  # [::1]:8501
        name = host[1:host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:  # 127.0.0.1:8501, localhost:8501
        name = host.split(":")[0]
    else:  # a bare name or a bare IPv6 address
        name = host
    literal = _loopback_ip(name)
    return literal if literal is not None else _loopback_name(name)


def exposure(*, address: str | None, client_ip: str | None, headers: dict[str, str],
             sign_in: bool) -> str | None:
    """Why this request must not see the console (one sentence of Markdown, the request's own values escaped),
    or None. Pure: the page passes what Streamlit knows about the server and the request."""
    if sign_in:
        return None
    if not is_loopback_address(address):
        return (f"This server listens on {inline_code(address)} (`server.address`), which other machines can reach."
                if address else "This server listens on every network interface (`server.address` is not set).")
    if client_ip and not _loopback_ip(client_ip):
        return f"This request comes from {escape_markdown(client_ip)}, not from this machine."
    for header in ("X-Forwarded-For", "X-Real-Ip"):
        for hop in (headers.get(header) or "").split(","):
            if hop.strip() and not _loopback_ip(hop.strip()):
                return (f"This request was forwarded by a proxy for {escape_markdown(hop.strip())}, not from this "
                        "machine.")
    forwarded = headers.get("Forwarded") or ""
    if "for=" in forwarded.lower():
        hops = [part.split("=", 1)[1].strip('"') for part in forwarded.replace(",", ";").split(";")
                if part.strip().lower().startswith("for=")]
        if any(not _loopback_ip(hop) for hop in hops):
            return "This request was forwarded by a proxy for another machine."
    host = headers.get("Host")
    if not is_loopback_host(host):
        return (f"This page was opened as {inline_code(host)}, a name other than this machine's loopback "
                "(localhost, 127.0.0.1, [::1]).")
    return None


def sign_in_configured() -> bool:
    """An `[auth]` section in `.streamlit/secrets.toml` (no secrets file, or one that does not parse: no)."""
    try:
        return bool(st.secrets.load_if_toml_exists()) and "auth" in st.secrets
    except Exception:  # noqa: BLE001 - a broken secrets file configures no sign-in
        return False


def request_headers() -> dict[str, str]:
    """The headers `exposure()` looks at, from the request that opened this session's connection."""
    try:
        headers = st.context.headers
        found = {key: headers.get(key) for key in ("Host", "X-Forwarded-For", "X-Real-Ip", "Forwarded")}
    except Exception:  # noqa: BLE001 - no request behind this run
        return {}
    return {key: value for key, value in found.items() if isinstance(value, str) and value}


def client_ip() -> str | None:
    """The peer's address; None for 127.0.0.1 and ::1 (Streamlit's own normalisation) and under AppTest, whose
    mocked runtime answers with a MagicMock."""
    try:
        ip = st.context.ip_address
    except Exception:  # noqa: BLE001
        return None
    return ip if isinstance(ip, str) else None


def current_exposure() -> str | None:
    """`exposure()` for this script run."""
    return exposure(address=st.get_option("server.address"), client_ip=client_ip(), headers=request_headers(),
                    sign_in=sign_in_configured())


def render_refusal(reason: str) -> None:
    """The page every URL shows instead of the console while it is exposed without sign-in; ends the run."""
    st.title("🔒 Not served here")
    st.error(f"{reason} The knowledge-base console has no sign-in configured, so it serves only the machine it "
             "runs on: anyone who reaches it could upload, replace and delete documents.")
    port = st.get_option("server.port") or 8501  # the port this server runs on, not Streamlit's default
    st.markdown(
        "**Use it on this machine.** Start it as the README says, `streamlit run app.py`: "
        f"`.streamlit/config.toml` binds it to `127.0.0.1`. Open http://localhost:{port} there, or from another "
        f"machine through an SSH tunnel (`ssh -L {port}:127.0.0.1:{port} <host>`, then "
        f"http://localhost:{port}).\n\n"
        "**Share it with others.** Configure sign-in first (an `[auth]` section in `.streamlit/secrets.toml`), "
        "then bind to another address with `--server.address`. docs/security.md says who can reach what.")
    st.stop()
