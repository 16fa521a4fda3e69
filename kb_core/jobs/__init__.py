"""Jobs: long work (reconcile, re-index all, batch uploads, folder imports) run by a worker thread of the
knowledge base's process, recorded in the database so that every tab and every process sees it.

Owns the job values (`model`), the process identity that tells a dead owner from a live one (`process`), the
`kb_job` table's queries (`store`), the staging area for uploaded bytes (`staging`), the worker and its
cross-process turn-taking (`runner`), what each kind of job does with the facade (`work`) and the one registry
of job kinds both `start_job` and `run_job` prepare a job through (`kinds`).

May import: kb_core's base modules (`errors`, `access`, `progress`) and `kb_core.storage` (its table, a session
and the named-lock helper). The `KnowledgeBase` facade starts jobs and hands the work over as callables; nothing
here imports documents, retrieval or the facade.
"""
