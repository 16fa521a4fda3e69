"""Benchmark: converting PDF, Word, PowerPoint, HTML and text files to Markdown renditions.

    python -m benchmarks.bench_convert PATH... [--per-kind N] [--memory-mb 300] [--seconds 60] [--json OUT]

Every file under the PATHs (folders are walked) goes through `kb_core.testing.measure_conversion`, exactly the
conversion an upload would run: the kind sniffed from the bytes, the converter in its own child process under
its memory and time limits. Per kind: files converted and refused, pages (or slides) per second and KB per
second over all of them, the median and p95 of one file's wall time (the child's start included), and the
child's peak resident memory (median and largest). Refusals are counted by their error class. Use real public
files (the sample folders of document libraries), kept outside the repository.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchmarks.common import machine, percentile_of, publish
from kb_core import KnowledgeBaseError
from kb_core.testing import ConversionLimits, measure_conversion

SUFFIXES = (".pdf", ".docx", ".pptx", ".html", ".htm", ".txt", ".md")


def files_under(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        elif path.is_file():
            found.append(path)
    return found


def _kind_of(path: Path) -> str:
    return {".htm": "html", ".md": "markdown", ".txt": "text"}.get(path.suffix.lower(), path.suffix.lower()[1:])


def convert_all(files: list[Path], limits: Any, per_kind: int) -> dict[str, dict[str, Any]]:
    """Per kind (by the name's suffix, as a curator would sort them): the runs and the refusals."""
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"runs": [], "refused": Counter(), "bytes": 0})
    for path in files:
        row = rows[_kind_of(path)]
        if len(row["runs"]) + sum(row["refused"].values()) >= per_kind:
            continue
        data = path.read_bytes()
        started = time.perf_counter()
        try:
            run = measure_conversion(data, path.name, limits=limits)
        except KnowledgeBaseError as exc:
            row["refused"][type(exc).__name__] += 1
            print(f"  refused {path.name}: {exc}"[:200], file=sys.stderr)
            continue
        row["bytes"] += len(data)
        row["runs"].append({"file": path.name, "seconds": time.perf_counter() - started, "pages": run.rendition.pages,
                            "peak_rss_mb": run.peak_rss_bytes / 2**20, "chars": len(run.rendition.markdown)})
    return rows


def summarise(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    report = {}
    for kind, row in sorted(rows.items()):
        runs = row["runs"]
        seconds = sum(r["seconds"] for r in runs)
        pages = sum(r["pages"] for r in runs)
        ms = [r["seconds"] * 1000 for r in runs]
        rss = [r["peak_rss_mb"] for r in runs if r["peak_rss_mb"]]
        report[kind] = {
            "files": len(runs), "refused": dict(row["refused"]), "pages": pages,
            "pages_per_s": round(pages / seconds, 1) if pages and seconds else None,
            "kb_per_s": round(row["bytes"] / 1024 / seconds, 1) if seconds else None,
            "median_ms": round(statistics.median(ms), 1) if ms else None,
            "p95_ms": round(percentile_of(ms, 95), 1) if ms else None,
            "peak_rss_mb_median": round(statistics.median(rss), 1) if rss else None,
            "peak_rss_mb_max": round(max(rss), 1) if rss else None,
            "slowest": max(runs, key=lambda r: r["seconds"])["file"] if runs else None,
        }
    return report


def render(report: dict[str, dict[str, Any]]) -> str:
    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:,}" if isinstance(value, int | float) else str(value)

    lines = ["| kind | files | refused | pages | pages/s | KB/s | median ms | p95 ms | peak RSS median / max MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind, row in report.items():
        refused = sum(row["refused"].values())
        lines.append(f"| {kind} | {row['files']} | {refused} | {cell(row['pages'])} | {cell(row['pages_per_s'])} | "
                     f"{cell(row['kb_per_s'])} | {cell(row['median_ms'])} | {cell(row['p95_ms'])} | "
                     f"{cell(row['peak_rss_mb_median'])} / {cell(row['peak_rss_mb_max'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="files or folders of PDF/DOCX/PPTX/HTML/text files")
    parser.add_argument("--per-kind", type=int, default=1000, help="at most this many files of each kind")
    parser.add_argument("--memory-mb", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", type=Path, default=Path("bench-convert.json"))
    args = parser.parse_args(argv)
    files = files_under(args.paths)
    if not files:
        parser.error("no PDF, DOCX, PPTX, HTML or text file under the paths given")
    limits = ConversionLimits(memory_mb=args.memory_mb, seconds=args.seconds)
    report = summarise(convert_all(files, limits, args.per_kind))
    full = {"command": " ".join(["python -m benchmarks.bench_convert", *(argv or sys.argv[1:])]),
            "machine": machine(), "limits": {"memory_mb": args.memory_mb, "seconds": args.seconds}, "kinds": report}
    return publish(args.json, full, render(report))


if __name__ == "__main__":
    sys.exit(main())
