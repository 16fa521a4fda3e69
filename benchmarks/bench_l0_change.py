"""One applied change to L0, before and after deltas: `python -m benchmarks.bench_l0_change [--docs 10000 100000]`.

For each size, an L0 index over `common.corpus_entries(N)` (the benchmark corpus's keywords as entries in
memory: no files, so 100,000 documents fit in a short run; every tenth document is a translation) is built
once with `bulk()`. Then, in one run and in alternating blocks on the same index:

- **before**: `delta_limit = 0`, every change rebuilds the whole snapshot (the index before deltas);
- **after**: the default, every change swaps in a delta (`keyword_delta.DeltaSnapshot`) and a background
  thread folds the delta into a full snapshot once it holds `DELTA_LIMIT` changes (or changes settle).

Each change is one `add()` of a new document, one `add()` replacing a document with other keywords, or one
`remove()`, in turn. Reported per kind: wall time and the writer thread's CPU time (what other work on a
shared machine does not inflate), p50 / p99. The after blocks run past `DELTA_LIMIT`, so one background fold
runs while changes go on.

Then L0 matching at the largest size with a delta of 0 and of `DELTA_LIMIT - 1` changes (the most a delta
holds before it is folded), alternating blocks: what a lookup asks of L0 (`match()`, the first hit, its
ties, `group_count()`, `versions()` of the first hit), per query class of `common.query_mix`; and whether every
answer with the delta equals the answer of the same entries built in full.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import corpus_entries, machine, percentile_of, publish, query_mix
from kb_core import KnowledgeIndex

RESULTS = Path("bench-l0-change-results.json")
BUDGET_CHANGE_MS = 5.0  # our budget: an applied change at 100,000 documents
BUDGET_L0_P99_MS = 0.5  # our budget: L0 p99 per query class
KINDS = ("add new", "replace", "remove")


def _ms(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples), 3), "p99_ms": round(percentile_of(samples, 99), 3),
            "n": len(samples)}


class _Changes:
    """The stream of changes: a new document, a replaced one, a removed one, in turn."""

    def __init__(self, index: KnowledgeIndex, entries: list[Any], seed: int = 5):
        self._index, self._entries, self._rng = index, entries, random.Random(seed)
        self._live = [e.file_path for e in entries]
        self._n = 0

    def entry_for(self, kind: str) -> Any:
        """The next new document ("add new") or a live document with its last keyword changed ("replace")."""
        self._n += 1
        if kind == "add new":
            model = self._entries[self._rng.randrange(len(self._entries))]
            entry = model.replace(file_path=f"knowledge_base/new/change-{self._n}.md", group="",
                            keywords=(f"ERR_NEW_{self._n:06d}", *model.keywords[1:]))
            self._live.append(entry.file_path)
            return entry
        current = self._index.get(self._live[self._rng.randrange(len(self._live))])
        assert current is not None
        return current.replace(keywords=(*current.keywords[:-1], f"EDITED_{self._n:06d}"))

    def one(self, kind: str) -> tuple[float, float]:
        """Apply one change of `kind`; (wall ms, thread CPU ms)."""
        index = self._index
        if kind == "remove":
            path = self._live.pop(self._rng.randrange(len(self._live)))
            apply: Callable[[], Any] = lambda: index.remove(path)  # noqa: E731
        else:
            entry = self.entry_for(kind)
            apply = lambda: index.add(entry)  # noqa: E731
        wall, cpu = time.perf_counter(), time.thread_time()
        apply()
        return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000


def measure_changes(n: int, before_each: int, after_each: int, rounds: int) -> dict[str, Any]:
    corpus, entries = corpus_entries(n)
    index = KnowledgeIndex("knowledge_base", app_root=Path(tempfile.mkdtemp(prefix="kb-l0-change-")))
    index.settle = 3600.0  # folded when a block ends (or, in the third mode, while the changes go on)
    started = time.perf_counter()
    with index.bulk():
        for entry in entries:
            index.add(entry)
    build = time.perf_counter() - started
    changes = _Changes(index, entries)
    modes = ("before", "after", "after, a fold running")
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        mode: {kind: {"wall": [], "cpu": []} for kind in KINDS} for mode in modes}
    fold_s: list[float] = []
    for _ in range(rounds):  # alternating blocks: the machine's noise falls on every mode
        for mode in modes:
            index.delta_limit = 0 if mode == "before" else KnowledgeIndex.DELTA_LIMIT
            folding = None
            if mode == "after, a fold running":  # the changes go on while a background rebuild runs
                index.add(changes.entry_for("add new"))
                folding = threading.Thread(target=index.compact)
                fold_started = time.perf_counter()
                folding.start()
            count = before_each if mode == "before" else min(after_each, (KnowledgeIndex.DELTA_LIMIT - 2) // 3)
            for i in range(count * len(KINDS)):
                if folding is not None and i >= len(KINDS) and not folding.is_alive():
                    break  # (each kind timed at least once, however short the fold)
                kind = KINDS[i % len(KINDS)]
                wall, cpu = changes.one(kind)
                samples[mode][kind]["wall"].append(wall)
                samples[mode][kind]["cpu"].append(cpu)
            if folding is not None:
                folding.join()
                fold_s.append(time.perf_counter() - fold_started)
            index.compact()
    rows = []
    for kind in KINDS:
        row: dict[str, Any] = {"documents": n, "change": kind}
        for mode in modes:
            row[mode] = {"wall": _ms(samples[mode][kind]["wall"]), "cpu": _ms(samples[mode][kind]["cpu"])}
        rows.append(row)
    return {"documents": n, "keywords": sum(len(e.keywords) for e in entries), "build_s": round(build, 2),
            "fold_with_changes_s": round(statistics.median(fold_s), 2), "rows": rows, "queries": query_mix(corpus)}


def _l0(index: KnowledgeIndex) -> Callable[[str], Any]:
    """What a lookup asks of L0: the ranked matches, the first hit, its ties, the pages and the first's versions."""
    def ask(query: str) -> Any:
        matches = index.match(query)
        if not len(matches):
            return 0
        first = matches[0]
        return matches.tied_count(), matches.group_count(), index.versions(first.entry.file_path)
    return ask


