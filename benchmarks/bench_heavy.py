"""Benchmark: heavy but legal input: a 5 MB document made of headings, and a long query.

    python -m benchmarks.bench_heavy [--variants flat nested cjk] [--baseline /path/to/other/checkout]
                                     [--timeout 600] [--json bench-heavy.json]
    kb bench --skip l0 lookups l1 ingest pages trees suggest --no-bge      # the same, as the `heavy` section

Generated documents just under `KB_MAX_UPLOAD_BYTES` (5 MiB by default), each with frontmatter (keyword
`HEAVY_DOC`) and nothing but headings with a short line under each:

- flat: `## heading N` / `line N`, about 180,000 sections;
- nested: `#` … `######` in turn (every level open at once, six deep), about 250,000 headings;
- cjk: `## 标题第N节说明` / `内容N`, about 130,000 sections of Chinese text;
- prose (`--variants prose`, a reference): the same size in ordinary paragraphs and a heading every 40 lines.

Each step runs in a fresh child process (`python -c`, kb_core imported from the checkout measured), so its
peak memory is its own: the extra memory is the peak RSS during the step (`VmHWM`, reset just before it where
Linux allows) minus the RSS just before. A knowledge base without an embedding model (L1 on BM25 only) is used:

- **upload**: `kb.documents.preview_upload` (the console's lint) and `kb.documents.upload` of the document: time
  and extra memory;
- **open**: `open_knowledge_base()` of a base holding the document, next to the same open of a base holding one
  small document; and what the document adds to an open, measured alone: the L0 scan of each base
  (`KnowledgeIndex.load()`, the median of 3: reading it, its entry, its section list);
- **section**: `kb.lookup("HEAVY_DOC", section_title=…)` for an early heading, a late one (near the end of the
  document) and a missing one: the median time of 3 calls each, what was served (or the note), extra memory;
  and a plain lookup of the document right after (does a section call slow the others?);
- **long query**: `kb.lookup()` (the Python API) of 100,000 CJK characters: the time, and the answer or error.

Targets: upload <= 5 s and <= 300 MB extra, open + <= 2 s, a section <= 1 s, the long query <= 1 s.
With `--baseline ROOT` every step also runs against the kb_core of another checkout (`/work/main`: before the
change), side by side; a step that exceeds `--timeout` seconds is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, machine, publish

TARGETS = {"upload_s": 5.0, "upload_mb": 300.0, "open_added_s": 2.0, "section_s": 1.0, "long_query_s": 1.0}
LIMIT_BYTES = 5 * 1024 * 1024  # KB_MAX_UPLOAD_BYTES' default
VARIANTS = ("flat", "nested", "cjk")
_HEAD = "---\ntitle: Heavy document\nkeywords: [HEAVY_DOC]\nsummary: a legal document made of headings\n---\n\n"


def heavy_document(kind: str, limit: int = LIMIT_BYTES - 4096) -> tuple[str, int]:
    """(the document, how many headings) of `kind`, at most `limit` UTF-8 bytes."""
    parts, size, i = [_HEAD], len(_HEAD.encode()), 0
    while True:
        if kind == "flat":
            piece = f"## heading {i}\nline {i}\n"
        elif kind == "nested":
            piece = f"{'#' * (i % 6 + 1)} heading {i}\nx\n"
        elif kind == "cjk":
            piece = f"## 标题第{i}节说明\n内容{i}\n"
        elif kind == "prose":
            piece = (f"## part {i}\n\n" if i % 40 == 0 else "") + (
                f"Paragraph {i}: when the upstream pool is exhausted the gateway queues the request, and a "
                f"retry after the configured back-off usually succeeds; see the runbook for details.\n\n")
        else:
            raise ValueError(f"unknown variant {kind!r}")
        grown = size + len(piece.encode())
        if grown > limit:
            break
        parts.append(piece)
        size, i = grown, i + 1
    return "".join(parts), (i if kind != "prose" else (i + 39) // 40)


def heading_title(kind: str, n: int) -> str:
    """The text of a section's heading near heading number `n` of a variant (nested: an `#` heading)."""
    if kind == "nested":
        n -= n % 6
    return f"标题第{n}节说明" if kind == "cjk" else f"part {n * 40}" if kind == "prose" else f"heading {n}"


