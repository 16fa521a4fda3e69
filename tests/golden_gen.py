"""Regenerate golden expectations: python tests/golden_gen.py (review the diff before committing)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kb_core.documents.frontmatter import parse_frontmatter  # noqa: E402

GOLDEN = Path(__file__).parent / "golden" / "frontmatter"


def expected_for(path: Path):
    parsed = parse_frontmatter(path.read_bytes().decode("utf-8"))
    return None if parsed is None else parsed.to_dict()


if __name__ == "__main__":
    for md in sorted(GOLDEN.glob("*.md")):
        out = md.with_name(md.stem + ".expected.json")
        out.write_text(json.dumps(expected_for(md), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print("wrote", out.name)
