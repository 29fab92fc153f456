"""What one round of integration did, as the log and the job summary say it."""

from __future__ import annotations

from dataclasses import dataclass

from imm_action.text import listed


@dataclass(frozen=True)
class Culprit:
    task_id: str
    checks: tuple[str, ...]  # the check ids that first failed on its candidate
    candidate: str


@dataclass(frozen=True)
class StackRecord:
    """What one round of integration did, for the log and the job summary: the lanes verified
    as one stack, the descriptors it ran, and what bisection found."""

    lanes: tuple[str, ...]
    check_runs: int
    culprits: tuple[Culprit, ...] = ()
    carried: int = 0  # checks whose last pass was carried over (nothing they read changed)
    on_head: tuple[str, ...] = ()  # check ids no lane is blamed for (failing on the head)
    on_runners: int = 0  # results verify jobs on other runners found (decision 0054)
    shared: int = 0  # verdicts another check's run gave: the same command on the same tree
    ahead: int = 0  # results run ahead, while a culprit below was tried (counted with its stack)

    def line(self) -> str:
        runs = f"{self.check_runs} check run{'' if self.check_runs == 1 else 's'}"
        if self.on_runners:
            runs += f" here, {self.on_runners} on verify runners"
        if self.carried:
            runs += f", {self.carried} carried over"
        if self.shared:
            runs += f", {self.shared} given by another check's run of the same command"
        if self.ahead:
            runs += f", {self.ahead} run ahead while a lane below was tried"
        count = len(self.lanes)
        head = (
            f"verified {count} lane{'' if count == 1 else 's'} as one stack ({listed(self.lanes)})"
        )
        if self.on_head:
            return (
                f"{head}: {runs}; {listed(self.on_head)} failed on every run on the batch "
                "head itself, or on a candidate and its parent alike, so no lane is blamed"
            )
        if not self.culprits:
            return f"{head}: {runs}, every check passed on its top"
        found = "; ".join(
            f"{c.task_id} ({', '.join(c.checks)} first failed on {c.candidate[:12]})"
            for c in self.culprits
        )
        return f"{head}: {runs}; bisection found {found}"
