"""An executor for the pooled lane trees (issue 13): task `bad` tampers with its tree, its
repository and the slot around it; task `good`, run later in the same pooled tree, records
what it finds. Everything goes to files in `$IMM_TEST_DIR`.

`bad` (exits 1 when done, so imm never snapshots what it left):
- modifies `config.txt` keeping its size and restoring its mtime;
- moves `docs/plans` aside and puts a symlink in its place (git's stat check through the link
  sees the unchanged files behind it);
- replaces `shared.txt` by a symlink to a file outside the repository;
- leaves untracked and ignored-looking files, a FIFO, and a read-only folder;
- sets `core.fsmonitor`, `core.hooksPath`, attributes, excludes, a replace ref and another
  alternates entry in its repository;
- leaves a `setsid` daemon writing `late.txt` into the tree;
- with `IMM_TEST_INDEX_ATTACK`: marks `config.txt` skip-worktree in the slot's own index
  (`../index`), so a git trusting that index would never look at the file again.

`good` writes `good.json`: its working directory, whether `bad` had run, the files that differ
from its lane base (read from the object store, not through any index), and what its
repository holds; then its own change, `good.txt`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def git(*args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def tamper(out: Path) -> None:
    (out / "bad.cwd").write_text(os.getcwd())
    config = Path("config.txt")
    before = config.stat()
    config.write_text("mode=EV\n")  # same size as "mode=ok\n"
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.rename("docs/plans", "docs/.moved")
    os.symlink(".moved", "docs/plans")
    outside = out / "outside.txt"
    outside.write_text("base\n")
    os.unlink("shared.txt")
    os.symlink(outside, "shared.txt")
    Path("junk/deep").mkdir(parents=True)
    Path("junk/deep/x.o").write_text("build output\n")
    Path(".cache").mkdir()
    Path(".cache/state").write_text("cache\n")
    os.mkfifo("pipe")
    Path("locked/inner").mkdir(parents=True)
    Path("locked/inner/f").write_text("x\n")
    os.chmod("locked/inner", 0o500)
    os.chmod("locked", 0o500)
    program = out / "fsmonitor.sh"
    program.write_text(f"#!/bin/sh\ntouch {out / 'fsmonitor-ran'}\necho /\n")
    program.chmod(0o755)
    git("config", "core.fsmonitor", str(program))
    git("config", "core.hooksPath", str(out))
    Path(".git/info").mkdir(exist_ok=True)
    Path(".git/info/attributes").write_text("* filter=evil\n")
    Path(".git/info/exclude").write_text("*\n")
    head = git("rev-parse", "HEAD").strip()
    git("replace", "-f", head, git("commit-tree", "-m", "evil", f"{head}^{{tree}}").strip())
    with open(".git/objects/info/alternates", "a") as alternates:
        alternates.write(f"{out}\n")
    if os.environ.get("IMM_TEST_INDEX_ATTACK"):
        slot_index = str(Path("..", "index").resolve())
        env = {**os.environ, "GIT_INDEX_FILE": slot_index}
        git("update-index", "--skip-worktree", "config.txt", env=env)
    writer = (
        "import pathlib, time\n"
        "for n in range(400):\n"
        "    pathlib.Path('late.txt').write_text(str(n)); time.sleep(0.025)\n"
    )
    subprocess.Popen(
        ["setsid", sys.executable, "-c", writer],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.1)


def inspect(out: Path) -> None:
    base = os.environ["IMM_BASE_HEAD"]
    expected = {}
    listing = git("ls-tree", "-r", "-z", base)
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        expected[path] = git("cat-file", "blob", meta.split()[2])
    found = {}
    for folder, dirs, files in os.walk(".", followlinks=False):
        dirs[:] = [d for d in dirs if not (folder == "." and d == ".git")]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)[2:]
            if os.path.islink(path) or not os.path.isfile(path):
                found[path] = "(not a regular file)"
            else:
                found[path] = Path(path).read_text(errors="replace")
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    differing = sorted(
        path for path in expected.keys() | found.keys() if expected.get(path) != found.get(path)
    )
    repository = {
        "config": Path(".git/config").read_text(),
        "alternates": Path(".git/objects/info/alternates").read_text().splitlines(),
        "info": sorted(p.name for p in Path(".git/info").iterdir())
        if Path(".git/info").is_dir()
        else [],
        "replace": git("for-each-ref", "refs/replace").split(),
    }
    report = {
        "cwd": os.getcwd(),
        "after_bad": (out / "bad.cwd").exists(),
        "differing": differing,
        "repository": repository,
    }
    (out / "good.json").write_text(json.dumps(report))
    Path("good.txt").write_text("good\n")


def main() -> int:
    out = Path(os.environ["IMM_TEST_DIR"])
    task = os.environ["IMM_TASK_ID"]
    if task == "bad":
        tamper(out)
        return 1
    inspect(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
