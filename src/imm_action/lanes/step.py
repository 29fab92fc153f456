"""One configured command of a lane — `lane_setup` or an executor run — from its command line
to how it ended: argv from shlex (never a shell), under a reaper in a session of its own, in
the lane's sandbox, its output copied to the lane log masked as it comes, and what the agent
reported of itself read from its standard output alone (issue 45)."""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

from imm_action.lanes.agent_report import AgentReportReader
from imm_action.masking import NO_MASK, Masker
from imm_action.model.outcome import FAILURE_TAIL_BYTES, FAILURE_TAIL_LINES, Failure
from imm_action.model.spend import AgentRun, ExecutorReport
from imm_action.render.failures import failure_headline
from imm_action.sandbox.confine import Confined
from imm_action.sandbox.contain import end, start_contained, wait_contained
from imm_action.text import LineReader, last_bytes
from imm_action.verify.failures import command_text

OUTPUT_CHUNK = 65536


@dataclass(frozen=True)
class StepEnd:
    """How a command ended: None when it succeeded, else what failed; and its report."""

    failure: Failure | None
    report: AgentRun = field(default_factory=AgentRun)


@dataclass
class LaneCommands:
    """What every command of one lane shares: where it runs, its sandbox, the lane's limit
    (`timeout_s` from `started`, every command together), the log and the mask."""

    cwd: Path
    confined: Callable[[Sequence[str]], Confined]
    untrusted: Callable[[], AbstractContextManager[None]]
    timeout_s: float
    log: TextIO
    mask: Masker = NO_MASK
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(
        self,
        name: str,
        command: str,
        env: Mapping[str, str],
        stdin: Path | None = None,
        report: ExecutorReport = "none",
    ) -> StepEnd:
        """Run a configured command; whatever it started is gone when this returns."""
        try:
            argv = shlex.split(command)
        except ValueError as error:
            shown = self.mask(command)
            return StepEnd(
                self.failed(name, shown, None, error=f"cannot be split into arguments: {error}")
            )
        shown = self.mask(command_text(argv))
        if not argv:
            return StepEnd(self.failed(name, shown, None, error="the command is empty"))
        print(f"imm: {name}: {shown}", file=self.log, flush=True)
        reader = AgentReportReader(report)
        tail: deque[str] = deque(maxlen=FAILURE_TAIL_LINES)
        # untrusted: a write of the slot's index (beside the tree) has the slot rebuilt
        with self.untrusted():
            try:
                # the executor gets its prompt on stdin too: agents read it there (`claude -p`)
                with open(stdin or os.devnull, "rb") as given:
                    process = start_contained(
                        argv, cwd=self.cwd, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, stdin=given, confined=self.confined(argv),
                    )  # fmt: skip
            except OSError as error:
                failure = self.failed(name, shown, None, error=f"cannot start {argv[0]}: {error}")
                return StepEnd(failure)
            with _Copying(self, process, tail, reader):
                remaining = self.timeout_s - (time.monotonic() - self.started)
                code = wait_contained(process, max(0.0, remaining))
        timed_out = code is None
        if code == 0 and not timed_out:
            return StepEnd(None, reader.report())
        timeout_s = self.timeout_s if timed_out else None
        return StepEnd(
            self.failed(name, shown, code, timeout_s=timeout_s, tail=tail), reader.report()
        )

    def copy(
        self, stream: IO[bytes] | None, tail: deque[str], reader: AgentReportReader | None
    ) -> None:
        """Copy one output stream to the lane log line by line, keeping the last lines; read in
        chunks, each line cleaned and cut at LINE_BYTES, so no output holds memory. The report
        reader sees the raw chunks (standard output only), before any cut."""
        if stream is None:
            return
        lines = LineReader()
        fd = stream.fileno()
        while chunk := os.read(fd, OUTPUT_CHUNK):
            if reader is not None:
                reader.feed(chunk)
            self._log_lines(lines.feed(chunk), tail)
        self._log_lines(lines.finish(), tail)
        stream.close()

    def _log_lines(self, lines: list[str], tail: deque[str]) -> None:
        if not lines:
            return
        with self._lock:  # stdout and stderr are copied by two threads
            for line in lines:
                masked = self.mask(line)
                self.log.write(masked + "\n")
                tail.append(masked)
            self.log.flush()

    def failed(
        self,
        name: str,
        shown: str,
        code: int | None,
        *,
        timeout_s: float | None = None,
        error: str | None = None,
        tail: Sequence[str] = (),
    ) -> Failure:
        failure = Failure(
            step=name,
            command=shown,
            exit_code=code,
            timeout_s=timeout_s,
            error=self.mask(error) if error else None,
            output_tail=last_bytes("\n".join(tail), FAILURE_TAIL_BYTES),
        )
        # Its output is in the log just above: the headline is enough here.
        print(f"imm: {failure_headline(failure)}", file=self.log, flush=True)
        return failure


class _Copying(AbstractContextManager[None]):
    """Both output streams copied while the command runs; on leaving, the reaper ends every
    process the command started and the copiers finish."""

    def __init__(
        self,
        commands: LaneCommands,
        process: subprocess.Popen[bytes],
        tail: deque[str],
        reader: AgentReportReader,
    ) -> None:
        self._process = process
        self._threads = [
            threading.Thread(
                target=commands.copy, args=(process.stdout, tail, reader), daemon=True
            ),
            threading.Thread(target=commands.copy, args=(process.stderr, tail, None), daemon=True),
        ]

    def __enter__(self) -> None:
        for thread in self._threads:
            thread.start()

    def __exit__(self, *_: object) -> None:
        end(self._process)
        for thread in self._threads:
            thread.join(timeout=5)
