"""The suite's lanes for `make test` (pytest-xdist, three workers; docs/testing.md, "CI time").

The modules that start a local control plane wait most of their time on it (cron minutes,
Karpenter, Kueue, kills and restarts). They form three work units, run first, each on a
worker of its own: the engine-fault module (its control plane runs no controller; it kills
the engine), the multi-cluster module (three control planes of its own, a Kueue on each,
each in its own mount namespace), and the four others, one after the other (so two of
their Kueue or Karpenter processes never run at once). Every other module is a work unit
of its own (its module-scoped fixtures are set up once), run by whichever worker is free.

The units are made by a scheduler of our own (`LaneScheduling`): pytest-xdist 3.8's
`xdist_group` marks do nothing under pytest 9, which no longer reads the node id the mark
rewrites.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CONTROL_PLANE = "control-plane"
ENGINE_FAULTS = "control-plane-engine-faults"
MULTICLUSTER = "control-planes-multicluster"
CONTROL_PLANE_LANES = {
    CONTROL_PLANE: frozenset({"test_drift.py", "test_e2e.py", "test_e2e_queueing.py", "test_faults_controllers.py"}),
    ENGINE_FAULTS: frozenset({"test_faults_engine.py"}),
    # Its own three control planes (docs/multicluster.md), shared by its tests.
    MULTICLUSTER: frozenset({"test_e2e_multicluster.py"}),
}
CONTROL_PLANE_MODULES = frozenset().union(*CONTROL_PLANE_LANES.values())


def lane(module: str) -> str:
    """The work unit of a test module's tests."""
    for name, modules in CONTROL_PLANE_LANES.items():
        if module in modules:
            return name
    return module.removesuffix(".py")


def pytest_collection_modifyitems(config, items):
    """The control-plane modules first (in file order), so the longest units start first."""
    items.sort(key=lambda item: lane(item.path.name) not in CONTROL_PLANE_LANES)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest runs without xdist too (one worker, file order)
    LoadScopeScheduling = None
else:
    class LaneScheduling(LoadScopeScheduling):
        """LoadScopeScheduling whose scope is the lane, in collection order."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return lane(Path(nodeid.split("::", 1)[0]).name)

    @pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: `-p no:xdist` still runs
    def pytest_xdist_make_scheduler(config, log):
        """Every distributed run keeps the control-plane modules on one worker."""
        return LaneScheduling(config, log) if config.getvalue("dist") != "each" else None
