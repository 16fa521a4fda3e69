"""Streamlit entry point of the knowledge-base console: `streamlit run app.py`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_ROOT = Path(__file__).resolve().parent
# Relative settings (knowledge_base/, the SQLite file, the Milvus Lite folder) resolve next to this file,
# so `streamlit run /elsewhere/app.py` finds them too.
os.environ.setdefault("KB_APP_ROOT", str(APP_ROOT))
if str(APP_ROOT) not in sys.path:
    sys.path.insert(0, str(APP_ROOT))

import streamlit as st  # noqa: E402

st.set_page_config(page_title="Knowledge base console", page_icon="📚", layout="wide")

navigation = st.navigation(
    [
        st.Page(str(APP_ROOT / "pages" / "home.py"), title="Documents in L0", icon="📚", default=True),
    ]
)
navigation.run()
