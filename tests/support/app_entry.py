"""The entry script most AppTest tests run: app.py itself, from a folder without a `pages/` beside it.

AppTest re-detects a `pages/` folder beside its main script at every run. From app.py every run would then be a
legacy (v1) multipage run, which a real server makes only until its first `st.navigation` call: the page file
starts on its own and hands the run over to app.py, ending it with `st.stop()` (see `pages/__init__.py`). The
tests would pass that way too (checked), but they would only ever exercise that first-request path. From tests/support/
there is no such folder, so every AppTest run goes straight through app.py's navigation, as every request after
the first does under `streamlit run app.py`. The hand-over itself is covered by tests/console/test_app.py
(`test_a_page_file_run_on_its_own_goes_through_app_py`, AppTest on app.py) and by the browser test's deep link
on a fresh server.
"""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parents[2] / "app.py"), run_name="__main__")
