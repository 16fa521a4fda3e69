"""The `pages` section of `python -m kb_core.bench`: every console page's render time at N documents.

It generates N documents with the benchmark's corpus generator (small bodies: the page figures depend on the
document count, not on body size), indexes them (BM25 only, no model), logs some lookups so the tool-call page
has data, then runs `pages/shell/render_timing.py` in a subprocess, which renders each page with Streamlit's
AppTest (the console's own code path, without a browser). The subprocess keeps streamlit out of kb_core.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("kb_core.bench")

REPO = Path(__file__).resolve().parents[1]
TIMING_SCRIPT = REPO / "pages" / "shell" / "render_timing.py"
NO_MODEL = "no-such-org/no-such-model"
PAGE_GOAL_S = 1.0


def bench_pages(workdir: Path, *, docs: int, runs: int, calls: int = 300) -> dict[str, Any]:
    from kb_core.bench import generate_corpus
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.settings import load_settings

    if not TIMING_SCRIPT.is_file():
        return {"skipped": f"{TIMING_SCRIPT} not found (the console is not installed beside kb_core)"}
    root = workdir / "pages"
    started = time.perf_counter()
    corpus = generate_corpus(root, docs, seed=31, min_kb=1, max_kb=3)
    generate_s = time.perf_counter() - started
    env = {"KB_APP_ROOT": str(root), "KB_EMBEDDING_MODEL": NO_MODEL,
           "KB_DATABASE_URL": f"sqlite:///{root}/kb.sqlite3", "KB_MILVUS_URI": str(root / "kb_milvus.db")}
    settings = load_settings(app_root=root, embedding_model=NO_MODEL, database_url=env["KB_DATABASE_URL"],
                             milvus_uri=env["KB_MILVUS_URI"])
    kb = open_knowledge_base(settings, load_model=False)
    try:
        started = time.perf_counter()
        report = kb.sync()
        sync_s = time.perf_counter() - started
        rng = random.Random(5)
        for _ in range(calls):  # a mix of exact, ambiguous and missing queries
            keywords = corpus.keywords[rng.randrange(len(corpus.keywords))]
            kb.lookup_knowledge(rng.choice([keywords[0], keywords[-1], f"如何处理 {rng.randint(0, 10**6)} 问题"]))
        kb.flush_call_log()
        indexed = kb.status().counts.database
    finally:
        kb.close()
    entry = workdir / "pages_entry.py"
    entry.write_text("import runpy\n"
                     f"runpy.run_path({str(REPO / 'app.py')!r}, run_name='__main__')\n", encoding="utf-8")
    out = workdir / "pages_timing.json"
    done = subprocess.run([sys.executable, str(TIMING_SCRIPT), str(entry), str(out), str(runs)],
                          env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(
                              [str(REPO), os.environ.get("PYTHONPATH", "")])},
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"render timing failed: {done.stderr[-2000:]}")
    timing = json.loads(out.read_text(encoding="utf-8"))
    log.info("pages: %d documents indexed (%d failed) in %.0f s", indexed, len(report.failed), sync_s)
    return {"documents": indexed, "tool_calls": calls, "generate_s": round(generate_s, 1),
            "sync_s": round(sync_s, 1), "goal_s": PAGE_GOAL_S, **timing}


def render_pages(r: dict[str, Any]) -> list[str]:
    if "skipped" in r:
        return ["", f"page renders: skipped ({r['skipped']})"]
    lines = ["", f"Page renders (Streamlit AppTest, app.py's navigation and sidebar) at {r['documents']:,} documents "
             f"and {r['tool_calls']} logged tool calls; first open of the knowledge base {r['first_open_s']:.1f} s",
             f"| page | first render | median of {r['runs']} reruns | max | same reruns, cache off |",
             "|---|---|---|---|---|"]
    for name, p in r["pages"].items():
        lines.append(f"| {name} | {p['first_s']:.2f} s | {p['median_s']:.2f} s | {p['max_s']:.2f} s | "
                     f"{p['uncached_median_s']:.2f} s |")
    worst = max(p["median_s"] for p in r["pages"].values())
    lines.append(f"goal: every page <= {r['goal_s']:.0f} s after the first open: "
                 f"{'met' if worst <= r['goal_s'] else 'NOT met'} (slowest median {worst:.2f} s); corpus generated "
                 f"in {r['generate_s']:.0f} s, synced in {r['sync_s']:.0f} s")
    return lines
