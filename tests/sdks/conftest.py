"""What every SDK proof needs before its module is imported.

The conversations they send are in ``_conversations.py``; the provider is the
suite's ``provider`` fixture (the testing kit's ``fake_provider``).
"""

from __future__ import annotations

import os

# LiteLLM fetches its model price list from the network on import unless told
# to use the copy it ships; there is no network here. Set before any test module
# of this folder imports litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
