"""Mark an answer right or wrong into a labelled query set (the playground and Tool calls share it): "right" stores
the query with the served document (the primary, or the supplement) as what answers it; "wrong" stores the document
the curator picks instead, or "no answer" (the query must come back not found). The Evaluation page runs the sets.
Curators only (kb_core checks the role on the write)."""

from __future__ import annotations

import streamlit as st

from kb_core import KnowledgeBase, KnowledgeBaseError, Role
from pages.shell.safe import inline_code
from pages.shell.views import save_and_flash, show_flash

NO_ANSWER = "(no answer: the knowledge base has none)"
DEFAULT_SET = "console"


def _label(kb: KnowledgeBase, set_name: str, query: str, expected: list[str], kind: str, key: str) -> None:
    save_and_flash(f"label-{key}", lambda: kb.evaluation.label(set_name, query, expected, kind=kind),
                   lambda _: f"“{query}” is labelled in the set “{set_name.strip()}”: "
                             f"{', '.join(expected) if expected else 'no answer'}.")


def _picked(kb: KnowledgeBase, set_name: str, query: str, kind: str, key: str) -> None:
    choice = st.session_state.get(f"label-pick-{key}")
    _label(kb, set_name, query, [] if choice in (None, NO_ANSWER) else [choice], kind, key)


def served_parts(payload: dict) -> list[tuple[str, str]]:
    """What a `lookup_knowledge` answer served: ("the primary", source), ("the supplement", source)."""
    return [(f"the {part}", payload[part]["source"]) for part in ("primary", "supplement")
            if (payload.get(part) or {}).get("source")]


def render_label_control(kb: KnowledgeBase, query: str, served: list[tuple[str, str]], *, key: str,
                         kind: str) -> None:
    """The "label this answer" controls for `query`; `served`: (what, source) of each document the answer served,
    each offered as "right"."""
    if not isinstance(query, str) or not query.strip() or not kb.actor.may(Role.CURATOR):
        return
    served = [(what, kb.documents.relative_path(source) or source) for what, source in served]
    with st.expander("Label this answer for evaluation"):
        set_name = st.text_input("Labelled query set", value=DEFAULT_SET, key=f"label-set-{key}")
        st.caption("Stored in the set (a query already in it gets the new label); the Evaluation page runs it.")
        if served:
            columns = st.columns(len(served))
            for i, (column, (what, path)) in enumerate(zip(columns, served, strict=True)):
                column.button(f"✅ Right: {what}", key=f"label-right-{i}-{key}", help=path, on_click=_label,
                              args=(kb, set_name, query, [path], kind, key))
            st.caption("Served: " + " · ".join(f"{what} {inline_code(path)}" for what, path in served))
        # the document list only when asked for: 10,000 options would slow every answer's render
        if st.toggle("❌ Wrong: pick what answers it", key=f"label-wrong-open-{key}"):
            try:
                documents = sorted(kb.documents.relative_path(d.file_path) or d.file_path for d in kb.documents.list())
            except KnowledgeBaseError:
                documents = []
            st.selectbox("The document that answers it", [NO_ANSWER, *documents], key=f"label-pick-{key}")
            st.button("Save as wrong", key=f"label-wrong-{key}", on_click=_picked,
                      args=(kb, set_name, query, kind, key))
    show_flash(f"label-{key}")
