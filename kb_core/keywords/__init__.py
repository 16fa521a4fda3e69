"""Keywords: L0, the in-memory index over every document's frontmatter keywords, and everything it owns.

- `entry`: what L0 knows of one document (its keywords, the ones it ignores and why, title, sections,
  language), compact enough for 100,000 pages;
- `index`: the index's life (loading the folder, adding and removing entries, the background rebuild);
- `matching`: the immutable snapshot a lookup reads and the matching rule (`words` by default, the spec's
  literal `substring` rule as a mode), ranking and the generic-keyword rule;
- `delta`: a change applied as a delta over the last snapshot, answering exactly as a full rebuild would;
- `map`: the keyword map the console shows (clashes, overlaps, generic and weak keywords);
- `suggestions`: "did you mean" over the identifier keywords;
- `snapshot_file`, `index_data`, `snapshot_key`: the saved snapshot an open reads instead of parsing every
  file, its flat arrays and the key that signs it;
- `parallel_scan`: parsing many files in child processes on a first open.
- `naive`: the matching rule as a brute-force loop, the reference tests and benchmarks check L0 against
  (`kb_core.testing.NaiveIndex`); never used at run time.

May import: kb_core's base modules and the parsers and folder of `kb_core.documents`; the document write path
(`kb_core.documents.service`, `lint`, `batch`) uses `entry` and the index through it. Never retrieval, the
agents, the services or the facade (`tests/unit/test_architecture.py`, `IMPORT_RULES`).
"""
