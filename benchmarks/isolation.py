"""What the sandbox costs a command (issue 29, ADR 0048), and setup reused.

A repository of `--files` files; `--checks` distinct trivial checks (`true`, each its own
descriptor) verified one after another on one tree, first unconfined under the reaper (the
baseline, same run), then in the bubblewrap sandbox. Printed: the per-check wall of each, the
difference (target: <= 15 ms a command), the fixed cost of choosing the sandbox, and what an
unchanged `check_setup` costs a later run (target: <= 0.2 s), what a fresh view between
two checks of one tree costs (issue 42: <= 5 ms), and what `sandbox_expose` of a 400 MB folder
costs a lane (issue 59: <= 50 ms; it was copied into every lane's home). Needs a kernel that
lets bwrap make namespaces (or passwordless sudo).

    python benchmarks/isolation.py [--checks 40] [--files 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from imm_action.git.repo import GitRepo  # noqa: E402
from imm_action.git.runner import GitRunner  # noqa: E402
from imm_action.model.descriptor import parse_descriptor  # noqa: E402
from imm_action.sandbox.choice import choose_confinement  # noqa: E402
from imm_action.sandbox.confine import NOT_CONFINED  # noqa: E402
from imm_action.verify.check_setup import CheckPlace  # noqa: E402
from imm_action.verify.checks import Check, Verifier  # noqa: E402
from imm_action.verify.result_cache import ResultCache  # noqa: E402


def make_repo(root: Path, files: int) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    for index in range(files):
        folder = root / f"d{index % 50:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{index}.txt").write_text(f"{index}\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "files"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD^{tree}"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def checks(count: int, salt: str) -> list[Check]:
    """Distinct trivial checks: each its own descriptor, so none is answered from the cache."""
    found = []
    for index in range(count):
        command = {"executable": "true", "argv": [salt, str(index)]}
        body = {"contract": "assurance_kernel/verification_descriptor/v2", "command": command}
        found.append(Check(f"t{index}:ok", parse_descriptor(json.dumps(body))))
    return found


def per_check(repo: GitRepo, tree: str, count: int, place: CheckPlace | None, salt: str) -> float:
    verifier = Verifier(repo, ResultCache(), path_env=os.environ["PATH"], workers=1, place=place)
    started = time.perf_counter()
    for check in checks(count, salt):
        [result] = verifier.verify(tree, [check])
        if not result.passed:
            raise SystemExit(f"{check.check_id} failed: {result}")
    return (time.perf_counter() - started) / count


def command_cost(confinement: object, root: Path, count: int) -> tuple[float, float]:
    """Median wall of `true` started and ended by start_contained in the sandbox (its tree
    and a home bound in) and of `true` as a bare process, in the same loop."""
    from imm_action.sandbox.confine import Bind, Confined, Confinement
    from imm_action.sandbox.contain import end, start_contained, wait_contained

    assert isinstance(confinement, Confinement)
    home = root / "home-bench"
    home.mkdir(exist_ok=True)
    binds = (Bind(root, confinement.tree_at or str(root), writable=True),
             Bind(home, str(home), writable=True))  # fmt: skip
    confined = Confined(confinement, binds, confinement.tree_at or str(root))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    sandboxed, bare = [], []
    for _ in range(count):
        started = time.perf_counter()
        process = start_contained(["/bin/true"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                                  confined=confined)  # fmt: skip
        if wait_contained(process, 30) != 0:
            raise SystemExit("`true` failed in the sandbox")
        end(process)
        sandboxed.append(time.perf_counter() - started)
        started = time.perf_counter()
        subprocess.run(["/bin/true"], cwd=root, env=env, check=True)
        bare.append(time.perf_counter() - started)
    return statistics.median(sandboxed), statistics.median(bare)


def fresh_view_cost(
    repo: GitRepo, tree: str, confinement: object, count: int
) -> tuple[float, float]:
    """Median wall of one fresh view (issue 42 #1) after a check wrote a file: an overlay's
    new upper folder, and a whole checkout cleaned and moved back."""
    from imm_action.sandbox.confine import Confinement
    from imm_action.verify.overlays import overlay_tree
    from imm_action.verify.trees import checked_out

    assert isinstance(confinement, Confinement)
    assert confinement.bwrap is not None
    overlay: list[float] = []
    whole: list[float] = []
    with overlay_tree(repo, tree, confinement.bwrap, index=False) as view:
        for _ in range(count):
            (view.upper / "written-by-a-check.txt").write_text("x\n")
            started = time.perf_counter()
            view.fresh_view(tree)
            overlay.append(time.perf_counter() - started)
    with checked_out(repo, tree) as checkout:
        for _ in range(count):
            (checkout.root / "written-by-a-check.txt").write_text("x\n")
            started = time.perf_counter()
            checkout.fresh_view(tree)
            whole.append(time.perf_counter() - started)
    return statistics.median(overlay), statistics.median(whole)


def setup_reused(repo: GitRepo, confinement: object, run: int) -> float:
    """A later run's cost of an unchanged check_setup: the first run prepares it, the second
    (timed) finds it kept for the same command and lockfiles."""
    from imm_action.sandbox.confine import Confinement

    assert isinstance(confinement, Confinement)
    setup = f"sh -c 'mkdir -p $HOME/.local/bin && echo {run} > $HOME/.local/bin/tool'"
    head = repo.resolve("HEAD")
    CheckPlace(confinement, os.environ["PATH"], setup, head).prepared(repo)  # the first run
    started = time.perf_counter()
    again = CheckPlace(confinement, os.environ["PATH"], setup, head).prepared(repo)
    took = time.perf_counter() - started
    if not getattr(again, "reused", False):
        raise SystemExit(f"check_setup was not reused: {again}")
    return took


def exposed_cost(root: Path, megabytes: int, count: int) -> tuple[float, float, float]:
    """What `sandbox_expose` of a folder of `megabytes` MB costs a lane (issue 59 #6): the
    median wall of making a lane's home and running `true` in it with the folder exposed,
    without it, and the copy ADR 0048's layout made of it (once)."""
    import shutil

    from imm_action.sandbox.confine import Confined
    from imm_action.sandbox.contain import end, start_contained, wait_contained
    from imm_action.sandbox.toolchains import populate_home

    user_home = root / "user-home"
    big = user_home / ".big"
    big.mkdir(parents=True)
    block = os.urandom(1 << 20)
    for index in range(megabytes):
        (big / f"part-{index}").write_bytes(block)
    environ = {**os.environ, "HOME": str(user_home)}
    folders = [root / ".git"]
    with_big = choose_confinement("auto", holds_credential=True, git_folders=folders,
                                  exposed=["~/.big"], environ=environ)  # fmt: skip
    without = choose_confinement("auto", holds_credential=True, git_folders=folders,
                                 environ=environ)  # fmt: skip
    walls: dict[bool, list[float]] = {True: [], False: []}
    for index in range(count):
        for exposing, confinement in ((True, with_big), (False, without)):
            home = root / f"lane-home-{exposing}-{index}"
            started = time.perf_counter()
            home.mkdir()
            populate_home(home, confinement.home_binds(), confinement.toolchains.files,
                          confined=True)  # fmt: skip
            binds = tuple(confinement.own_home_binds(home))
            confined = Confined(confinement, binds, "/")
            process = start_contained(["/bin/sh", "-c", f"test -e {home}/.big/part-0"
                                       if exposing else "true"], cwd=root,
                                      env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
                                      stdout=subprocess.DEVNULL, confined=confined)  # fmt: skip
            if wait_contained(process, 30) != 0:
                raise SystemExit("the exposed folder was not seen in the lane's home")
            end(process)
            walls[exposing].append(time.perf_counter() - started)
    started = time.perf_counter()
    shutil.copytree(big, root / "copied", symlinks=True)
    copied = time.perf_counter() - started
    return statistics.median(walls[True]), statistics.median(walls[False]), copied


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=40)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--exposed-mb", type=int, default=400)
    args = parser.parse_args()
    print(f"isolation: {args.checks} trivial checks on a tree of {args.files} files")
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="imm-isolation-") as scratch:
        root = Path(scratch) / "repo"
        root.mkdir()
        tree = make_repo(root, args.files)
        repo = GitRepo(root, GitRunner(root))
        fixed: list[float] = []
        plain: list[float] = []
        sandboxed: list[float] = []
        setup_again: list[float] = []
        folders = [root / ".git"]
        for run in range(args.runs):
            started = time.perf_counter()
            confinement = choose_confinement("auto", holds_credential=True, git_folders=folders)
            fixed.append(time.perf_counter() - started)
            unconfined = CheckPlace(NOT_CONFINED, os.environ["PATH"])
            place = CheckPlace(confinement, os.environ["PATH"])
            plain.append(per_check(repo, tree, args.checks, unconfined, f"plain{run}"))
            sandboxed.append(per_check(repo, tree, args.checks, place, f"sandboxed{run}"))
            setup_again.append(setup_reused(repo, confinement, run))
        confinement = choose_confinement("auto", holds_credential=True, git_folders=folders)
        one, bare = command_cost(confinement, root, 100)
        fresh_overlay, fresh_checkout = fresh_view_cost(repo, tree, confinement, 100)
        exposing, plain_home, copied = exposed_cost(Path(scratch), args.exposed_mb, 20)
        base, cost = statistics.median(plain), statistics.median(sandboxed)
        print(f"{'':<22} {'median':>9}   runs")
        print(f"{'unconfined (baseline)':<22} {base * 1000:7.1f}ms   "
              + ", ".join(f"{p * 1000:.1f}" for p in plain))  # fmt: skip
        print(f"{'in the sandbox':<22} {cost * 1000:7.1f}ms   "
              + ", ".join(f"{p * 1000:.1f}" for p in sandboxed))  # fmt: skip
        print(f"per-command overhead of the sandbox: {(cost - base) * 1000:.1f} ms "
              f"(sandboxed / baseline = {cost / base:.2f})")  # fmt: skip
        print(
            f"one sandboxed command (`true`, median of 100): {one * 1000:.1f} ms; the same "
            f"command bare: {bare * 1000:.1f} ms; the sandbox adds {(one - bare) * 1000:.1f} ms"
        )
        print(
            f"a fresh view between two checks of one tree (median of 100): overlay "
            f"{fresh_overlay * 1000:.2f} ms, whole checkout {fresh_checkout * 1000:.1f} ms "
            f"(target: <= 5 ms; {fresh_overlay / one:.2f} of one sandboxed command)"
        )
        print(
            f"a lane's home with {args.exposed_mb} MB exposed (`sandbox_expose`, median of 20): "
            f"{exposing * 1000:.1f} ms, without it {plain_home * 1000:.1f} ms: the folder adds "
            f"{(exposing - plain_home) * 1000:.1f} ms (target: <= 50 ms); copying it, as "
            f"before issue 59: {copied * 1000:.0f} ms"
        )
        print(f"fixed cost per run (choosing the sandbox): "
              f"{statistics.median(fixed) * 1000:.1f} ms")  # fmt: skip
        print(
            f"check_setup unchanged, a later run's setup: "
            f"{statistics.median(setup_again) * 1000:.1f} ms (median of {args.runs})"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
