"""Operator command: `kb migrate [REVISION]` (or `python -m kb_core.storage.migrate`) brings the configured
database to REVISION (default: head). `KnowledgeBase` runs the same migration automatically when it opens.
`kb migrate REVISION --downgrade` brings it down to an older version's newest revision, before running that
version on it (it refuses a newer schema)."""

from __future__ import annotations

import argparse
import logging
import sys

from kb_core.errors import KnowledgeBaseError
from kb_core.settings import load_settings
from kb_core.storage.metadata_store import MetadataStore


def main(argv: list[str] | None = None, *, prog: str = "kb migrate") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("revision", nargs="?", default="head",
                        help="the Alembic revision to migrate to (default: head, the newest)")
    parser.add_argument("--current", action="store_true", help="print the current revision and exit")
    parser.add_argument("--downgrade", action="store_true",
                        help="REVISION is older than the database's: migrate down to it (what the newer revisions "
                             "added is dropped), e.g. before running an older version of kb_core on this database")
    args = parser.parse_args(argv)
    if args.downgrade and args.revision == "head":
        parser.error("--downgrade needs the REVISION to go down to (an older version's newest, e.g. 0010)")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        store = MetadataStore(load_settings().resolved_database_url)
        if args.downgrade and not args.current:
            store.downgrade(args.revision)
        elif not args.current:
            store.migrate(args.revision)
        print(f"{store.url}: revision {store.current_revision()}")
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
