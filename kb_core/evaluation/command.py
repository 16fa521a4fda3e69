"""Answer quality as a number: `kb evaluate QUERIES.jsonl [--json OUT]`.

Every labelled query runs through `lookup` on the configured knowledge base (env `KB_*`, `kb.yaml`; the
tool-call log is left alone). A line of QUERIES.jsonl is
`{"query": "...", "kind": "title", "expected": ["category/file.md", ...]}`; an empty `expected` means the
knowledge base has no answer and the query must come back `found: false`.

Per query kind it reports:
- answered: an expected document is the primary or the supplement;
- right first: the first thing an agent reads (the primary, else the supplement) is an expected document;
- named: the answer names an expected document anywhere (primary, supplement, alternatives, suggestions);
- right primary: the primary is an expected document;
- in the query's language: the first thing served is in the query's language, of the answers whose page has
  a version in it;
- high but wrong: confidence "high" on a document that is not expected (the worst answer there is);
- not found: share of the no-answer queries that came back `found: false`;
- latency p50 / p99 of `lookup`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb_core.errors import KnowledgeBaseError
from kb_core.evaluation.scoring import evaluate, format_failures, format_table, load_queries, run_settings


def main(argv: list[str] | None = None, *, open_kb: Callable[[], Any], prog: str = "kb evaluate") -> int:
    """The command; `open_kb` opens the configured knowledge base (the `kb` command hands it
    `bootstrap.open_knowledge_base`: the command is run from above the facade, never imports it)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("queries", help="JSONL file of labelled queries")
    parser.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    parser.add_argument("--failures", type=int, default=20, metavar="N", help="list up to N failed queries")
    parser.add_argument("--sync", action="store_true", help="index the files on disk first (kb.documents.reconcile())")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    try:
        queries = load_queries(args.queries)
        kb = open_kb()
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        kb.wait_for_model(600)  # a model that is still loading would make L1 BM25-only
        if args.sync:
            kb.documents.reconcile()
        kb.prepare_suggestions()
        report = evaluate(kb, queries, progress=_progress_printer())
        ran_with = run_settings(kb)
    finally:
        kb.close()
    print(f"{len(queries)} queries on {ran_with['base_path']} (L0 rule: {ran_with['l0_matching']}, "
          f"L1: {ran_with['l1_mode']})")
    print(format_table(report))
    failures = list(format_failures(report, args.failures))
    if failures:
        print(f"\nFailed queries (first {len(failures)} of {len(report.failures())}):")
        print("\n".join(failures))
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


def _progress_printer() -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{done}/{total} queries", end="\n" if done == total else "", file=sys.stderr)
        elif done == total or done % 100 == 0:
            print(f"{done}/{total} queries", file=sys.stderr)
    return show

