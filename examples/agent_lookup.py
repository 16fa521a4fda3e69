"""Agent code using the knowledge base: import kb_core, call the tool, print what the agent gets.

    .venv/bin/python examples/agent_lookup.py "ERR_TIMEOUT" "如何优化缓存"

It opens the knowledge base from the same settings as the console (env KB_*, kb.yaml); it may run while the
console does (the first process serves the Milvus Lite directory to the others; docs/operations.md).
"""

from __future__ import annotations

import json
import sys

from kb_core import default_knowledge_base, lookup_knowledge, openai_tool_schema


def main(queries: list[str]) -> int:
    kb = default_knowledge_base()
    if kb.status().counts.database == 0:
        # First run on a fresh clone: the sample documents are on disk but not yet in the stores.
        print("indexing the documents under knowledge_base/ (first run) ...", file=sys.stderr)
        kb.documents.reconcile()

    # What an agent framework is handed (OpenAI-style function calling; LangChain's bind_tools takes it too).
    print("tool schema:", json.dumps(openai_tool_schema()["function"]["name"]))
    for query in queries or ["ERR_TIMEOUT", "如何优化缓存"]:
        answer = lookup_knowledge(query)
        print(f"\n>>> lookup_knowledge({query!r})")
        for part in ("primary", "supplement"):
            hit = answer[part]
            if hit:
                how = hit["matchType"] + (f", confidence {hit['confidence']}" if "confidence" in hit else "")
                print(f"{part}: {hit['source']} ({how})")
                print("  " + hit["content"][:160].replace("\n", " ") + " ...")
        if not answer["found"]:
            print("nothing found" + (f": {answer['error']}" if answer.get("error") else ""))
    kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
