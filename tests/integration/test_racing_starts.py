"""Two passes that both decided to start a batch of one initiative — here both continue a
cancelled batch, where the branch does not move and the new state refs are new — end with one
batch: every start moves the initiative's latest-batch ref with a lease, so the second loses its
CAS, runs again on fresh refs and resumes the first's batch."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from imm_action.batches.pass_inputs import pass_ports, pass_request
from imm_action.git.refs import LocalRefStore
from imm_action.git.repo import RefUpdate
from imm_action.integrate.continuation import Stopped
from imm_action.integrate.store import StateStore, forget_read_states
from imm_action.passes.driver import reconcile
from imm_action.passes.request import PassResult
from tests.batch_helpers import make_project, open_local, run_pass
from tests.conftest import run_cli


class StaleUntilFirstWrite:
    """Reads what the refs were when it was made (this pass read them before the other pass
    wrote), writes for real."""

    def __init__(self, live: LocalRefStore) -> None:
        self.live = live
        self.repo = live.repo
        self.frozen = {**live.list("refs/imm/"), **live.list("refs/heads/")}
        self.stale = True

    def refresh(self) -> None:
        pass

    def read(self, names: Iterable[str]) -> dict[str, str | None]:
        names = list(names)
        if not self.stale:
            return self.live.read(names)
        return {n: self.frozen.get(n) for n in names}

    def list(self, prefix: str) -> dict[str, str]:
        if not self.stale:
            return self.live.list(prefix)
        return {k: v for k, v in self.frozen.items() if k.startswith(prefix)}

    def compare_and_swap(self, updates: Sequence[RefUpdate]) -> None:
        self.stale = False
        self.live.compare_and_swap(updates)


def _continue(repo: Path, batch_id: str, refs: StaleUntilFirstWrite | None = None) -> PassResult:
    batch_repo = open_local(repo)
    request = pass_request(batch_repo, "init", batch_id=None, admit=True, stopped=Stopped.CONTINUE)
    request = dataclasses.replace(request, new_batch_id=batch_id)
    ports = pass_ports(batch_repo, lambda line: None, path_env=os.environ["PATH"])
    if refs is not None:
        ports = dataclasses.replace(ports, refs=refs)  # type: ignore[arg-type]
    return reconcile(request, ports)


def test_two_passes_racing_to_continue_a_stopped_batch_make_one_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(tmp_path / "r", {"a": [], "b": []})
    run_pass(repo)
    assert run_cli(capsys, "cancel", "init", "--repo", str(repo))[0] == 0
    batch_repo = open_local(repo)
    stale = StaleUntilFirstWrite(batch_repo.refs)  # pass 2 has read the refs ...
    _continue(repo, "batch-init-first")  # ... when pass 1 writes its continuation
    forget_read_states()
    _continue(repo, "batch-init-second", refs=stale)
    forget_read_states()
    live = [
        b.state.batch_id
        for b in StateStore(batch_repo.refs).batches_of("init")
        if not b.state.batch_state.is_terminal
    ]
    assert len(live) == 1, live