# The child: imports nothing but kb_core (from its working directory) and the standard library, so that the
# same code measures another checkout with `--baseline`.
_CHILD = r'''
import json, os, resource, statistics, sys, time
args = json.loads(sys.argv[1])
import logging
logging.basicConfig(level=logging.ERROR)

def rss_mb():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def peak_mb():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass

def measured(fn, errors=None):
    reset_peak()
    before = rss_mb()
    started = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:
        if errors is None:
            raise
        errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
        value = None
    return value, round(time.perf_counter() - started, 3), round(max(0.0, peak_mb() - before), 1)

from kb_core import load_settings, open_knowledge_base
root = args["root"]
os.makedirs(root, exist_ok=True)
settings = load_settings(app_root=root, embedding_model="no-such-org/no-such-model", watch=False,
                         database_url=f"sqlite:///{root}/kb.sqlite3", milvus_uri=f"{root}/kb_milvus.db")
out = {}
if args["step"] == "upload":
    kb = open_knowledge_base(settings, load_model=False)
    data = open(args["doc"], "rb").read()
    preview, out["preview_s"], out["preview_mb"] = measured(lambda: kb.documents.preview_upload("heavy.md", data,
                                                                                                "heavy"))
    out["preview_findings"] = [f.message[:120] for f in preview.findings]
    errors = []
    outcome, out["upload_s"], out["upload_mb"] = measured(lambda: kb.documents.upload("heavy.md", data, "heavy"),
                                                          errors)
    out["chunks"] = outcome.document.chunk_count if outcome is not None else None
    out["upload_error"] = errors[0] if errors else None
    kb.close()
elif args["step"] == "open":
    if args.get("doc") and not os.path.exists(f"{root}/knowledge_base/heavy/heavy.md"):
        # the upload failed: the file alone gives L0 its entry (what an open scans and a section reads)
        os.makedirs(f"{root}/knowledge_base/heavy", exist_ok=True)
        with open(args["doc"], "rb") as src, open(f"{root}/knowledge_base/heavy/heavy.md", "wb") as dst:
            dst.write(src.read())
        out["placed"] = True
    kb, out["open_s"], out["open_mb"] = measured(lambda: open_knowledge_base(settings, load_model=False))
    from kb_core import KnowledgeIndex
    scans = [measured(lambda: KnowledgeIndex("knowledge_base", app_root=root).load()) for _ in range(3)]
    out["l0_scan_s"] = statistics.median(s for _, s, _ in scans)  # what the documents add to an open
    entry = kb.documents.entry(args["source"]) if args.get("source") else None
    out["listed_sections"] = None if entry is None or entry.sections is None else len(entry.sections)
    for label, title in args.get("sections", {}).items():
        times, peaks = [], []
        for _ in range(3):
            result, seconds, extra = measured(lambda: kb.lookup("HEAVY_DOC", section_title=title))
            times.append(seconds)
            peaks.append(extra)
        served = result.primary.section if result.primary is not None else None
        out[f"section_{label}"] = {"s": statistics.median(times), "mb": max(peaks), "served": served,
                                   "note": (result.note or "")[:100], "chars": len(result.primary.content)
                                   if result.primary is not None else 0}
    if args.get("source"):
        times = [measured(lambda: kb.lookup("HEAVY_DOC"))[1] for _ in range(3)]
        out["plain_lookup_s"] = statistics.median(times)
    if args.get("long_query"):
        query = "支付网关超时" * (100_000 // 6) + "支付网关超时"[: 100_000 % 6]
        def long():
            try:
                result = kb.lookup(query)
                return f"answered (found={result.found})"
            except Exception as exc:
                return f"{type(exc).__name__}: {str(exc)[:100]}"
        out["long_query"], out["long_query_s"], out["long_query_mb"] = measured(long)
    kb.close()
print("RESULT " + json.dumps(out))
'''


def _child(checkout: Path, step: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One step in a fresh process with kb_core from `checkout`; {"timeout": s} when it takes too long."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "KB_EMBEDDING_MODEL": "no-such-org/no-such-model"}
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(step)], cwd=checkout, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def bench_heavy(workdir: Path, *, variants: tuple[str, ...] = VARIANTS, checkouts: dict[str, Path] | None = None,
                timeout: float = 600.0, limit: int | None = None) -> dict[str, Any]:
    """Every variant through every checkout (`{"after": REPO}` by default), one child process per step;
    documents of `limit` bytes (default: just under 5 MiB)."""
    checkouts = checkouts or {"after": REPO}
    limit = limit or LIMIT_BYTES - 4096
    report: dict[str, Any] = {"targets": TARGETS, "limit_bytes": limit, "variants": {}}
    for label, checkout in checkouts.items():
        small = workdir / f"{label}-small"
        _child(checkout, {"step": "upload", "root": str(small), "doc": str(_small_doc(workdir))}, timeout)
        report.setdefault("small_open", {})[label] = _child(checkout, {"step": "open", "root": str(small),
                                                                       "long_query": True}, timeout)
    for kind in variants:
        text, headings = heavy_document(kind, limit)
        doc = workdir / f"{kind}.md"
        doc.write_text(text, encoding="utf-8")
        row: dict[str, Any] = {"bytes": len(text.encode()), "headings": headings}
        for label, checkout in checkouts.items():
            print(f"heavy: {kind} ({label}) ...", file=sys.stderr)
            root = workdir / f"{label}-{kind}"
            upload = _child(checkout, {"step": "upload", "root": str(root), "doc": str(doc)}, timeout)
            sections = {"early": heading_title(kind, 3), "late": heading_title(kind, headings - 3),
                        "missing": "no such heading"}
            opened = _child(checkout, {"step": "open", "root": str(root), "source": "knowledge_base/heavy/heavy.md",
                                       "doc": str(doc), "sections": sections}, timeout)
            row[label] = {"upload": upload, "open": opened}
            shutil.rmtree(root, ignore_errors=True)
        report["variants"][kind] = row
        doc.unlink()
    return report


