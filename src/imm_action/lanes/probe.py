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


class CoordinatorProbe:
    """Local lanes under `imm run`: the runner's pid is the coordinator that owns the lane.

    Our own lanes are finished when we saw their process exit without an outcome. A lane owned
    by another coordinator that is gone was orphaned by its death: started again, not counted
    as an attempt. Outside `imm run` (own pid matches no lane) every dead owner is such a death."""

    def __init__(self, own_pid: int, exited: set[str]) -> None:
        self._own_pid = own_pid
        self._exited = exited

    def status(self, runner: Runner) -> RunnerStatus:
        match runner:
            case LocalRunner(pid=None):
                return RunnerStatus.RUNNING
            case LocalRunner(pid=pid, path=path) if pid == self._own_pid:
                return RunnerStatus.FINISHED if path in self._exited else RunnerStatus.RUNNING
            case LocalRunner(pid=pid):
                assert pid is not None
                return RunnerStatus.RUNNING if _alive(pid) else RunnerStatus.ORPHANED
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
