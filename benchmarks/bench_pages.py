"""The `pages` section of `python -m benchmarks`: every console page's render time at N documents.

It generates N documents with the benchmark's corpus generator (small bodies: the page figures depend on the
document count, not on body size), indexes them (`KnowledgeBase.reconcile`, BM25 only, no model), logs some
lookups so the tool-call page has data, then runs `benchmarks/render_timing.py` in a subprocess, which renders
each page with Streamlit's AppTest (the console's own code path, without a browser). The subprocess keeps
streamlit out of this process.
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

from benchmarks.common import NO_MODEL, REPO, bench_settings, generate_corpus
from kb_core import open_knowledge_base

log = logging.getLogger("benchmarks.bench")

TIMING_SCRIPT = Path(__file__).resolve().parent / "render_timing.py"
PAGE_GOAL_S = 1.0


def bench_pages(workdir: Path, *, docs: int, runs: int, calls: int = 300) -> dict[str, Any]:
    if not (REPO / "app.py").is_file():
        return {"skipped": f"{REPO / 'app.py'} not found (the console is not beside the benchmarks)"}
    root = workdir / "pages"
    started = time.perf_counter()
    corpus = generate_corpus(root, docs, seed=31, min_kb=1, max_kb=3)
    generate_s = time.perf_counter() - started
    settings = bench_settings(root)
    env = {"KB_APP_ROOT": str(root), "KB_EMBEDDING_MODEL": NO_MODEL, "KB_DATABASE_URL": settings.database_url,
           "KB_MILVUS_URI": settings.milvus_uri}
    kb = open_knowledge_base(settings, load_model=False)
    try:
        started = time.perf_counter()
        report = kb.documents.reconcile()
        reconcile_s = time.perf_counter() - started
        rng = random.Random(5)
        for _ in range(calls):  # a mix of exact, ambiguous and missing queries
            keywords = corpus.keywords[rng.randrange(len(corpus.keywords))]
            kb.lookup_knowledge(rng.choice([keywords[0], keywords[-1], f"如何处理 {rng.randint(0, 10**6)} 问题"]))
        kb.calls.flush()
        indexed = kb.status().counts.database
    finally:
        kb.close()
    entry = workdir / "pages_entry.py"
    entry.write_text("import runpy\n"
                     f"runpy.run_path({str(REPO / 'app.py')!r}, run_name='__main__')\n", encoding="utf-8")
    out = workdir / "pages_timing.json"
    # a document the timing process reconciles before each "after a write" rerun (see render_timing.py)
    touched = next(iter(sorted((root / "knowledge_base").rglob("*.md"))))
    done = subprocess.run([sys.executable, str(TIMING_SCRIPT), str(entry), str(out), str(runs), str(touched)],
                          env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(
                              [str(REPO), os.environ.get("PYTHONPATH", "")])},
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"render timing failed: {done.stderr[-2000:]}")
    timing = json.loads(out.read_text(encoding="utf-8"))
    log.info("pages: %d documents indexed (%d failed) in %.0f s", indexed, len(report.failed), reconcile_s)
    # `sync_s` keeps its name for benchmarks/make_docs.py (the reconcile replaced the sync)
    return {"documents": indexed, "tool_calls": calls, "generate_s": round(generate_s, 1),
            "sync_s": round(reconcile_s, 1), "goal_s": PAGE_GOAL_S, **timing}


def render_pages(r: dict[str, Any]) -> list[str]:
    if "skipped" in r:
        return ["", f"page renders: skipped ({r['skipped']})"]
    after_write = r.get("uncached_by") == "write"
    lines = ["", f"Page renders (Streamlit AppTest, app.py's navigation and sidebar) at {r['documents']:,} documents "
             f"and {r['tool_calls']} logged tool calls; first open of the knowledge base {r['first_open_s']:.1f} s",
             f"| page | first render | median of {r['runs']} reruns | max | "
             + ("same reruns, right after a write |" if after_write else "same reruns, cache off |"),
             "|---|---|---|---|---|"]
    for name, p in r["pages"].items():
        lines.append(f"| {name} | {p['first_s']:.2f} s | {p['median_s']:.2f} s | {p['max_s']:.2f} s | "
                     f"{p['uncached_median_s']:.2f} s |")
    worst = max(p["median_s"] for p in r["pages"].values())
    lines.append(f"goal: every page <= {r['goal_s']:.0f} s after the first open: "
                 f"{'met' if worst <= r['goal_s'] else 'NOT met'} (slowest median {worst:.2f} s); corpus generated "
                 f"in {r['generate_s']:.0f} s, reconciled in {r['sync_s']:.0f} s")
    return lines
