"""``python -m ctx_compact.testing``: serve the local provider in the foreground."""

from __future__ import annotations

import sys

from ._server import main

if __name__ == "__main__":
    sys.exit(main())
