"""What the sandbox shows, hides and lets write, read off bwrap's arguments (ADR 0048): the
order matters, since bwrap mounts in argument order and a later mount covers an earlier one."""

from __future__ import annotations

from pathlib import Path

from imm_action.verify.confine import Bind, Confinement, hidden_paths, toolchain_folders


def _layout(confinement: Confinement, binds: tuple[Bind, ...] = ()) -> list[str]:
    return confinement.command(["true"], {}, binds=binds, cwd="/")


def _index(args: list[str], *window: str) -> int:
    for at in range(len(args) - len(window) + 1):
        if tuple(args[at : at + len(window)]) == window:
            return at
    raise AssertionError(f"{window} not in {args}")


def test_the_sandbox_is_bwrap_by_its_absolute_path_and_the_host_is_read_only() -> None:
    args = _layout(Confinement("/opt/wheel/bwrap", "test"))
    assert args[0] == "/opt/wheel/bwrap"
    assert _index(args, "--ro-bind", "/", "/") < _index(args, "--tmpfs", "/tmp")
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in args
    assert _index(args, "--cap-drop", "ALL")


def test_a_hidden_path_is_hidden_after_the_operators_writable_folders(tmp_path: Path) -> None:
    secret = tmp_path / ".ssh"
    secret.mkdir()
    key = tmp_path / ".netrc"
    key.write_text("x")
    confinement = Confinement("bwrap", "t", hidden=(str(secret), str(key)),
                              writable=(str(tmp_path),))  # fmt: skip
    args = _layout(confinement)
    writable = _index(args, "--bind-try", str(tmp_path), str(tmp_path))
    assert writable < _index(args, "--tmpfs", str(secret))
    assert writable < _index(args, "--ro-bind", "/dev/null", str(key))


def test_the_commands_own_binds_come_last_with_passable_parents_inside_a_tmpfs(
    tmp_path: Path,
) -> None:
    git = tmp_path / ".git"
    git.mkdir()
    tree = f"{git}/imm/tree"
    args = _layout(Confinement("bwrap", "t", hidden=(str(git),), tree_at=tree),
                   (Bind(Path("/pool/slot-0/tree"), tree, writable=True),))  # fmt: skip
    bind = _index(args, "--bind", "/pool/slot-0/tree", tree)
    assert _index(args, "--tmpfs", str(git)) < bind
    assert _index(args, "--perms", "0755", "--dir", f"{git}/imm") < bind


def test_an_exposed_path_inside_a_hidden_folder_is_shown_again(tmp_path: Path) -> None:
    hidden = tmp_path / ".config" / "gh"
    hidden.mkdir(parents=True)
    exposed = str(hidden / "hosts.yml")
    args = _layout(Confinement("bwrap", "t", hidden=(str(hidden),), exposed=(exposed,)))
    assert _index(args, "--tmpfs", str(hidden)) < _index(args, "--ro-bind-try", exposed, exposed)


def test_a_venv_under_tmp_on_path_is_shown_but_never_one_under_a_hidden_path() -> None:
    shown = toolchain_folders("/tmp/clone/.venv/bin:/root/.ssh/bin:/usr/bin", ("/root/.ssh",))
    assert "/tmp/clone/.venv" in shown
    assert not any(path.startswith("/root/.ssh") for path in shown)


def test_credential_files_of_the_home_are_hidden_where_they_exist(tmp_path: Path) -> None:
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".git-credentials").write_text("x")
    hidden = hidden_paths([], tmp_path, {"RUNNER_TEMP": str(tmp_path / "runner")})
    assert str(tmp_path / ".aws") in hidden
    assert str(tmp_path / ".git-credentials") in hidden
    assert str(tmp_path / ".kube") not in hidden  # absent: nothing to hide


def test_the_runners_temp_folder_is_hidden_where_imm_writes_a_verify_jobs_verdict(
    tmp_path: Path,
) -> None:
    """A verify job's verdict is written in $RUNNER_TEMP (ADR 0054): a check that saw the folder
    could leave a file there for the upload step."""
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    hidden = hidden_paths([], tmp_path / "home", {"RUNNER_TEMP": str(runner_temp)})
    assert str(runner_temp.resolve()) in hidden
