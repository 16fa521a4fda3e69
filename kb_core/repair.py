"""Operator command: `python -m kb_core.repair [--delete-missing]` reconciles disk, database, Milvus and L0 of
the configured knowledge base and prints what it found and fixed. Rows whose file has gone are only reported
unless `--delete-missing` is given (they are deleted with their vectors)."""

from __future__ import annotations

import argparse
import logging
import sys

from kb_core.errors import KnowledgeBaseError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kb_core.repair", description=__doc__)
    parser.add_argument("--delete-missing", action="store_true",
                        help="delete rows (and vectors) whose file is gone from disk")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from kb_core.bootstrap import open_knowledge_base

    try:
        kb = open_knowledge_base(load_model=True)
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        kb.wait_for_model()
        report = kb.reconcile(delete_missing=args.delete_missing)
        print(report.summary())
        for path in report.missing_files:
            print(f"  file missing: {path} (run with --delete-missing to delete its row and vectors)")
        for path, why in report.failed:
            print(f"  failed: {path}: {why}")
        counts = kb.status().counts
        print(f"now: {counts.files} files, L0 {counts.l0}, database {counts.database}, Milvus {counts.milvus} "
              f"documents ({'consistent' if counts.consistent else 'NOT consistent'})")
        return 0 if counts.consistent or report.missing_files else 2
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        kb.close()


if __name__ == "__main__":
    sys.exit(main())
