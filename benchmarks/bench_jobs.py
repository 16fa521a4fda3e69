"""Lookups while a job runs: `python -m benchmarks.bench_jobs [--docs 1000] [--queries 100] [--rounds 16]
[--rate 40]`.

The goal: a running job slows lookups by at most 20 % at p99. This generates a corpus
(benchmarks.common.generate_corpus), indexes it, and times `lookup_knowledge` (the agent tool: L0, and L1 when
L0 has no unique answer) over a fixed query mix in two places: in the knowledge base's own process, where the
job's worker thread runs (the console's playground; the worst case: they share one interpreter), and in another
process on the same knowledge base (an agent or `kb mcp`: where agents' lookups run). Rounds alternate between
idle and with *Re-index all* running (a job started through `start_job`, cancelled after the round), so a drift
of the machine's load hits both sides alike. Lookups arrive at `--rate` per second, as agents' calls do (a
closed loop of back-to-back lookups would starve the job instead of measuring beside it); each is timed from
its start. It prints medians and p99 side by side, how many documents the job re-indexed meanwhile, and writes
the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, bench_settings, generate_corpus, machine, publish, query_mix, stats
from kb_core import JobState, open_knowledge_base

RESULTS = Path("bench-jobs-results.json")
KINDS = ("keyword", "in sentence", "partial", "miss")  # unique L0 answers, and queries L1 answers
BUDGET = 1.20  # p99 with a job running, at most this times the idle p99
PLACES = ("same process", "another process")


def paced(kb: Any, queries: list[str], rate: float) -> list[float]:
    """Each query's latency in ms, one started every 1/rate seconds (or at once after a slower one)."""
    samples = []
    interval = 1.0 / rate
    due = time.perf_counter()
    for query in queries:
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        started = time.perf_counter_ns()
        kb.lookup_knowledge(query, caller="bench")
        samples.append((time.perf_counter_ns() - started) / 1e6)
        due += interval
    return samples


def agent(root: Path) -> None:
    """The other process: open the knowledge base, then time the queries each stdin line names (JSON)."""
    kb = open_knowledge_base(bench_settings(root), load_model=False)
    print("ready", flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        print(json.dumps(paced(kb, ask["queries"], ask["rate"])), flush=True)
    kb.close()


class Agent:
    def __init__(self, root: Path):
        self._process = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_jobs", "--agent", str(root)],
                                         cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        assert self._process.stdout.readline().strip() == "ready", "the agent process did not start"

    def paced(self, queries: list[str], rate: float) -> list[float]:
        self._process.stdin.write(json.dumps({"queries": queries, "rate": rate}) + "\n")
        self._process.stdin.flush()
        return json.loads(self._process.stdout.readline())

    def close(self) -> None:
        self._process.stdin.close()
        self._process.wait(60)


def measure(docs: int, queries: int, rounds: int, rate: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kb-jobs-") as tmp:
        root = Path(tmp)
        corpus = generate_corpus(root, docs, min_kb=2, max_kb=8)
        kb = open_knowledge_base(bench_settings(root), load_model=False)
        other = None
        try:
            started = time.perf_counter()
            kb.documents.reconcile()
            indexed_s = time.perf_counter() - started
            other = Agent(root)
            mix = query_mix(corpus, count=max(1, queries // len(KINDS)))
            asked = [q for kind in KINDS for q in mix[kind]]
            paced(kb, asked, 1000.0)  # warm caches
            other.paced(asked, 1000.0)
            samples: dict[tuple[str, str], list[float]] = {(p, s): [] for p in PLACES for s in ("idle", "busy")}
            progress: list[int] = []
            for _ in range(rounds):
                samples[PLACES[0], "idle"] += paced(kb, asked, rate)
                samples[PLACES[1], "idle"] += other.paced(asked, rate)
                job = kb.jobs.start("reindex_all")
                while (seen := kb.jobs.get(job.id)).state == JobState.QUEUED or seen.done < 1:  # under way
                    time.sleep(0.05)
                samples[PLACES[0], "busy"] += paced(kb, asked, rate)
                samples[PLACES[1], "busy"] += other.paced(asked, rate)
                still = kb.jobs.get(job.id)
                assert still.state == JobState.RUNNING, f"the re-index ended before the round did: {still}"
                progress.append(still.done - seen.done)
                kb.jobs.cancel(job.id)
                kb.jobs.wait(job.id, 600)
            kb.calls.flush(30)
        finally:
            if other is not None:
                other.close()
            kb.close()
    places = {}
    for place in PLACES:
        quiet, loaded = stats(samples[place, "idle"]), stats(samples[place, "busy"])
        places[place] = {"idle": quiet, "reindex_running": loaded,
                         "p50_ratio": round(loaded["p50_ms"] / quiet["p50_ms"], 3),
                         "p99_ratio": round(loaded["p99_ms"] / quiet["p99_ms"], 3),
                         "budget_met": loaded["p99_ms"] <= BUDGET * quiet["p99_ms"]}
    return {"documents": docs, "queries_per_round": len(asked), "rounds": rounds, "rate_per_s": rate,
            "index_s": round(indexed_s, 1), "places": places, "documents_reindexed_per_round": progress,
            "budget_p99_ratio": BUDGET, "load_average": list(os.getloadavg())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100, help="lookups per round, place and side")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--rate", type=float, default=40.0, help="lookups started per second")
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("--agent", type=Path, help=argparse.SUPPRESS)  # the other process (internal)
    args = parser.parse_args(argv)
    if args.agent is not None:
        agent(args.agent)
        return 0
    r = measure(args.docs, args.queries, args.rounds, args.rate)
    table = [f"lookup_knowledge on {r['documents']:,} documents: {r['rounds']} rounds of {r['queries_per_round']} "
             f"lookups per place and side ({', '.join(KINDS)}) at {r['rate_per_s']:g}/s",
             "", "| lookups in | | idle | Re-index all running | ratio |", "|---|---|---|---|---|"]
    for place, row in r["places"].items():
        table += [f"| {place} | median | {row['idle']['p50_ms']:.2f} ms | {row['reindex_running']['p50_ms']:.2f} ms | "
                  f"{row['p50_ratio']:.2f}× |",
                  f"| {place} | p99 | {row['idle']['p99_ms']:.2f} ms | {row['reindex_running']['p99_ms']:.2f} ms | "
                  f"{row['p99_ratio']:.2f}× |"]
    met = ", ".join(f"{place}: {'met' if row['budget_met'] else 'NOT met'}" for place, row in r["places"].items())
    table += ["", f"{r['places'][PLACES[0]]['idle']['n']} lookups per cell; documents re-indexed during each busy "
                  f"round: {r['documents_reindexed_per_round']}",
              f"budget p99 ≤ {BUDGET:.2f}× idle: {met}; load average "
              f"{', '.join(f'{x:.2f}' for x in r['load_average'])}"]
    return publish(args.json, {"machine": machine(), **r}, "\n".join(table))


if __name__ == "__main__":
    raise SystemExit(main())
