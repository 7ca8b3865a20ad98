"""Suite-wide settings.

Under CI (``CI`` set) hypothesis runs derandomized, so a landing never depends on the draw; local
runs stay random and keep finding new cases (a failing one is then pinned with ``@example``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


#: Test files that start Ray outside tests/live (their federation marks are the live tests').
STARTS_RAY = ("tests/core/test_batch_compare_export.py", "tests/core/test_ray_local.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs two workers, ``--dist loadgroup``): the tests of
    one file run on one worker (its module fixtures are made once), and every test that starts
    a federation or Ray runs on the same worker, one after the other (two at once would measure
    each other; ``tests/live/conftest.py``'s lock also keeps them apart across suites)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        path = item.nodeid.split("::")[0]
        serial = item.get_closest_marker("federation") is not None or path in STARTS_RAY
        item.add_marker(pytest.mark.xdist_group("federation" if serial else path))
