"""`python -m tools.release stage ...`: the release step's command (tools/release/stage.py)."""

import sys

from tools.release.stage import main

sys.exit(main())