def _answers(index: KnowledgeIndex, queries: list[str]) -> list[Any]:
    found = []
    for query in queries:
        matches = index.match(query)
        found.append((len(matches), matches[:5], matches.tied_count(), matches.group_count(),
                      matches.generic_limit, index.exact_match(query)[:20]))
    return found


def measure_matching(n: int, queries: dict[str, list[str]], rounds: int, repeat: int) -> dict[str, Any]:
    _corpus, entries = corpus_entries(n)
    index = KnowledgeIndex("knowledge_base", app_root=Path(tempfile.mkdtemp(prefix="kb-l0-change-")))
    index.settle = 3600.0  # the delta stays until the benchmark folds it
    with index.bulk():
        for entry in entries:
            index.add(entry)
    changes = _Changes(index, entries, seed=9)
    largest = KnowledgeIndex.DELTA_LIMIT - 1
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        d: {c: {"wall": [], "cpu": []} for c in queries} for d in ("0", "max")}
    identical = True
    ask = _l0(index)
    for _ in range(rounds):
        index.compact()
        for delta in ("0", "max"):
            if delta == "max":
                for i in range(largest):
                    changes.one(KINDS[i % len(KINDS)])
                assert index.view.delta_size == largest
            for cls, qs in queries.items():
                for _ in range(repeat):
                    for q in qs:
                        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
                        ask(q)
                        samples[delta][cls]["cpu"].append((time.thread_time_ns() - cpu) / 1e6)
                        samples[delta][cls]["wall"].append((time.perf_counter_ns() - wall) / 1e6)
        every = [q for qs in queries.values() for q in qs]
        with_delta = _answers(index, every)
        index.compact()
        identical &= with_delta == _answers(index, every)

    def summary(found: dict[str, list[float]]) -> dict[str, Any]:
        return {"wall": _ms(found["wall"]), "cpu": _ms(found["cpu"])}

    classes = [{"class": cls, "delta_0": summary(samples["0"][cls]), "delta_max": summary(samples["max"][cls])}
               for cls in queries]
    everything = {d: summary({k: [s for cls in queries for s in samples[d][cls][k]] for k in ("wall", "cpu")})
                  for d in ("0", "max")}
    return {"documents": n, "delta_max": largest, "classes": classes, "all": everything,
            "answers_identical": identical}


