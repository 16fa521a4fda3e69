"""The benchmarks and the generated figures of the documentation. They live in the source checkout only (not
in the installed kb_core): run them from a clone, `python -m benchmarks ...` or `kb bench ...`.

- `python -m benchmarks` (= `python -m benchmarks.bench`, `kb bench`): L0, lookups, L1 full text, ingest and
  page renders (`--quick` for a smoke run, `--skip ...` to leave sections out); `bench_pages` and
  `render_timing` are its `pages` section;
- `python -m benchmarks.bench_feed`: several processes on one knowledge base (the change feed);
- `python -m benchmarks.make_docs` renders docs/performance.md and docs/quality.md from the JSON results.

They use kb_core's public faces only (`kb_core`, `kb_core.console`, `kb_core.testing`: the naive L0 reference,
the model builders and the components a benchmark times on its own are `kb_core.testing`'s), never tests/;
`common` holds what they share."""
