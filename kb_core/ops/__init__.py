"""Ops: what running and watching the knowledge base needs around it, beside the base modules.

Owns the log context and files (`logs`: the request id and caller of the call in progress, the JSON-lines log
file `KB_LOG_FILE`), the Prometheus metrics (`metrics`: a registry per knowledge base), the one guarded HTTP
server that serves them and `kb mcp --http` (`http_guard`: deadlines and a connection cap for slow clients),
the one percentile (`stats`), the versions of the parts for the Settings page and bug reports (`about`) and the
cached summaries every console page reads (`summaries`, keyed on the knowledge base's version).

May import: kb_core's base modules (`errors`, `settings`, `terms`, `access`, `progress`) only; every layer may
import it (storage summarises the call log with `stats`, retrieval and the tools log with `logs`).
"""
