"""Times each console page's render with Streamlit's AppTest: the `pages` section of `python -m kb_core.bench`
runs this file in a subprocess (kb_core never imports streamlit).

Usage: render_timing.py ENTRY OUT.json RUNS, with KB_* variables naming the knowledge base to open. ENTRY is a
script that runs app.py from a folder without a `pages/` beside it (as tests/app_entry.py does), so every run
goes through app.py's navigation as on a running server. Figures per page: the first render after the
knowledge base opened, then the median and maximum of RUNS reruns with the cached summaries (what a curator
gets) and, alternating with them, RUNS reruns with the cache turned off (what every rerun cost before).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGES_DIR = Path(__file__).resolve().parents[1]
PAGES = ["playground", "documents", "upload", "tool_calls"]


def _timed(at: AppTest, page: str) -> float:
    at.switch_page(page)
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"{page} raised: {at.exception}")
    return seconds


def main(entry: str, out: str, runs: int) -> int:
    sys.path.insert(0, str(PAGES_DIR.parent))
    from pages.shell import wiring

    at = AppTest.from_file(entry, default_timeout=1800)
    started = time.perf_counter()
    at.run()
    result: dict = {"first_open_s": round(time.perf_counter() - started, 3), "runs": runs, "pages": {}}
    if at.exception:
        raise SystemExit(f"the first open raised: {at.exception}")
    kb = wiring._open_knowledge_base()  # the process-wide instance the pages use (st.cache_resource)
    cache = kb.summaries
    cached_age = cache.max_age
    for name in PAGES:
        page = os.path.relpath(PAGES_DIR / f"{name}.py", Path(entry).parent)
        first = _timed(at, page)
        cached, uncached = [], []
        for _ in range(runs):
            cached.append(_timed(at, page))
            cache.max_age = 0.0  # every summary recomputed, as on every rerun before the cache
            try:
                uncached.append(_timed(at, page))
            finally:
                cache.max_age = cached_age
        result["pages"][name] = {
            "first_s": round(first, 3),
            "median_s": round(statistics.median(cached), 3), "max_s": round(max(cached), 3),
            "uncached_median_s": round(statistics.median(uncached), 3),
        }
    result["cache"] = {"hits": cache.hits, "misses": cache.misses}
    Path(out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
