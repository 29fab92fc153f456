"""Verdict files of verify jobs (issue 32, decision 0054): written by imm outside the sandbox
once a shard's checks ran, uploaded as artifacts of the run, read back by the integrate job."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from imm_action.model.outcome import CheckResult
from imm_action.model.shard import (
    VERDICT_ARTIFACT_PREFIX,
    VERDICT_CONTRACT,
    CheckVerdict,
    ShardVerdict,
    VerifyShard,
    verdict_artifact,
)

VERDICT_MAX_BYTES = 64 * 1024 * 1024  # larger is not a verdict imm wrote: never read


def write_verdict(
    folder: Path,
    *,
    batch_id: str,
    run_id: int,
    shard: VerifyShard,
    results: Sequence[tuple[str, str, CheckResult]],
) -> Path:
    """The verdict of `shard` in `folder`, named after its artifact: (tree, descriptor digest,
    result) per check run. Returns where it is."""
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
    path = folder / f"{verdict_artifact(batch_id, run_id, shard.index)}.json"
    folder.mkdir(parents=True, exist_ok=True)
    # whole or absent: a job killed while writing leaves no half verdict to upload
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(verdict.model_dump_json(indent=1).encode())
    os.replace(partial, path)
    return path


def read_verdict_files(folder: Path) -> dict[str, bytes]:
    """Artifact name -> its verdict file, as actions/download-artifact lays artifacts out (a
    folder per artifact, or the one artifact's file directly). A file's name says which shard
    it claims to be; its content must say the same (integrate.shards). A name found twice,
    or a file too large to be a verdict imm wrote, is given as empty: refused, its shard's
    checks not run."""
    found: dict[str, bytes] = {}
    if not folder.is_dir():
        return found
    pattern = f"{VERDICT_ARTIFACT_PREFIX}*.json"  # a verdict file is named after its artifact
    candidates = [*folder.glob(pattern), *folder.glob(f"*/{pattern}")]
    for file in sorted(candidates):
        if file.is_symlink() or file.parent.is_symlink() or not file.is_file():
            continue
        name = file.name.removesuffix(".json")
        if name in found or file.stat().st_size > VERDICT_MAX_BYTES:
            found[name] = b""
            continue
        found[name] = file.read_bytes()
    return found
