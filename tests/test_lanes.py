"""make test's lanes (tests/conftest.py): the modules that start a local control plane are
exactly the control-plane group, so two control planes never run at once."""

import re

from tests.conftest import CONTROL_PLANE, CONTROL_PLANE_MODULES, ROOT, lane

STARTS_A_CONTROL_PLANE = re.compile(r"^\s*with local_cluster\(", re.MULTILINE)


def test_the_control_plane_group_is_every_module_that_starts_one():
    starting = {path.name for path in (ROOT / "tests").glob("test_*.py")
                if STARTS_A_CONTROL_PLANE.search(path.read_text())}
    assert starting == set(CONTROL_PLANE_MODULES)


def test_other_modules_are_a_group_each():
    assert lane("test_e2e.py") == lane("test_faults_engine.py") == CONTROL_PLANE
    assert lane("test_quantity.py") == "test_quantity"
    assert lane("test_quantity.py") != lane("test_config.py")


def test_the_scheduler_puts_each_lane_in_one_work_unit():
    from tests.conftest import LaneScheduling

    split = LaneScheduling._split_scope
    assert split(None, "tests/test_e2e.py::test_rbac_matrix") == split(None, "tests/test_faults_engine.py::test_x[fi1]") \
        == CONTROL_PLANE
    assert split(None, "tests/test_quantity.py::test_normalise[4Gi-bytes-4Gi]") == "test_quantity"
    assert split(None, "tests/test_config.py::TestX::test_y") == "test_config"
