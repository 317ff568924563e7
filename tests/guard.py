"""The one wall-clock bound a test puts on work that can hang: a hang guard, not a speed check.

No test may fail because the machine is slow or loaded, so every timeout a test passes to a subprocess
(and pytest-timeout's per-test ``timeout`` in pyproject.toml, the same number: ``tests/test_project.py``
checks it) is this guard, far above the time of the slowest tests it bounds (the end-to-end clean run
and the paper rehearsal, about 15 minutes each side by side on CI's two workers, docs/experiment-log.md):
it ends a hung test, it never judges a slow one.
"""

HANG_GUARD_S = 3600
