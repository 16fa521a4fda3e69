"""L0 open with and without the saved snapshot: `python -m benchmarks.bench_open [--docs 10000 100000]`.

For each size it generates realistic-frontmatter documents (benchmarks.common.generate_corpus), then times, in
one run and alternating: a full scan (no snapshot), an open from a fresh snapshot, and an open after 1 % of the
files changed (in this process); a fresh process from `import kb_core` to an open L0 index, by a full scan and
from the snapshot (what a user waits for); the snapshot's size on disk; L0's memory per 1,000
documents (tracemalloc of the open); and the cost of one applied change (`refresh` of one edited file).
Medians of `--repeat` opens.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks.bench_cold import _PREAMBLE, _worktree
from benchmarks.common import generate_corpus, generate_fixture_shaped, machine, publish
from kb_core import KnowledgeIndex

RESULTS = Path("bench-open-results.json")
SHAPES = {"fixture": " shaped like the fixture's pages"}


def _open(root: Path, snapshot: Path | None) -> tuple[float, KnowledgeIndex]:
    gc.collect()
    started = time.perf_counter()
    index = KnowledgeIndex("knowledge_base", app_root=root, snapshot_path=snapshot)
    index.load()
    return time.perf_counter() - started, index


_RSS_PROBE = """
import ctypes, gc, sys
from pathlib import Path
import psutil
from kb_core import KnowledgeIndex
process = psutil.Process()
gc.collect()
before = process.memory_info().rss
index = KnowledgeIndex("knowledge_base", app_root=Path(sys.argv[1]), snapshot_path=Path(sys.argv[2]))
index.load()
gc.collect()
ctypes.CDLL("libc.so.6").malloc_trim(0)  # what the open left behind, not the allocator's free lists
print(process.memory_info().rss - before)
"""


def _rss_growth(root: Path, snapshot: Path) -> int:
    """The resident memory an open from the snapshot adds to a fresh process (what a process pays, allocator
    and C structures included; tracemalloc sees Python's allocations only)."""
    done = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(root), str(snapshot)], check=True,
                          capture_output=True, text=True)
    return int(done.stdout.strip())


_FRESH_OPEN = """
import sys, time
started = time.perf_counter()
from kb_core import load_settings, open_knowledge_base
root = sys.argv[1]
kb = open_knowledge_base(load_settings(app_root=root, l0_snapshot=sys.argv[2], database_url=f"sqlite:///{root}/kb.sqlite3",
                                       milvus_uri=f"{root}/kb_milvus.db", embedding_model="no-such-org/no-such-model",
                                       embedding_fallback="none", watch=False), load_model=False)
print(time.perf_counter() - started)
kb.close()
"""


def _fresh_open(root: Path, snapshot: str) -> float:
    """A fresh process from `import kb_core` to an open knowledge base (database, Milvus Lite, L0): what a user
    who starts a console or an agent waits for. `snapshot` "off": a full scan."""
    done = subprocess.run([sys.executable, "-c", _FRESH_OPEN, str(root), snapshot], check=True,
                          capture_output=True, text=True, timeout=1800)
    return float(done.stdout.split()[-1])


_FRESH_L0 = """
import sys, time
started = time.perf_counter()
# public in every version of kb_core since its first commit, wherever its module lay: another version's code is
# asked the same way (the name loads its own module only, as importing that module did)
from kb_core import KnowledgeIndex
snapshot = None if sys.argv[2] == "off" else sys.argv[2]
index = KnowledgeIndex("knowledge_base", app_root=sys.argv[1], snapshot_path=snapshot)
index.load()
print(time.perf_counter() - started)
if sys.argv[3:] == ["save"]:
    index.close()  # writes this code's own snapshot (another version's format may not be readable)
else:
    index.discard()  # (the snapshot stays as it was: every open below starts from the same files)
"""


