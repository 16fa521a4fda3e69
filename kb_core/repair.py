"""`python -m kb_core.repair [PATH ...] [--delete-missing]`: an alias of `kb reconcile` (see `kb_core.cli`),
kept for scripts written before the `kb` command. It reconciles disk, database, Milvus and L0 of the
configured knowledge base and prints what it found and fixed."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from kb_core.cli import main as kb_main

    return kb_main(["reconcile", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
