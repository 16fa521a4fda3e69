"""The services the `KnowledgeBase` facade delegates to, one room each, beside `kb_core.evaluation`.

`parts` (what a knowledge base is assembled from: `Parts`, built by `bootstrap`), `catalogue` (what it holds:
documents, categories, languages, unindexed and missing files, cached), `status` (what each store holds and where
they disagree), `editing` (frontmatter edits in place, bulk keyword plans with their values in `keyword_plan`,
synonyms, the fix for a query that needs attention), `playground` (the playground's test run beside the agent's
call), `jobs` (long work through the one registry of job kinds) and `calls` (the agents' tools called and
logged). A service checks no role: the facade checks the acting user's role and hands over what the service
needs per call (the actor's name, the facade's own writes).

May import: everything below the facade (base modules, storage, jobs, documents, retrieval, agent, ops,
evaluation); never the facade or what stands on it.
"""
