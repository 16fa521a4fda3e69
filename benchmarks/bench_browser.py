"""What a curator waits for in a real browser: `python -m benchmarks.bench_browser [--docs 1000] [--runs 7]`.

It generates N documents with the page benchmark's corpus (benchmarks/common.py, small bodies), reconciles them
(BM25 only, no model) in this process, closes them, then starts `streamlit run app.py` over them on a free port
(as tests/support/servers.py's `streamlit_server` does: the console's own .streamlit/config.toml, headless, the file
watcher off so that an edit in the checkout cannot put a "Rerun" prompt in the status widget) and drives
Debian's Chromium through playwright:

- a `?doc=<category/file.md>` link opened in a new tab (a new Streamlit session; the browser has loaded the
  console before, so its scripts are cached; the very first open, cold server and cold browser, is reported
  apart): the load event, the document's inspector visible (its title and its "Raw file" tab), and settled
  (the script run ended and the sidebar's status drawn, the last thing every page renders);
- playground round trips: a query typed into "Query" and "Look up" pressed, until the new answer's "Why"
  caption (its new request id) is shown and the run has ended. The server side is the lookup's own `total`
  from that caption (what `lookup_knowledge` took in the server, the same run); "beyond the lookup" is the
  round trip minus it. An L0 query (a document's exact keyword) and an L1 question (no keyword) alternate.
- for both, the page's script run: from its "running" to its "notRunning" state as the browser learns of them.

Every wait is a condition polled on each animation frame in the page, never a fixed sleep. The server is
stopped (its whole process group) at the end and on errors.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import NO_MODEL, REPO, bench_settings, generate_corpus, machine, publish
from kb_core import open_knowledge_base

RESULTS = REPO / "docs" / "bench-browser-results.json"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's: playwright never downloads a browser of its own
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # the tests'
VIEWPORT = {"width": 1400, "height": 1000}
TIMEOUT_MS = 180_000  # a busy 2-core machine
GOAL_LINK_S, GOAL_BEYOND_S = 3.0, 1.0  # our goals: a `?doc=` link settled, a round trip beyond the lookup
STALE_ENV = ("KB_DATABASE_URL", "KB_MILVUS_URI", "KB_BASE_PATH", "KB_CONFIG")  # would name another KB
# Questions without any keyword of the corpus, in the words of its bodies: L1 (BM25) answers them
QUESTIONS = ["When should I page the on-call owner?",
             "Where is the relation between the slow query and the memory leak described?",
             "Which dashboard should I check first?"]

# -- conditions checked in the page on every animation frame --------------------------------------------------
# The run has ended when the app's script-run state (the `data-test-script-state` attribute of stApp, which
# Streamlit's own browser tests read) is "notRunning". Its running indicator (stStatusWidget, what the tests
# wait on) is no use for timing: it appears only after a run has lasted 500 ms and fades out for 200 ms more.
_IDLE = "document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'"
_SETTLED = f"""() => {_IDLE} && [...document.querySelectorAll('[data-testid=stSidebar] :is(h1, h2, h3)')]
  .some(h => h.innerText.trim() === 'Status')"""
_INSPECTOR = """(title) => { const main = document.querySelector('[data-testid=stMain]');
  return !!main && [...main.querySelectorAll('h3')].some(h => h.innerText.includes(title))
    && [...main.querySelectorAll('[role=tab]')].some(t => t.innerText.includes('Raw file')); }"""
# the playground's "Why" caption: "request <id> · l0 … ms · … · total … ms", a new id for every run
_WHY = """[...document.querySelectorAll('[data-testid=stMain] [data-testid=stCaptionContainer]')]
  .map(e => e.innerText).find(t => t.startsWith('request '))"""
_NEW_ANSWER = f"(previous) => {{ const why = {_WHY}; return why && why !== previous ? why : false; }}"
# In every page: the script-run state's changes with their time on the page's clock, sampled on each frame, so
# that the server's script run (from "running" to "notRunning", as the browser learns of them) can be told apart
# from what comes before it (loading, connecting, sending the form) and after it (drawing).
_RECORDER = """window.__states = []; const sample = () => {
  const state = document.querySelector('[data-testid=stApp]')?.dataset.testScriptState;
  if (state && state !== window.__states.at(-1)?.[1]) window.__states.push([performance.now(), state]);
  requestAnimationFrame(sample); }; requestAnimationFrame(sample);"""
_RUN_S = """(since) => { const states = window.__states.filter(([t]) => t >= since);
  const start = states.find(([, s]) => s === 'running'), end = states.findLast(([, s]) => s === 'notRunning');
  return start && end && end[0] > start[0] ? (end[0] - start[0]) / 1000 : null; }"""


def build(root: Path, docs: int, runs: int) -> dict[str, Any]:
    """The knowledge base (as the page benchmark builds it), the documents to link and the queries to ask,
    each checked to be answered as intended (L0 exact for the keyword, L1 alone for the question)."""
    corpus = generate_corpus(root, docs, seed=31, min_kb=1, max_kb=3)
    rng = random.Random(3)
    # a page of its own (not a bilingual pair: i % 10 in (8, 9) share their keywords), so one exact answer
    picks = rng.sample([i for i in range(len(corpus.keywords)) if i % 10 < 8], runs)
    links = []
    for i in picks:
        path = next((root / "knowledge_base").glob(f"*/doc-{i:05d}.md"))
        title = re.search(r"^title: (.*)$", path.read_text(encoding="utf-8"), re.M).group(1).strip()
        links.append({"doc": f"{path.parent.name}/{path.name}", "title": title})
    queries = {"L0 keyword": [corpus.keywords[i][0] for i in picks],
               "L1 question": [QUESTIONS[k % len(QUESTIONS)] for k in range(runs)]}
    kb = open_knowledge_base(bench_settings(root, embedding_fallback="none"), load_model=False)
    try:
        started = time.perf_counter()
        report = kb.documents.reconcile()
        reconcile_s = time.perf_counter() - started
        for kind, asked in queries.items():
            for query in dict.fromkeys(asked):
                answer = kb.lookup_knowledge(query)
                primary = answer.get("primary") or {}
                ok = primary.get("matchType") == "exact_L0" if kind == "L0 keyword" else \
                    not primary and answer.get("supplement")
                if not ok:
                    raise RuntimeError(f"{kind} {query!r} is not answered as intended: {answer}")
        indexed = kb.status().counts.database
    finally:
        kb.close()
    if report.failed:
        raise RuntimeError(f"reconcile failed for {len(report.failed)} documents: {report.failed[:3]}")
    return {"documents": indexed, "reconcile_s": round(reconcile_s, 1), "links": links, "queries": queries}


@contextlib.contextmanager
def serve(root: Path, log: Path) -> Iterator[str]:
    """`streamlit run app.py` over `root` on a free port; its URL once the health check answers. Stopped on the
    way out, even on errors: SIGTERM, then SIGKILL for its whole process group (nothing it started outlives it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = bench_settings(root)
    env = {k: v for k, v in os.environ.items() if k not in STALE_ENV}
    env.update(KB_APP_ROOT=str(root), KB_EMBEDDING_MODEL=NO_MODEL, KB_DATABASE_URL=settings.database_url,
               KB_MILVUS_URI=settings.milvus_uri, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               # BM25 only, as the knowledge base was indexed: with the built-in fallback model the server would
               # start re-indexing every document as a job while it is being timed
               KB_EMBEDDING_FALLBACK="none")
    command = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
               "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not come up:\n{log.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        break
            time.sleep(0.2)  # between health checks of a server still starting
        yield f"http://127.0.0.1:{port}"
    except BaseException:
        print(f"streamlit's log, its end:\n{log.read_text(errors='replace')[-3000:]}", file=sys.stderr)
        raise
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def open_link(context, url: str, link: dict[str, str]) -> dict[str, float]:
    """A `?doc=` link in a new tab: seconds to the load event, the inspector shown, the page settled."""
    page = context.new_page()
    try:
        started = time.perf_counter()
        page.goto(f"{url}/documents?doc={link['doc']}", wait_until="load")
        loaded = time.perf_counter()
        page.wait_for_function(_INSPECTOR, arg=link["title"], polling="raf")
        shown = time.perf_counter()
        page.wait_for_function(_SETTLED, polling="raf")
        settled = time.perf_counter()
        run_s = page.evaluate(_RUN_S, 0)
    finally:
        page.close()
    return {"load_s": loaded - started, "run_s": run_s, "inspector_s": shown - started,
            "settled_s": settled - started}


def round_trip(page, query: str) -> dict[str, float]:
    """One "Look up": seconds to the new answer shown, to the run's end, and the server's lookup total."""
    page.get_by_role("textbox", name="Query", exact=True).fill(query)
    previous = page.evaluate(f"() => {_WHY} || null")
    since = page.evaluate("() => performance.now()")
    started = time.perf_counter()
    page.get_by_role("button", name="Look up").click()
    why = page.wait_for_function(_NEW_ANSWER, arg=previous, polling="raf").json_value()
    shown = time.perf_counter()
    page.wait_for_function(_SETTLED, polling="raf")
    idle = time.perf_counter()
    total = re.search(r"total ([\d.]+) ms", why)
    if total is None:
        raise RuntimeError(f"no lookup total in the answer's caption: {why!r}")
    lookup_ms = float(total.group(1))
    return {"answer_s": shown - started, "idle_s": idle - started, "run_s": page.evaluate(_RUN_S, since),
            "lookup_ms": lookup_ms, "beyond_s": idle - started - lookup_ms / 1000}


def _summary(samples: list[dict[str, float | None]]) -> dict[str, Any]:
    summary = {}
    for key in samples[0]:
        values = [s[key] for s in samples if s[key] is not None]  # a script run the page did not see: none
        summary[key] = {"median": round(statistics.median(values), 3), "max": round(max(values), 3)} \
            if values else None
    return summary


def measure(url: str, built: dict[str, Any], runs: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.set_default_timeout(TIMEOUT_MS)
            context.add_init_script(_RECORDER)
            # the server's first session opens the knowledge base; the browser fetches the console's scripts
            first = open_link(context, url, built["links"][0])
            links = [open_link(context, url, link) for link in built["links"]]
            page = context.new_page()
            page.goto(f"{url}/", wait_until="load")
            page.get_by_role("textbox", name="Query", exact=True).wait_for()
            page.wait_for_function(_SETTLED, polling="raf")
            trips: dict[str, list[dict[str, float]]] = {kind: [] for kind in built["queries"]}
            for k in range(runs):  # the kinds alternate, so every answer differs from the one before
                for kind, asked in built["queries"].items():
                    trips[kind].append(round_trip(page, asked[k]))
        finally:
            browser.close()
    return {"first_link": {key: value and round(value, 3) for key, value in first.items()}, "link": _summary(links),
            "round_trip": {kind: _summary(samples) for kind, samples in trips.items()},
            "samples": {"link_settled_s": [round(s["settled_s"], 3) for s in links],
                        **{f"{kind} idle_s": [round(s["idle_s"], 3) for s in samples]
                           for kind, samples in trips.items()}}}


def render_browser(r: dict[str, Any]) -> list[str]:
    """The table (printed by the benchmark, and in docs/performance.md by benchmarks/make_docs.py)."""
    def row(what: str, cell: dict[str, float] | None, goal: str = "", unit: str = "s") -> str:
        if cell is None:
            return f"| {what} | – | – | {goal} |"
        digits = 1 if unit == "ms" else 2
        median, most = (f"{cell[k]:.{digits}f} {unit}" for k in ("median", "max"))
        return f"| {what} | {median} | {most} | {goal} |"

    link, first = r["link"], r["first_link"]
    lines = [f"| at {r['documents']:,} documents, {r['runs']} runs of each | median | max | goal |",
             "|---|---|---|---|",
             row("`?doc=` link: load event", link["load_s"]),
             row("`?doc=` link: the page's script run (server)", link["run_s"]),
             row("`?doc=` link: inspector shown", link["inspector_s"]),
             row("`?doc=` link: settled", link["settled_s"], f"≤ {r['goal_link_s']:g} s")]
    for kind, t in r["round_trip"].items():
        lines += [row(f"{kind}: answer shown", t["answer_s"]), row(f"{kind}: round trip, until idle", t["idle_s"]),
                  row(f"{kind}: the page's script run (server)", t["run_s"]),
                  row(f"{kind}: the lookup itself (server)", t["lookup_ms"], unit="ms"),
                  row(f"{kind}: round trip beyond the lookup", t["beyond_s"], f"≤ {r['goal_beyond_s']:g} s")]
    worst_beyond = max(t["beyond_s"]["max"] for t in r["round_trip"].values())
    met = link["settled_s"]["max"] <= r["goal_link_s"] and worst_beyond <= r["goal_beyond_s"]
    lines += ["", f"Goals {'met' if met else 'NOT met'} (every run within them). The very first link, on a fresh "
              f"server and a fresh browser: settled in {first['settled_s']:.2f} s (load event {first['load_s']:.2f} "
              f"s, script run {first['run_s'] or 0:.2f} s). Load average {r['load'][0]} before, {r['load'][1]} after."]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_browser", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7, help="links opened and round trips of each kind")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    load_before = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="kb-bench-browser-"))
    try:
        print(f"generating and reconciling {args.docs:,} documents ...", file=sys.stderr)
        built = build(workdir / "root", args.docs, args.runs)
        print("timing in chromium ...", file=sys.stderr)
        with serve(workdir / "root", workdir / "streamlit.log") as url:
            measured = measure(url, built, args.runs)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report = {"machine": machine(), "command": "python -m benchmarks.bench_browser " + " ".join(
        sys.argv[1:] if argv is None else argv), "date": datetime.date.today().isoformat(),
        "load": [round(load_before, 1), round(os.getloadavg()[0], 1)], "documents": built["documents"],
        "reconcile_s": built["reconcile_s"], "runs": args.runs, "goal_link_s": GOAL_LINK_S,
        "goal_beyond_s": GOAL_BEYOND_S, **measured}
    return publish(args.json, report, "\n".join(render_browser(report)))


if __name__ == "__main__":
    raise SystemExit(main())
