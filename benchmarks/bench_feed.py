"""Benchmark: several processes on one knowledge base.

    python -m benchmarks.bench_feed [--docs 1000] [--rounds 20] [--json bench-feed.json]   (about a minute)

Prints two tables:
- **lookups with the change feed running**: one process holds two knowledge bases on the same database, folder
  and Milvus: one follows the change feed (`KB_REFRESH_INTERVAL=1`), one does not (`0`, a single process).
  L0-unique lookups alternate between them in blocks, so both are measured side by side under the same load:
  first while nothing is written, then while another process replaces a document five times a second (each
  replace reaches the following knowledge base through the feed and swaps its L0 snapshot). How far each one
  followed is read from outside: the revision of the replaced document its L0 holds (`KnowledgeBase.l0_entry`).
- **visibility across processes**: another process uploads a document with a new keyword; the time from its
  upload returning (committed) until this process's L0 answers the keyword with confidence high.

Both processes share a SQLite database and a `milvus-lite server` (the setup of one machine, several processes).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks.common import NO_MODEL, generate_corpus, publish, stats
from kb_core import KnowledgeBase, load_settings, open_knowledge_base
from kb_core.console import percentile
from kb_core.testing import milvus_lite_server

CHURNED = "knowledge_base/ops/churn.md"  # the document the writer replaces; revision n has the keyword CHURN<n>

# The other process: `new <i>` uploads a document with keyword FEEDNEW<i> and answers with the time its upload
# returned; `churn` replaces one document five times a second until stdin closes.
_WRITER = textwrap.dedent("""
    import json, sys, threading, time
    from kb_core import load_settings, open_knowledge_base
    kb = open_knowledge_base(load_settings(**json.loads(sys.argv[1])), load_model=False)
    def doc(keyword, body):
        return f"---\\ntitle: {keyword} notes\\nkeywords: [{keyword}]\\n---\\n# {keyword}\\n\\n{body}\\n".encode()
    churning = threading.Event()
    def churn():
        n = 0
        while churning.is_set():
            n += 1
            kb.documents.upload("churn.md", doc(f"CHURN{n:06d}", f"revision {n}"), "ops")
            time.sleep(0.2)
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "new":
            kb.documents.upload(f"feed-new-{arg}.md", doc(f"FEEDNEW{arg}", "a document written by another process"),
                                "ops")
            print(json.dumps({"done": time.time()}), flush=True)
        elif command == "churn":
            churning.set()
            threading.Thread(target=churn, daemon=True).start()
            print("churning", flush=True)
        elif command == "stop":
            churning.clear()
            time.sleep(0.3)
            print("stopped", flush=True)
    kb.close()
""")


# A looking process: opens the knowledge base (feed on or off), then on `go` times L0 lookups of the given
# queries for the given seconds and prints the samples' p50/p99, and how many revisions of the churned document
# its L0 moved through meanwhile. Two of them at once, one per setting, show what applying the feed costs a
# process's own lookups (in one process the two would share one interpreter lock).
_LOOKER = textwrap.dedent("""
    import json, statistics, sys, time
    from kb_core import load_settings, open_knowledge_base
    from kb_core.console import percentile
    config = json.loads(sys.argv[1])
    kb = open_knowledge_base(load_settings(**config["settings"]), load_model=False)
    def revision():
        entry = kb.documents.entry(config["churned"])
        return int(entry.keywords[0].removeprefix("CHURN")) if entry is not None else 0
    queries = config["queries"]
    for q in queries[:50]:
        kb.lookup(q)
    print("ready", flush=True)
    sys.stdin.readline()
    samples, ended, first = [], time.monotonic() + config["seconds"], revision()
    while time.monotonic() < ended:
        for q in queries:
            started = time.perf_counter_ns()
            kb.lookup(q)
            samples.append((time.perf_counter_ns() - started) / 1e6)
    print(json.dumps({"p50_ms": round(statistics.median(samples), 4), "p99_ms": round(percentile(samples, 99), 4),
                      "n": len(samples), "applied": revision() - first}), flush=True)
    kb.close()
""")


def churn_revision(kb: KnowledgeBase) -> int:
    """The revision of the churned document this knowledge base's L0 holds (0: none yet), read from outside."""
    entry = kb.documents.entry(CHURNED)
    return int(entry.keywords[0].removeprefix("CHURN")) if entry is not None else 0


