"""Verdict files of verify jobs (issue 32, decision 0054): written by imm outside the sandbox
once a shard's checks ran, uploaded as artifacts of the run, read back by the integrate job."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from imm_action.model.outcome import CheckResult
from imm_action.model.shard import VERDICT_CONTRACT, CheckVerdict, ShardVerdict, VerifyShard

VERDICT_FILE = "verdict.json"  # the one file of a verdict artifact
VERDICT_MAX_BYTES = 64 * 1024 * 1024  # larger is not a verdict imm wrote: never read


def write_verdict(
    path: Path,
    *,
    batch_id: str,
    run_id: int,
    shard: VerifyShard,
    results: Sequence[tuple[str, str, CheckResult]],
) -> ShardVerdict:
    """The verdict of `shard` at `path`: (tree, descriptor digest, result) per check run."""
    verdict = ShardVerdict(
        contract=VERDICT_CONTRACT,
        batch_id=batch_id,
        run_id=run_id,
        shard=shard.index,
        verdicts=[
            CheckVerdict(tree=tree, descriptor_digest=digest, result=result)
            for tree, digest, result in results
        ],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    # whole or absent: a job killed while writing leaves no half verdict to upload
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(verdict.model_dump_json(indent=1).encode())
    os.replace(partial, path)
    return verdict


def read_verdict_files(folder: Path) -> dict[str, bytes]:
    """Artifact name -> its verdict file, as actions/download-artifact lays artifacts out (a
    folder per artifact). Anything else there is not read; a file too large to be a verdict
    imm wrote is given as empty (refused, its shard's checks not run)."""
    found: dict[str, bytes] = {}
    if not folder.is_dir():
        return found
    for artifact in sorted(folder.iterdir()):
        file = artifact / VERDICT_FILE
        if artifact.is_symlink() or not artifact.is_dir() or file.is_symlink():
            continue
        try:
            size = os.stat(file).st_size
        except OSError:
            continue
        found[artifact.name] = file.read_bytes() if size <= VERDICT_MAX_BYTES else b""
    return found
