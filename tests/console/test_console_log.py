"""The console's terminal under a flood of one warning: `streamlit run` configures only Streamlit's
own loggers, so without kb_core's counted handler Python printed every watcher warning on stderr."""

from __future__ import annotations

import os
import subprocess
import sys

from support.console import APP
from support.paths import REPO

FLOOD = f"""
import logging, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout=60)
at.run()
assert not at.exception and not at.error, (at.exception, at.error)
watcher = logging.getLogger("watchdog.observers.inotify_buffer")
for i in range(500):
    watcher.warning("Inotify queue overflowed; reconciling recursive watches below %s", f"/srv/kb/{{i}}")
logging.getLogger("kb_core.somewhere").warning("a different warning")
print("done", flush=True)
"""


def test_a_flood_of_one_warning_reaches_the_console_s_terminal_counted(tmp_path):
    env = {**os.environ, "KB_APP_ROOT": str(tmp_path), "KB_EMBEDDING_MODEL": "no-such-org/no-such-model",
           "KB_WATCH": "0"}
    for name in ("KB_DATABASE_URL", "KB_MILVUS_URI", "KB_LOG_FILE", "KB_CONFIG"):
        env.pop(name, None)
    # from the checkout, as `streamlit run app.py` is started: its .streamlit/config.toml binds loopback
    done = subprocess.run([sys.executable, "-c", FLOOD], capture_output=True, text=True, timeout=240, env=env,
                          cwd=REPO)
    assert done.returncode == 0 and "done" in done.stdout, done.stderr[-3000:]
    flood = [line for line in done.stderr.splitlines() if "Inotify queue overflowed" in line]
    assert len(flood) == 1, flood[:5]
    assert "a different warning" in done.stderr  # another kind is never held back
