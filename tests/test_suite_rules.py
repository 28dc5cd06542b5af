"""The suite's own rules (tests/conftest.py): a test that starts Python or a shell is marked slow."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# Run by pytester in this process, so conftest's audit hook is already installed; importing the autouse
# fixture is what puts the rule in force in pytester's folder, which has no conftest of ours.
STARTS_A_PROCESS = """
import subprocess

import pytest
from tests.conftest import processes_only_when_slow


def test_unmarked_start():
    subprocess.run(["sh", "-c", "true"], check=True)


@pytest.mark.slow
def test_marked_start():
    subprocess.run(["sh", "-c", "true"], check=True)


def test_no_start():
    pass
"""


def test_only_a_test_marked_slow_may_start_a_process(pytester: pytest.Pytester) -> None:
    """An unmarked test that starts a shell fails, naming it; marked, or starting none, it passes."""
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts a process\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_starts=STARTS_A_PROCESS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1, warnings=0)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_unmarked_start*", "E * Failed: started ?'sh'? but is not marked slow*"]
    )