def _fresh_l0(root: Path, snapshot: str, code: Path | None = None, *, save: bool = False) -> float:
    """A fresh process from `import kb_core` to an open L0 index (what the cold open of 100,000 pages
    costs, interpreter start-up aside); `snapshot` "off": a full scan (child processes parse, see
    `documents.parallel_scan`). `code`: another version's checkout, imported instead of this one."""
    script = _FRESH_L0 if code is None else _PREAMBLE.format(root=str(code)) + _FRESH_L0
    done = subprocess.run([sys.executable, "-c", script, str(root), snapshot, *(["save"] if save else [])],
                          check=True, capture_output=True, text=True, timeout=1800,
                          **({} if code is None else {"cwd": code}))
    return float(done.stdout.split()[-1])


def measure(n: int, repeat: int, shape: str = "generated", against: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kb-open-") as tmp:
        root = Path(tmp)
        if shape == "fixture":
            generate_fixture_shaped(root / "knowledge_base", n)
        else:
            generate_corpus(root / "knowledge_base", n, min_kb=1, max_kb=4)
        snap = root / "l0.snap"
        _, first = _open(root, snap)
        first.close()
        full, from_snapshot = [], []
        for _ in range(repeat):
            seconds, index = _open(root, None)
            full.append(seconds)
            index.close()
            seconds, index = _open(root, snap)
            from_snapshot.append(seconds)
            index.close()
        files = sorted((root / "knowledge_base").rglob("*.md"))
        for n_edit, path in enumerate(files[:: 100]):  # 1 % edited while no process ran: a keyword and the body
            text = path.read_text(encoding="utf-8")
            text = text.replace("keywords: [", f"keywords: [EDITED_{n_edit}, ", 1) if "keywords: [" in text else \
                text.replace("keywords:\n", f"keywords:\n- EDITED_{n_edit}\n", 1)
            path.write_text(text + "\nedited\n", encoding="utf-8")
        changed, index = _open(root, snap)
        index.compact()  # (what the background rebuild does a moment later)
        index.close()  # the snapshot is whole again: the opens below use it as it is
        tracemalloc.start()
        _, held = _open(root, snap)  # held: what L0 keeps for these documents is still allocated
        gc.collect()  # (the open's garbage is not held)
        current, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        held.close()
        del held
        rss = _rss_growth(root, snap)
        fresh_l0_full, fresh_l0_snapshot, other_full, other_snapshot = [], [], [], []
        other_snap = root / "l0-against.snap"
        if against is not None:
            _fresh_l0(root, str(other_snap), against, save=True)  # its own snapshot, outside the timing
        for _ in range(repeat):  # alternating, each in a fresh process
            fresh_l0_full.append(_fresh_l0(root, "off"))
            fresh_l0_snapshot.append(_fresh_l0(root, str(snap)))
            if against is not None:
                other_full.append(_fresh_l0(root, "off", against))
                other_snapshot.append(_fresh_l0(root, str(other_snap), against))
        _fresh_open(root, str(snap))  # the database and Milvus Lite directory are made once, outside the timing
        fresh = [_fresh_open(root, str(snap)) for _ in range(repeat)]
        fresh_full = [_fresh_open(root, "off") for _ in range(max(1, repeat // 3))]
        target = next(f for f in files[len(files) // 2:] if "\nkeywords:" in f.read_text(encoding="utf-8"))
        per_change = []
        for i in range(max(5, repeat)):
            text = target.read_text(encoding="utf-8")
            text = text.replace("keywords: [", f"keywords: [CHANGE_{i}, ", 1) if "keywords: [" in text else \
                text.replace("keywords:\n", f"keywords:\n- CHANGE_{i}\n", 1)
            target.write_text(text, encoding="utf-8")
            started = time.perf_counter()
            applied = index.refresh(str(Path("knowledge_base") / target.relative_to(root / "knowledge_base")))
            per_change.append(time.perf_counter() - started)
            assert applied, "the edit changed the entry: refresh must apply it"
        index.compact()
        index.close()  # nothing left to write into the folder while it is removed
        return {
            "documents": n,
            "shape": shape,
            "full_scan_s": round(statistics.median(full), 3),
            "snapshot_open_s": round(statistics.median(from_snapshot), 3),
            "snapshot_open_1pct_changed_s": round(changed, 3),
            "ratio": round(statistics.median(full) / statistics.median(from_snapshot), 1),
            "snapshot_mb": round(os.path.getsize(snap) / 1e6, 1),
            "l0_mb_per_1000_docs": round(current / 1e6 / (n / 1000), 2),
            "rss_mb_per_1000_docs": round(rss / 1e6 / (n / 1000), 2),
            "applied_change_ms": round(statistics.median(per_change) * 1000, 2),
            "fresh_process_open_s": round(statistics.median(fresh), 2),
            "fresh_process_full_scan_open_s": round(statistics.median(fresh_full), 2),
            "fresh_process_l0_full_scan_s": round(statistics.median(fresh_l0_full), 2),
            "fresh_process_l0_snapshot_s": round(statistics.median(fresh_l0_snapshot), 2),
            **({} if against is None else {
                "against_l0_full_scan_s": round(statistics.median(other_full), 2),
                "against_l0_snapshot_s": round(statistics.median(other_snapshot), 2)}),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, nargs="+", default=[10_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", choices=["generated", "fixture", "both"], default="generated",
                        help="generated: the benchmark corpus (short frontmatter, 1-4 KB); fixture: copies of the "
                             "evaluation fixture's real documentation pages (headings, licence headers, MDX)")
    parser.add_argument("--against", default=None,
                        help="a commit whose code also opens each tree in fresh processes, alternating (e.g. HEAD~1)")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    shapes = ["generated", "fixture"] if args.shape == "both" else [args.shape]
    with contextlib.ExitStack() as stack:
        other = stack.enter_context(_worktree(args.against)) if args.against else None
        rows = [measure(n, args.repeat, shape, other) for shape in shapes for n in args.docs]
    table = render_open(rows, args.against)
    import datetime

    report = {"machine": machine(), "rows": rows, "against": args.against,
              "command": "python -m benchmarks.bench_open " + " ".join(sys.argv[1:] if argv is None else argv),
              "date": datetime.date.today().isoformat(),
              "load": [round(load_before, 1), round(os.getloadavg()[0], 1)]}
    return publish(args.json, report, "\n".join(table))


def render_open(rows: list[dict[str, Any]], against: str | None) -> list[str]:
    table = ["| documents | full scan | from the snapshot | fresh process, L0 full scan / from the snapshot | "
             "1 % changed | full / snapshot | snapshot file | L0 memory per 1,000 docs (traced / process) | "
             "one applied change | fresh process, whole knowledge base: from the snapshot / full scan |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    table += [f"| {r['documents']:,}{SHAPES.get(r.get('shape', ''), '')} | {r['full_scan_s']:.2f} s | "
              f"{r['snapshot_open_s']:.2f} s | {r['fresh_process_l0_full_scan_s']:.2f} s / "
              f"{r['fresh_process_l0_snapshot_s']:.2f} s | "
              f"{r['snapshot_open_1pct_changed_s']:.2f} s | {r['ratio']}× | {r['snapshot_mb']} MB | "
              f"{r['l0_mb_per_1000_docs']} / {r.get('rss_mb_per_1000_docs', '–')} MB | {r['applied_change_ms']} ms | "
              f"{r['fresh_process_open_s']:.2f} s / {r['fresh_process_full_scan_open_s']:.2f} s |" for r in rows]
    if against:
        table += ["", f"Fresh processes beside {against}'s code (its own snapshot of the files), alternating:",
                  "", f"| documents | L0 full scan: this commit / {against} | ratio | "
                      f"from the snapshot: this commit / {against} | ratio |", "|---|---|---|---|---|"]
        table += [f"| {r['documents']:,}{SHAPES.get(r.get('shape', ''), '')} | "
                  f"{r['fresh_process_l0_full_scan_s']:.2f} / {r['against_l0_full_scan_s']:.2f} s | "
                  f"{r['against_l0_full_scan_s'] / r['fresh_process_l0_full_scan_s']:.2f}x | "
                  f"{r['fresh_process_l0_snapshot_s']:.2f} / {r['against_l0_snapshot_s']:.2f} s | "
                  f"{r['against_l0_snapshot_s'] / r['fresh_process_l0_snapshot_s']:.2f}x |" for r in rows]
    return table


if __name__ == "__main__":
    raise SystemExit(main())
