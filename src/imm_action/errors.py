"""The errors a person is meant to read, and the exit code each one maps to (SPEC §6)."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_NEEDS_HUMAN = 1
EXIT_INVALID_INPUT = 2
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: whoever read our output stopped reading
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process SIGTERM ended


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with one input file, located as precisely as we can."""

    path: str
    line: int | None
    message: str

    def render(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class ImmError(Exception):
    """An expected failure: its message is for a person and says what to do next."""

    exit_code = EXIT_UNEXPECTED


class UsageError(ImmError):
    """The command line itself is wrong."""

    exit_code = EXIT_INVALID_INPUT


class InputError(ImmError):
    """One or more input files are malformed; every problem found is carried, not just the first."""

    exit_code = EXIT_INVALID_INPUT

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]) -> None:
        self.problems = tuple(sorted(problems))
        super().__init__("\n".join(problem.render() for problem in self.problems))


class NeedsHumanError(ImmError):
    """The batch cannot go on without a person (parked child, exhausted budget, broken lineage)."""

    exit_code = EXIT_NEEDS_HUMAN
