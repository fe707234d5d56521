"""make test's lanes (tests/conftest.py): the modules that start a local control plane are
exactly the control-plane lanes; the engine-fault module, whose control plane runs no
controller, and the multi-cluster module, whose site runs its own Kueues, have lanes of
their own beside the others."""

import re

from tests.conftest import (CONTROL_PLANE, CONTROL_PLANE_LANES, CONTROL_PLANE_MODULES, ENGINE_FAULTS, MULTICLUSTER,
                            ROOT, lane)
CONTROLLERS = re.compile(r"start_kueue|karpenter-process|start_packing_scheduler")
KUEUE_SITE = re.compile(r"multikueue_site\(")

STARTS_A_CONTROL_PLANE = re.compile(r"^\s*with (local_cluster|multikueue_site)\(", re.MULTILINE)


def test_the_control_plane_group_is_every_module_that_starts_one():
    starting = {path.name for path in (ROOT / "tests").glob("test_*.py")
                if STARTS_A_CONTROL_PLANE.search(path.read_text())}
    assert starting == set(CONTROL_PLANE_MODULES)


def test_only_the_lane_of_the_controllers_starts_them():
    """Lanes run at once: one starts Kueue, Karpenter and the packing scheduler; the
    multi-cluster lane starts only its site's Kueues, each in a mount namespace of its own
    (scripts/kueue-process.sh: the metrics certificate's fixed path; a site of three needs
    that anyway), and the engine-fault lane none."""
    starting = {path.name for path in (ROOT / "tests").glob("test_*.py") if CONTROLLERS.search(path.read_text())}
    assert starting & CONTROL_PLANE_MODULES == CONTROL_PLANE_LANES[CONTROL_PLANE]
    assert not starting & CONTROL_PLANE_LANES[ENGINE_FAULTS]
    sites = {path.name for path in (ROOT / "tests").glob("test_*.py") if KUEUE_SITE.search(path.read_text())}
    assert sites == CONTROL_PLANE_LANES[MULTICLUSTER]


def test_other_modules_are_a_group_each():
    assert lane("test_e2e.py") == lane("test_drift.py") == CONTROL_PLANE
    assert lane("test_faults_engine.py") == ENGINE_FAULTS
    assert lane("test_quantity.py") == "test_quantity"
    assert lane("test_quantity.py") != lane("test_config.py")


def test_the_scheduler_puts_each_lane_in_one_work_unit():
    from tests.conftest import LaneScheduling

    split = LaneScheduling._split_scope
    assert split(None, "tests/test_e2e.py::test_rbac_matrix") == split(None, "tests/test_drift.py::test_x") \
        == CONTROL_PLANE
    assert split(None, "tests/test_faults_engine.py::test_x[fi1]") == ENGINE_FAULTS
    assert split(None, "tests/test_quantity.py::test_normalise[4Gi-bytes-4Gi]") == "test_quantity"
    assert split(None, "tests/test_config.py::TestX::test_y") == "test_config"
