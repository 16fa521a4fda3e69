"""Loopback by default: the console serves the machine it runs on; served beyond loopback
without sign-in, every page says so instead of showing the console (pages/shell/exposure.py).

The rules on their own, every page under AppTest with `server.address` set, and `streamlit run app.py` exactly
as the README says: it listens on 127.0.0.1 only. The refusal in a real browser, reached through the machine's
other address, is in tests/browser/test_browser_safety.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from support.console import APP
from support.hostile import outside_code
from support.paths import REPO
from support.servers import listening_addresses, machine_addresses, server_env, streamlit_server

from pages.shell.exposure import exposure, is_loopback_address, is_loopback_host

REFUSED = "🔒 Not served here"
PAGES = ["playground", "documents", "upload", "tool_calls"]


@pytest.mark.parametrize(("address", "loopback"), [
    (None, False), ("", False), ("0.0.0.0", False), ("::", False), ("[::]", False), ("192.0.2.2", False),
    ("10.1.2.3", False), ("fd00::2", False), ("no-such-host.invalid", False),
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
    ("localhost", True), ("unix:///run/kb/console.sock", True),
])
def test_which_server_addresses_are_loopback(address, loopback):
    assert is_loopback_address(address) is loopback


@pytest.mark.parametrize(("host", "loopback"), [
    (None, True), ("localhost:8501", True), ("LOCALHOST", True), ("127.0.0.1:8501", True), ("[::1]:8501", True),
    ("::1", True), ("console.localhost:8501", True),
    ("192.0.2.2:8501", False), ("kb.example.com", False), ("rebind.attacker.example:8501", False),
    ("[fd00::2]:8501", False), ("localhost.attacker.example", False),
])
def test_which_host_headers_name_loopback(host, loopback):
    assert is_loopback_host(host) is loopback


def _why(address="127.0.0.1", client_ip=None, sign_in=False, **headers):
    return exposure(address=address, client_ip=client_ip, headers=headers, sign_in=sign_in)


def test_the_console_is_served_on_loopback_to_loopback_only_unless_sign_in_is_configured():
    assert _why() is None and _why(Host="localhost:8501") is None and _why(client_ip="127.0.0.1") is None
    assert "every network interface" in _why(address=None)
    assert "`0.0.0.0`" in _why(address="0.0.0.0")
    assert "192.0.2.7" in _why(client_ip="192.0.2.7")
    assert "192.0.2.8" in _why(**{"X-Forwarded-For": "192.0.2.8, 127.0.0.1"})
    assert _why(**{"X-Forwarded-For": "127.0.0.1"}) is None
    assert "another machine" in _why(Forwarded='for="[2001:db8::1]";proto=https')
    assert "rebind.example" in _why(Host="rebind.example:8501")
    for hostile in ({"address": "0.0.0.0"}, {"client_ip": "192.0.2.7"}, {"Host": "kb.example.com"}):
        assert _why(sign_in=True, **hostile) is None  # sign-in decides who gets in


def test_a_request_s_own_values_are_escaped_in_the_reason():
    reason = _why(Host="![x](http://127.0.0.1:9/host.png)`")
    assert "![" not in outside_code(reason)
    reason = _why(**{"X-Forwarded-For": "![x](http://127.0.0.1:9/xff.png)"})
    assert "![" not in outside_code(reason)


@pytest.fixture
def server_address():
    """Set `server.address` for AppTest runs in this process (as `--server.address` would); restored after."""
    from streamlit import config

    before = config.get_option("server.address")
    yield lambda value: config.set_option("server.address", value)
    config.set_option("server.address", before)


def _refused(at: AppTest) -> None:
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == [REFUSED]
    assert "no sign-in configured" in at.error[0].value
    assert not at.sidebar.metric and not at.button  # no console: no status, no action


@pytest.mark.parametrize("address", ["0.0.0.0", "", "192.0.2.2"])
def test_every_page_refuses_when_the_server_is_bound_beyond_loopback(app_root, server_address, address):
    server_address(address)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    _refused(at)
    assert "0.0.0.0" not in address or "`0.0.0.0`" in at.error[0].value
    for page in PAGES[1:]:
        at.switch_page(f"../../pages/{page}.py").run()
        _refused(at)
    assert not (app_root / "kb.sqlite3").exists() and not (app_root / "kb_milvus.db").exists()  # never opened


def test_a_page_file_started_on_its_own_refuses_too(app_root, server_address):
    """The deep-link path of a fresh server (pages/__init__.py): the page hands the run to app.py, which refuses."""
    server_address("0.0.0.0")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/upload.py").run()
    _refused(at)


def test_sign_in_configured_lifts_the_refusal(app_root, server_address, monkeypatch):
    server_address("0.0.0.0")
    monkeypatch.setenv("KB_ROLES", "ada@example.com=admin")
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32}
    at.user = {"is_logged_in": False}
    at.run()
    assert not at.exception, at.exception
    assert [b.label for b in at.button] == ["Sign in"]  # no refusal: sign in instead (tests/console/test_signin.py)
    at.user = {"is_logged_in": True, "email": "ada@example.com", "email_verified": True}
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["🔎 Lookup playground"]


def test_on_loopback_the_console_is_served(app_root, server_address):
    server_address("127.0.0.1")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["🔎 Lookup playground"]


@pytest.mark.processes
@pytest.mark.timeout(180)
def test_streamlit_run_app_py_as_the_readme_says_listens_on_loopback_only(tmp_path):
    """`streamlit run app.py` with no address option (only .streamlit/config.toml): bound to 127.0.0.1, and the
    machine's other addresses refuse the connection."""
    env = server_env(tmp_path, drop_prefixes=("STREAMLIT_", "KB_"), KB_WATCH="0")
    with streamlit_server(tmp_path, env, address=None) as served:
        listening = listening_addresses(served.port)
        assert listening and all(ip.is_loopback for ip in listening), listening
        others = machine_addresses()
        for ip in others:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((ip, served.port), timeout=5).close()
    assert Path(REPO / ".streamlit/config.toml").read_text().count('address = "127.0.0.1"') == 1


def test_the_refusal_names_the_port_this_server_runs_on(app_root, server_address):
    from streamlit import config

    server_address("0.0.0.0")
    before = config.get_option("server.port")
    config.set_option("server.port", 8765)
    try:
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
    finally:
        config.set_option("server.port", before)
    _refused(at)
    text = " ".join(m.value for m in at.markdown)
    assert "http://localhost:8765" in text and "ssh -L 8765:127.0.0.1:8765" in text and "8501" not in text
