"""Evaluation: answer quality on labelled queries, for `kb evaluate` and the console's Evaluation page.

Owns the scoring (`scoring`: parse the JSONL, run every query through `lookup`, score the answers per kind),
runs as stored and compared (`runs`: verdicts, the headline metrics, two runs side by side), the service the
`KnowledgeBase` facade delegates to (`service`: labelled query sets, runs as `evaluate` jobs) and the `kb
evaluate` command (`command`, which explains each metric).

May import: kb_core's base modules, `kb_core.storage` (the evaluation tables), `kb_core.jobs` (a run is a job),
`kb_core.documents` (query languages) and `kb_core.agent.tool` (the one query-length rule); never the facade or
what stands on it: the facade hands the service itself, and the `kb` command hands the command its opener.
"""
