"""Ingest as a user times it: `kb reconcile` of copied documentation trees in fresh processes.

    python -m benchmarks.bench_ingest --tree /tmp/devset/greptime/knowledge_base \
        --tree /tmp/devset/hertzbeat/knowledge_base [--repeat 3] [--against HEAD~1]

Each `--tree` is a `knowledge_base` folder (`python -m benchmarks.devset build` exports real public trees into
one; their pages never enter this repository). Every run copies all the trees into a new, empty application
root (`knowledge_base/<tree>/…`) and times `kb reconcile` there as a fresh process, imports and the opening
included, BM25 only (`KB_EMBEDDING_FALLBACK=none`): pages per second of the whole command. With `--against
REV` the same runs use that commit's code too (a `git worktree`), alternating, so each figure stands beside
the previous one with their ratio. Medians of `--repeat` runs.

Then, in this process on this checkout, the same reconcile as a job would report it: at the first progress
report past 10 % of the files, the estimate the job shows (`JobRecord.eta_seconds`: elapsed / done × left)
against the time it really took to finish.

With `--dense-pages N` (default 150; 0 skips it), ingest with the built-in dense model: the first N pages of the
trees reconciled in this process once the model is ready, passages embedded per second of the whole reconcile,
beside the model's raw throughput on the passages the reconcile stored (a second instance of the model,
loaded apart, encoding them in one `encode_documents` call): the share of the model's speed ingest keeps.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_cold import REPO, _kb, _run, _worktree
from benchmarks.common import bench_settings, machine, publish

GOAL_PAGES_S = 100  # our goal: BM25 only, 2 quiet cores
GOAL_ETA = 0.25  # the estimate at 10 % within 25 % of the real remaining time
GOAL_DENSE_SHARE = 0.8  # with a dense model, ingest at >= 80 % of the model's raw batch-encode throughput


def _copy(trees: list[Path], root: Path) -> int:
    base = root / "knowledge_base"
    base.mkdir(parents=True)
    for tree in trees:
        for child in tree.iterdir():
            target = base / child.name
            (shutil.copytree if child.is_dir() else shutil.copy2)(child, target)
    return sum(1 for p in base.rglob("*") if p.suffix.lower() in (".md", ".markdown", ".mdx") and p.is_file())


def _reconcile_once(code: Path, trees: list[Path], workdir: Path) -> tuple[float, int, str]:
    root = Path(tempfile.mkdtemp(prefix="run-", dir=workdir))
    try:
        files = _copy(trees, root)
        # exit status 1: some files could not be indexed (a real tree has a page with no text), said in `out`
        seconds, out, _ = _run(code, root, _kb(code), "reconcile", ok=(0, 1))
        summary = next((line for line in out.splitlines() if "files added" in line), out.strip()[-300:])
        return seconds, files, summary
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _eta_check(trees: list[Path], workdir: Path) -> dict[str, Any]:
    from kb_core import open_knowledge_base

    root = workdir / "eta"
    files = _copy(trees, root)
    kb = open_knowledge_base(bench_settings(root, embedding_fallback="none", watch=False), load_model=False)
    seen: list[tuple[float, int, int]] = []
    try:
        started = time.perf_counter()
        kb.documents.reconcile(progress=lambda _phase, done, total: seen.append((time.perf_counter() - started, done,
                                                                                 total)))
        took = time.perf_counter() - started
    finally:
        kb.close()
    at = next(((t, d, n) for t, d, n in seen if n and d >= 0.1 * n), None)
    if at is None:
        return {"files": files, "seconds": round(took, 2), "estimate": None}
    t, done, total = at
    estimate = t / done * (total - done)  # JobRecord.eta_seconds
    left = took - t
    return {"files": files, "seconds": round(took, 2), "at_fraction": round(done / total, 3), "at_s": round(t, 2),
            "estimated_left_s": round(estimate, 2), "real_left_s": round(left, 2),
            "error": round(abs(estimate - left) / left, 3) if left > 0 else None}


def _dense_check(trees: list[Path], workdir: Path, pages: int) -> dict[str, Any]:
    from kb_core import open_knowledge_base
    from kb_core.testing import BuiltinEmbedder  # the model alone, beside the knowledge base that uses it

    root = workdir / "dense"
    _copy(trees, root)
    found = sorted(p for p in (root / "knowledge_base").rglob("*") if p.is_file() and p.suffix.lower() in
                   (".md", ".markdown", ".mdx"))
    for extra in found[pages:]:
        extra.unlink()
    kb = open_knowledge_base(bench_settings(root, embedding_fallback="use-multilingual-v3", watch=False))
    try:
        state = kb.wait_for_model(600)
        if not state.ready:
            return {"pages": pages, "model": None, "problem": f"the built-in model is {state.state}"}
        started = time.perf_counter()
        kb.documents.reconcile()
        ingest_s = time.perf_counter() - started
        texts = [chunk.text for document in kb.documents.list() for chunk in kb.documents.chunks(document.id)]
    finally:
        kb.close()
    # the model alone, loaded apart, on the passages the reconcile stored, in one call
    raw = BuiltinEmbedder()
    raw.start_loading()
    raw.wait_ready(600)
    started = time.perf_counter()
    raw.encode_documents(texts)
    raw_s = time.perf_counter() - started
    n = len(texts)
    return {"pages": min(pages, len(found)), "passages": n, "model": state.model_id, "ingest_s": round(ingest_s, 2),
            "raw_encode_s": round(raw_s, 2), "ingest_passages_per_s": round(n / ingest_s, 1) if ingest_s else None,
            "raw_passages_per_s": round(n / raw_s, 1) if raw_s else None,
            "share_of_raw": round(raw_s / ingest_s, 3) if ingest_s else None}


def bench_ingest(workdir: Path, *, trees: list[Path], repeat: int, against: str | None,
                 dense_pages: int = 150) -> dict[str, Any]:
    versions: dict[str, Path] = {"this commit": REPO}
    samples: dict[str, list[float]] = {}
    summaries: dict[str, str] = {}
    files = 0
    with contextlib.ExitStack() as stack:
        if against:
            versions[against] = stack.enter_context(_worktree(against))
        samples = {name: [] for name in versions}
        for turn in range(repeat):
            for name in (list(versions) if turn % 2 == 0 else list(versions)[::-1]):
                print(f"ingest: {name}, run {turn + 1} of {repeat} ...", file=sys.stderr)
                seconds, files, summary = _reconcile_once(versions[name], trees, workdir)
                samples[name].append(seconds)
                summaries[name] = summary
    eta = _eta_check(trees, workdir)
    dense = _dense_check(trees, workdir, dense_pages) if dense_pages > 0 else None
    medians = {name: statistics.median(s) for name, s in samples.items()}
    return {"trees": [str(t) for t in trees], "files": files, "repeat": repeat, "versions": list(versions),
            "medians_s": {n: round(s, 2) for n, s in medians.items()},
            "pages_per_s": {n: round(files / s, 1) for n, s in medians.items()},
            "samples_s": {n: [round(x, 2) for x in s] for n, s in samples.items()},
            "summaries": summaries, "eta": eta, "dense": dense,
            "goals": {"pages_per_s": GOAL_PAGES_S, "eta_error": GOAL_ETA, "dense_share": GOAL_DENSE_SHARE}}


def render_ingest(r: dict[str, Any]) -> list[str]:
    first = r["versions"][0]
    lines = [f"`kb reconcile` of {r['files']:,} files copied from {len(r['trees'])} real documentation trees into an "
             "empty application root, each run a fresh process (imports and the opening included), BM25 only "
             f"(KB_EMBEDDING_FALLBACK=none); medians of {r['repeat']} runs, the versions alternating:", "",
             "| code | seconds | pages/s | ratio to this commit |", "|---|---:|---:|---:|"]
    for name in r["versions"]:
        ratio = r["medians_s"][name] / r["medians_s"][first]
        lines.append(f"| {name} | {r['medians_s'][name]:.2f} | {r['pages_per_s'][name]:.1f} | {ratio:.2f} |")
    e = r["eta"]
    lines.append("")
    if e.get("estimate", 0) is None:
        lines.append("- ETA: no progress report passed 10 %.")
    else:
        lines.append(f"- ETA (this commit, in one process): at {e['at_fraction']:.0%} of the files ({e['at_s']:.1f} s "
                     f"in) the job's estimate was {e['estimated_left_s']:.1f} s left; it took {e['real_left_s']:.1f} s "
                     f"more (error {e['error']:.0%}; goal within {r['goals']['eta_error']:.0%}).")
    d = r.get("dense")
    if d and d.get("passages"):
        lines.append(f"- Dense ({d['model']}, in one process): {d['pages']} pages, {d['passages']:,} passages "
                     f"embedded; the reconcile took {d['ingest_s']:.1f} s "
                     f"({d['ingest_passages_per_s']:.1f} passages/s), "
                     f"the model alone {d['raw_encode_s']:.1f} s on the same passages "
                     f"({d['raw_passages_per_s']:.1f}/s): ingest keeps {d['share_of_raw']:.0%} of the model's speed "
                     f"(goal {r['goals'].get('dense_share', GOAL_DENSE_SHARE):.0%}).")
    elif d:
        lines.append(f"- Dense: not measured ({d.get('problem', 'no passages')}).")
    lines.append(f"- Goal: {r['goals']['pages_per_s']} pages/s on 2 quiet cores.")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_ingest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a knowledge_base folder")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", default=None, help="a commit to run side by side (e.g. HEAD~1)")
    parser.add_argument("--dense-pages", type=int, default=150, help="pages of the dense check (0: skip it)")
    parser.add_argument("--json", type=Path, default=Path("bench-ingest.json"))
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {"machine": machine(), "command": " ".join(["python -m benchmarks.bench_ingest", *given])}
    with tempfile.TemporaryDirectory(prefix="kb-bench-ingest-") as tmp:
        report["ingest"] = bench_ingest(Path(tmp), trees=[t.resolve() for t in args.tree], repeat=args.repeat,
                                        against=args.against, dense_pages=args.dense_pages)
    return publish(args.json, report, "\n".join(render_ingest(report["ingest"])))


if __name__ == "__main__":
    raise SystemExit(main())
