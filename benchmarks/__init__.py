"""The benchmarks and the generated figures of the documentation. They live in the source checkout only (not
in the installed kb_core): run them from a clone, `python -m benchmarks ...` or `kb bench ...`.
`python -m benchmarks.make_docs` renders docs/performance.md and docs/quality.md from the JSON results."""
