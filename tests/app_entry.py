"""The entry script AppTest runs: app.py itself.

AppTest re-detects a `pages/` folder beside its main script at every run and then runs page files on their
own (Streamlit's legacy multipage mode), skipping app.py's navigation and sidebar. From tests/ it sees no
such folder, so every AppTest run goes through app.py exactly as `streamlit run app.py` does after its first
request. (That first request is covered by the browser test's deep-link check.)
"""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parent.parent / "app.py"), run_name="__main__")