def _pair(stats: dict[str, Any], digits: int = 2) -> str:
    return f"{stats['p50_ms']:.{digits}f} / {stats['p99_ms']:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--after", type=int, default=84, help="changes of each kind per block, after (at most "
                        "what a delta holds)")
    parser.add_argument("--before", type=int, nargs="+", default=[10, 3],
                        help="changes of each kind per block, before (one number per --docs size)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating blocks")
    parser.add_argument("--repeat", type=int, default=5, help="passes over the queries per matching block")
    parser.add_argument("--json", type=Path, default=RESULTS)
    given = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(given)
    before = args.before + [args.before[-1]] * (len(args.docs) - len(args.before))
    sizes = [measure_changes(n, b, args.after, args.rounds) for n, b in zip(args.docs, before, strict=True)]
    matching = [measure_matching(size["documents"], size.pop("queries"), args.rounds, args.repeat)
                for size in sizes]
    report = {"machine": machine(), "command": " ".join(["python -m benchmarks.bench_l0_change", *given]),
              "delta_limit": KnowledgeIndex.DELTA_LIMIT, "changes": sizes, "matching": matching}
    modes = ("before", "after", "after, a fold running")
    table = ["One applied change, ms p50 / p99 (wall; writer thread CPU):", "",
             "| documents | change | " + " | ".join(f"{m}: wall | CPU" for m in modes) + " | speed-up (CPU p50) |",
             "|---|---|" + "---|---|" * len(modes) + "---|"]
    for size in sizes:
        for row in size["rows"]:
            cells = [f"{_pair(row[m]['wall'])} (n={row[m]['wall']['n']}) | {_pair(row[m]['cpu'])}" for m in modes]
            speedup = row["before"]["cpu"]["p50_ms"] / max(row["after"]["cpu"]["p50_ms"], 1e-3)
            table.append(f"| {row['documents']:,} | {row['change']} | " + " | ".join(cells) + f" | {speedup:,.0f}x |")
    for m in matching:
        table += ["", f"L0 at {m['documents']:,} documents, a delta of 0 and of {m['delta_max']} changes (ms, p50 / "
                  "p99, wall and thread CPU; answers with the delta identical to a full build: "
                  f"{'yes' if m['answers_identical'] else 'NO'}):", "",
                  "| class | delta 0: wall | CPU | delta max: wall | CPU |", "|---|---|---|---|---|"]
        for row in [*m["classes"], {"class": "**all**", "delta_0": m["all"]["0"], "delta_max": m["all"]["max"]}]:
            table.append(f"| {row['class']} | {_pair(row['delta_0']['wall'], 3)} | {_pair(row['delta_0']['cpu'], 3)} | "
                         f"{_pair(row['delta_max']['wall'], 3)} | {_pair(row['delta_max']['cpu'], 3)} |")
    table += ["", "Builds with bulk(): " + ", ".join(f"{s['documents']:,} documents {s['build_s']} s" for s in sizes)
              + "; a fold with changes going on: " + ", ".join(f"{s['fold_with_changes_s']} s" for s in sizes)]
    return publish(args.json, report, "\n".join(table))


if __name__ == "__main__":
    raise SystemExit(main())