def _in_two_processes(base: dict[str, Any], queries: list[str], seconds: float) -> dict[str, dict[str, float]]:
    """Lookups timed at the same moment in two processes, one following the feed and one not."""
    lookers = {}
    for name, interval in (("single process (feed off)", 0), ("feed running (1 s)", 1.0)):
        config = {"settings": {**base, "refresh_interval": interval}, "queries": queries, "seconds": seconds,
                  "churned": CHURNED}
        lookers[name] = subprocess.Popen([sys.executable, "-c", _LOOKER, json.dumps(config)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
    for looker in lookers.values():
        if looker.stdout.readline().strip() != "ready":
            raise RuntimeError("a looking process did not start")
    for looker in lookers.values():
        looker.stdin.write("go\n")
        looker.stdin.flush()
    results = {name: json.loads(looker.stdout.readline()) for name, looker in lookers.items()}
    for looker in lookers.values():
        looker.stdin.close()
        looker.wait(timeout=60)
    return results


def _unique_queries(kb: Any, corpus: Any, count: int) -> list[str]:
    """Error codes claimed by exactly one document (the bilingual pairs share theirs): the L0-unique path."""
    queries = []
    for keywords in corpus.keywords:
        result = kb.lookup(keywords[0])
        if result.primary is not None and result.primary.confidence == "high" and result.trace.l0_count == 1:
            queries.append(keywords[0])
        if len(queries) == count:
            break
    if len(queries) < count // 2:
        raise RuntimeError(f"only {len(queries)} L0-unique queries in the corpus")
    return queries


def _side_by_side(kbs: dict[str, Any], queries: list[str], blocks: int,
                  min_seconds: float = 0.0) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {name: [] for name in kbs}
    order = list(kbs)
    phase_started, block = time.monotonic(), -1
    while (block := block + 1) < blocks or time.monotonic() - phase_started < min_seconds:
        for name in (order if block % 2 == 0 else order[::-1]):
            lookup = kbs[name].lookup
            for query in queries:
                started = time.perf_counter_ns()
                result = lookup(query)
                samples[name].append((time.perf_counter_ns() - started) / 1e6)
                if result.primary is None or result.primary.confidence != "high":
                    raise RuntimeError(f"{query!r} lost its unique L0 answer in {name}")
    return {name: stats(values) for name, values in samples.items()}


class _Writer:
    def __init__(self, settings: dict[str, Any]):
        self._process = subprocess.Popen([sys.executable, "-c", _WRITER, json.dumps(settings)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._expect("ready")

    def _expect(self, word: str) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith(word) and not line.startswith("{"):
            raise RuntimeError(f"writer process said {line!r}, expected {word!r}")
        return line

    def send(self, command: str, expect: str) -> str:
        assert self._process.stdin is not None
        self._process.stdin.write(command + "\n")
        self._process.stdin.flush()
        return self._expect(expect)

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=60)


def bench_feed(workdir: Path, *, docs: int = 1000, rounds: int = 20, queries: int = 200,
               blocks: int = 10, seconds: float = 15.0) -> dict[str, Any]:
    corpus = generate_corpus(workdir, docs, seed=31, min_kb=1, max_kb=4)
    with milvus_lite_server(workdir / "milvus.db") as uri:
        base = {"app_root": str(workdir), "database_url": f"sqlite:///{workdir}/kb.sqlite3", "milvus_uri": uri,
                "embedding_model": NO_MODEL, "watch": False}
        # no reconcile: the timed lookups are L0 answers, which need only the folder scan
        following = open_knowledge_base(load_settings(**base, refresh_interval=1.0), load_model=False)
        single = open_knowledge_base(load_settings(**base, refresh_interval=0), load_model=False)
        writer = _Writer({**base, "refresh_interval": 0})
        try:
            kbs = {"single process (feed off)": single, "feed running (1 s)": following}
            unique = _unique_queries(single, corpus, queries)
            _side_by_side(kbs, unique[:50], 1)  # warm both
            idle = _side_by_side(kbs, unique, blocks, min_seconds=seconds)
            writer.send("churn", "churning")
            time.sleep(1.5)
            if churn_revision(following) == 0:
                raise RuntimeError(f"{CHURNED} did not reach the following knowledge base within 1.5 s")
            revision = churn_revision(following)
            writing = _side_by_side(kbs, unique, blocks, min_seconds=seconds)
            applied_while_writing = churn_revision(following) - revision
            apart = _in_two_processes(base, unique, seconds)
            writer.send("stop", "stopped")
            if applied_while_writing <= 0:
                raise RuntimeError("the following knowledge base applied no change while the other process wrote")
            visible: list[float] = []
            rng = random.Random(3)
            for i in range(rounds):
                # a random pause first: uploads sent right after the previous one became visible would all
                # land just after a poll and measure a whole interval each time
                time.sleep(rng.uniform(0, 1.0))
                keyword = f"FEEDNEW{i:04d}"
                done = json.loads(writer.send(f"new {i:04d}", "{"))["done"]
                deadline = time.time() + 30
                while True:
                    result = following.lookup(keyword)
                    if result.primary is not None and result.primary.confidence == "high":
                        visible.append((time.time() - done) * 1000)
                        break
                    if time.time() > deadline:
                        raise RuntimeError(f"{keyword} did not become visible within 30 s")
                    time.sleep(0.005)
        finally:
            writer.close()
            single.close()
            following.close()
    return {
        "docs": docs,
        "lookups_idle": idle,
        "lookups_while_writing": writing,
        "changes_applied_while_writing": applied_while_writing,
        "lookups_while_writing_two_processes": apart,
        "visibility_ms": {"p50": round(statistics.median(visible), 1), "p99": round(percentile(visible, 99) or 0, 1),
                          "max": round(max(visible), 1), "rounds": rounds},
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"## Lookups with the change feed running ({report['docs']:,} documents, L0-unique queries, "
             "side by side in one process)", "",
             "| phase | single process p50 / p99 (ms) | feed running p50 / p99 (ms) | p99 difference (ms) |",
             "|---|---|---|---|"]
    for phase, key in (("nothing written", "lookups_idle"), ("another process writing 5/s", "lookups_while_writing")):
        single, feed = report[key]["single process (feed off)"], report[key]["feed running (1 s)"]
        lines.append(f"| {phase} | {single['p50_ms']:.4f} / {single['p99_ms']:.4f} | "
                     f"{feed['p50_ms']:.4f} / {feed['p99_ms']:.4f} | {feed['p99_ms'] - single['p99_ms']:+.4f} |")
    apart = report["lookups_while_writing_two_processes"]
    single, feed = apart["single process (feed off)"], apart["feed running (1 s)"]
    lines.append(f"| another process writing 5/s; two looking processes at once, one per setting | "
                 f"{single['p50_ms']:.4f} / {single['p99_ms']:.4f} | {feed['p50_ms']:.4f} / {feed['p99_ms']:.4f} | "
                 f"{feed['p99_ms'] - single['p99_ms']:+.4f} |")
    v = report["visibility_ms"]
    lines += ["", f"While the other process wrote, the following knowledge base's L0 moved through "
              f"{report['changes_applied_while_writing']} revisions of the replaced document in one process and "
              f"{feed['applied']} in its own process (the feed-off one: {single['applied']}; each change re-reads the "
              "file and swaps in a new L0 snapshot).",
              "", "## Visibility across processes (upload committed in one process -> L0 answers it in another)", "",
              "| rounds | p50 (ms) | p99 (ms) | max (ms) |", "|---|---|---|---|",
              f"| {v['rounds']} | {v['p50']} | {v['p99']} | {v['max']} |"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_feed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20, help="uploads timed for visibility")
    parser.add_argument("--queries", type=int, default=200, help="L0-unique queries per block")
    parser.add_argument("--blocks", type=int, default=10, help="alternating blocks per phase (at least)")
    parser.add_argument("--seconds", type=float, default=15.0, help="each phase lasts at least this long")
    parser.add_argument("--json", type=Path, default=Path("bench-feed.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with tempfile.TemporaryDirectory(prefix="kb-bench-feed-") as workdir:
        report = bench_feed(Path(workdir), docs=args.docs, rounds=args.rounds, queries=args.queries,
                            blocks=args.blocks, seconds=args.seconds)
    return publish(args.json, report, render(report))


if __name__ == "__main__":
    sys.exit(main())
