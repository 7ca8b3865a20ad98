"""Suite-wide settings.

Under CI (``CI`` set) hypothesis runs derandomized, so a landing never depends on the draw; local
runs stay random and keep finding new cases (a failing one is then pinned with ``@example``).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

