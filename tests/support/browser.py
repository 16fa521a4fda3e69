"""A real browser against `streamlit run app.py` (the browser, sign-in and three-process tests): Debian's chromium
driven by playwright."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}


@contextlib.contextmanager
def chromium_page(timeout_ms: float, *extra_args: str):
    """A page of Debian's chromium driven by playwright (which never downloads a browser of its own), at VIEWPORT,
    every wait bounded by `timeout_ms`; chromium is closed on the way out, even on failure."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium with `apt-get install chromium` "
                    "(playwright must not download a browser of its own)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *extra_args])
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.set_default_timeout(timeout_ms)
            yield context.new_page()
        finally:
            browser.close()


def show_job_changes(page, shown, timeout_ms: float) -> None:
    """Wait until the page shows `shown` (a locator), which a job this tab started changes. The jobs panel does
    not redraw the page by itself when a job ends (pages/shell/jobs_panel.py): if the job ended after the page
    was drawn, the panel offers "Show the changes", pressed here; if it ended before, the page shows it already
    and no button comes (the panel stops refreshing once no job is active)."""
    from playwright.sync_api import expect

    button = page.get_by_role("button", name="Show the changes")
    expect(shown.or_(button).first).to_be_visible(timeout=timeout_ms)
    if not shown.first.is_visible():
        button.click()
    expect(shown.first).to_be_visible(timeout=timeout_ms)
    expect(button).to_have_count(0)

