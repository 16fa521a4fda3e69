"""Times each console page's render with Streamlit's AppTest: the `pages` section of `python -m benchmarks` runs
this file in a subprocess (the benchmark process itself never imports streamlit).

Usage: render_timing.py ENTRY OUT.json RUNS DOCUMENT, with KB_* variables naming the knowledge base to open. ENTRY
is a script that runs app.py from a folder without a `pages/` beside it (as tests/support/app_entry.py does), so every
run goes through app.py's navigation as on a running server. DOCUMENT is one indexed Markdown file.

Figures per page, all measured from outside the knowledge base (its summary cache is private):

- `first_s`: the first render of the page after the knowledge base opened;
- `median_s`, `max_s`: RUNS reruns with the process warm, its summaries current (what a curator gets);
- `uncached_median_s`: alternating with those, RUNS reruns right after a write. Before each, this script
  reconciles DOCUMENT (unchanged) through the public `KnowledgeBase.reconcile`; every write moves the knowledge
  base's version, which makes every cached summary stale, so that rerun recomputes all of them once: what every
  rerun cost before the cache (`uncached_by: "write"`; the old figure forced the cache's age limit to zero).

The cache's hit and miss counters are no longer reported: they are the knowledge base's internals.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]
PAGES_DIR = REPO / "pages"
PAGES = ["playground", "documents", "upload", "tool_calls", "evaluation", "settings"]


def _timed(at: AppTest, page: str) -> float:
    at.switch_page(page)
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"{page} raised: {at.exception}")
    return seconds


def _console_knowledge_base():
    """The knowledge base the pages render: the console opens it once per process (`st.cache_resource` in its
    wiring), so asking the wiring again returns that same instance."""
    from pages.shell import wiring

    return wiring._open_knowledge_base()


def main(entry: str, out: str, runs: int, document: str) -> int:
    # app.py imports `pages`: bench_pages starts this process with the repository root on PYTHONPATH
    at = AppTest.from_file(entry, default_timeout=1800)
    started = time.perf_counter()
    at.run()
    result: dict = {"first_open_s": round(time.perf_counter() - started, 3), "runs": runs, "uncached_by": "write",
                    "pages": {}}
    if at.exception:
        raise SystemExit(f"the first open raised: {at.exception}")
    kb = _console_knowledge_base()
    for name in PAGES:
        page = os.path.relpath(PAGES_DIR / f"{name}.py", Path(entry).parent)
        first = _timed(at, page)
        warm, after_write = [], []
        for _ in range(runs):
            warm.append(_timed(at, page))
            report = kb.documents.reconcile([document])  # a write that changes nothing: every summary is stale now
            if report.failed:
                raise SystemExit(f"reconciling {document} failed: {report.failed}")
            after_write.append(_timed(at, page))
        result["pages"][name] = {
            "first_s": round(first, 3),
            "median_s": round(statistics.median(warm), 3), "max_s": round(max(warm), 3),
            "uncached_median_s": round(statistics.median(after_write), 3),
        }
    Path(out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
