"""`python -m kb_core ARGS` is `kb ARGS` (see `kb_core.cli`)."""

import sys

from kb_core.cli import main

sys.exit(main())
