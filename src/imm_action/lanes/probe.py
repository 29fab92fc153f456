"""Is a lane's runner still at work? (SPEC §5.2 step 4)"""

from __future__ import annotations

import os
from enum import Enum
from typing import Protocol

from imm_action.model.state import GithubRunner, LocalRunner, Runner


class RunnerStatus(Enum):
    RUNNING = "running"  # or not started yet: wait for it
    FINISHED = "finished"  # ended without an outcome: the lane was lost
    ORPHANED = "orphaned"  # its coordinator died: start it again, not counted as an attempt


class LaneProbe(Protocol):
    def status(self, runner: Runner) -> RunnerStatus: ...


class ProcessProbe:
    """Local lanes: a recorded pid that no longer exists has finished."""

    def status(self, runner: Runner) -> RunnerStatus:
        match runner:
            case LocalRunner(pid=None):
                return RunnerStatus.RUNNING
            case LocalRunner(pid=pid):
                assert pid is not None
                return RunnerStatus.RUNNING if _alive(pid) else RunnerStatus.FINISHED
            case GithubRunner():
                return RunnerStatus.RUNNING
        raise AssertionError(runner)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