def _small_doc(workdir: Path) -> Path:
    path = workdir / "small.md"
    path.write_text(_HEAD.replace("HEAVY_DOC", "SMALL_DOC") + "# Small\n\n## One\n\ntext\n", encoding="utf-8")
    return path


def _s(value: Any) -> str:
    return "—" if value is None else f"{value:.2f} s"


def render_heavy(r: dict[str, Any]) -> list[str]:
    t = r["targets"]
    lines = ["", f"Heavy but legal input (documents of at most {r['limit_bytes']:,} bytes; targets at 5 MiB: upload <= "
             f"{t['upload_s']:.0f} s and <= {t['upload_mb']:.0f} MB extra, open + <= {t['open_added_s']:.0f} s, "
             f"a section <= {t['section_s']:.0f} s, a 100,000-character query <= {t['long_query_s']:.0f} s)",
             "| document | code | preview | upload (extra MB) | chunks | open (small base) | L0 scan (small base) | "
             "listed | section early / late / missing | section extra MB | plain lookup after |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind, row in r["variants"].items():
        for label, step in row.items():
            if not isinstance(step, dict) or "upload" not in step:
                continue
            up, op = step["upload"], step["open"]
            small = r.get("small_open", {}).get(label, {})
            name = f"{kind} ({row['headings']:,} headings, {row['bytes']:,} B)"
            if "upload_s" in up:
                uploaded = f"{_s(up['upload_s'])} ({up['upload_mb']:.0f})"
                if up.get("upload_error"):
                    uploaded += f" failed: {up['upload_error'][:90]}"
            else:
                uploaded = f"timed out after {up['timeout']:.0f} s" if "timeout" in up else up.get("error", "?")
            if "open_s" not in op:
                why = f"timed out after {op['timeout']:.0f} s" if "timeout" in op else op.get("error", "?")
                lines.append(f"| {name} | {label} | {_s(up.get('preview_s'))} | {uploaded} | {up.get('chunks')} | "
                             f"{why} |" + " |" * 5)
                continue
            sections = [op.get(f"section_{k}", {}) for k in ("early", "late", "missing")]
            shown = " / ".join(f"{s.get('s', 0):.3f} s ({'served' if s.get('served') else 'note'})" for s in sections)
            placed = " (file placed: the upload failed)" if op.get("placed") else ""
            lines.append(
                f"| {name} | {label} | {_s(up.get('preview_s'))} | {uploaded} | {up.get('chunks')} | "
                f"{_s(op['open_s'])} ({_s(small.get('open_s'))}){placed} | {_s(op.get('l0_scan_s'))} "
                f"({_s(small.get('l0_scan_s'))}) | {op.get('listed_sections')} | {shown} | "
                f"{max(s.get('mb', 0) for s in sections):.0f} | {_s(op.get('plain_lookup_s'))} |")
    for label, small in r.get("small_open", {}).items():
        if "long_query_s" in small:
            lines.append(f"{label}: kb.lookup() of 100,000 CJK characters: {small['long_query_s']:.3f} s, "
                         f"{small['long_query_mb']:.0f} MB extra -> {small['long_query']}")
        else:
            lines.append(f"{label}: kb.lookup() of 100,000 CJK characters: {small}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_heavy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=[*VARIANTS, "prose"])
    parser.add_argument("--baseline", type=Path, help="another checkout to measure side by side (before)")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout measured as 'after' (this one)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per step before it is given up")
    parser.add_argument("--json", type=Path, default=Path("bench-heavy.json"))
    args = parser.parse_args(argv)
    checkouts = {"after": args.checkout.resolve()}
    if args.baseline is not None:
        checkouts = {"before": args.baseline.resolve(), **checkouts}
    given = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {"machine": machine(), "command": " ".join(["python -m benchmarks.bench_heavy", *given])}
    workdir = Path(tempfile.mkdtemp(prefix="kb-heavy-"))
    try:
        report["heavy"] = bench_heavy(workdir, variants=tuple(args.variants), checkouts=checkouts,
                                      timeout=args.timeout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    m = report["machine"]
    return publish(args.json, report, "\n".join([
        f"machine: {m.get('cpu', '?')}, {m['cpus']} cores, {m.get('memory_gb', '?')} GiB, Python {m['python']}",
        *render_heavy(report["heavy"])]))


if __name__ == "__main__":
    sys.exit(main())
