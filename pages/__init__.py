"""The console's pages: one script per page at the top of this folder, named by its URL (`upload.py` is `/upload`).

app.py lists them in `st.navigation` as `st.Page(PAGES / "<name>.py")` without a `url_path`, so Streamlit infers
each URL from the file name. Sub-packages hold helpers (`shell/`: the wiring and the sidebar).

Why the page scripts sit here, where Streamlit's legacy multipage mode finds them. Streamlit treats a `pages/`
folder beside the entry script as a legacy (v1) multipage app until some session calls `st.navigation`; from then
on it ignores the folder for every session (as the `st.navigation` docs say). So when a fresh server's first
request is a deep link (a bookmark, a reload after a restart), Streamlit looks the URL up among app.py and the
`*.py` files at the top of `pages/` (not `__init__.py`, not sub-packages, which are never listed as pages), and
runs the matching file on its own:

- Page scripts in a sub-package (say `pages/console/`) match nothing: Streamlit then runs app.py, which renders
  the right page with the sidebar, but the browser first shows Streamlit's "Page not found" dialog ("does not
  seem to exist. Running the app's main page."). Tried with a real browser and rejected for that.
- Here `/upload` matches `upload.py`. Its first call, `knowledge_base()`, sees that app.py did not start it and
  runs app.py in its place (`shell/wiring.py`, `hand_over_to_app_py`): app.py's `st.navigation` ends the legacy
  mode for the whole server, resolves the same URL to the same file (same name in both modes) and runs it with
  the sidebar, in the same script run. No "Page not found", no private Streamlit attribute.

Pinned by tests:
- tests/browser/test_browser.py `test_a_deep_link_on_a_fresh_server_runs_app_py`: a fresh `streamlit run app.py` whose
  first request is `/upload` shows the Upload page, exactly app.py's navigation links, the sidebar status and no
  "Page not found" dialog; the next page opened from the sidebar works as usual.
- tests/console/test_app.py `test_a_page_file_run_on_its_own_goes_through_app_py`: AppTest on app.py itself (it
  re-detects this folder at every run, so each run is a legacy one) renders a page with app.py's sidebar.
- tests/console/test_app.py `test_every_page_script_is_a_navigation_page_named_by_its_file`: the top-level `*.py`
  files here are exactly app.py's pages and none sets a `url_path` (a URL the legacy mode would not find).
"""
