"""What the sandbox shows, hides and lets write, read off bwrap's arguments (ADR 0048): the
order matters, since bwrap mounts in argument order and a later mount covers an earlier one."""

from __future__ import annotations

from pathlib import Path

from imm_action.sandbox.choice import hidden_paths
from imm_action.sandbox.confine import Bind, Confinement, named_folders
from imm_action.sandbox.view import host_view


def _layout(confinement: Confinement, binds: tuple[Bind, ...] = ()) -> list[str]:
    return confinement.command(["true"], {}, binds=binds, cwd="/")


def _index(args: list[str], *window: str) -> int:
    for at in range(len(args) - len(window) + 1):
        if tuple(args[at : at + len(window)]) == window:
            return at
    raise AssertionError(f"{window} not in {args}")


def test_the_sandbox_is_bwrap_by_its_absolute_path_from_an_empty_root_of_system_folders() -> None:
    """Issue 59: the host is never bound whole; the system's folders are, read-only, and the
    root itself is made read-only last (nothing may fill it)."""
    args = _layout(Confinement("/opt/wheel/bwrap", "test"))
    assert args[0] == "/opt/wheel/bwrap"
    assert ("--ro-bind", "/", "/") not in zip(args, args[1:], args[2:], strict=False)
    assert _index(args, "--ro-bind", "/usr", "/usr") < _index(args, "--tmpfs", "/tmp")
    assert _index(args, "--ro-bind", "/etc", "/etc")
    assert _index(args, "--remount-ro", "/") > _index(args, "--tmpfs", "/tmp")
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


def test_an_operators_writable_folder_below_a_shown_folder_stays_writable() -> None:
    """Issue 43 #3: the shown folder, bound later, made the writable one read-only."""
    args = _layout(Confinement("bwrap", "t", toolchain=("/tmp/clone",),
                               writable=("/tmp/clone/out",)))  # fmt: skip
    shown = _index(args, "--ro-bind-try", "/tmp/clone", "/tmp/clone")
    assert shown < _index(args, "--bind-try", "/tmp/clone/out", "/tmp/clone/out")


def test_every_private_root_is_absent_or_an_empty_tmpfs_of_bounded_size() -> None:
    """A private root outside the system's folders is simply not there; one inside them (a
    working copy under /usr/src) is an empty tmpfs, mounted after the folder it covers."""
    args = _layout(Confinement("bwrap", "t", private=("/home", "/usr/src/app"),
                               tmpfs_bytes=1 << 28))  # fmt: skip
    assert _index(args, "--size", str(1 << 28), "--tmpfs", "/tmp")
    assert _index(args, "--size", str(1 << 28), "--tmpfs", "/var/tmp")
    for root in ("/dev/shm", "/run", "/usr/src/app"):
        assert _index(args, "--size", str(64 << 20), "--tmpfs", root)
    assert "/home" not in args
    assert _index(args, "--ro-bind", "/usr", "/usr") < _index(args, "--tmpfs", "/usr/src/app")


def test_the_commands_own_binds_come_last_with_passable_parents_inside_a_tmpfs(
    tmp_path: Path,
) -> None:
    git = tmp_path / ".git"
    git.mkdir()
    tree = f"{git}/imm/tree"
    # in the operator's writable folder: the private /tmp alone would have hidden it already
    args = _layout(Confinement("bwrap", "t", hidden=(str(git),), tree_at=tree,
                               writable=(str(tmp_path),)),
                   (Bind(Path("/pool/slot-0/tree"), tree, writable=True),))  # fmt: skip
    bind = _index(args, "--bind", "/pool/slot-0/tree", tree)
    assert _index(args, "--tmpfs", str(git)) < bind
    assert _index(args, "--perms", "0755", "--dir", f"{git}/imm") < bind


def test_an_exposed_path_inside_a_hidden_folder_is_shown_again(tmp_path: Path) -> None:
    hidden = tmp_path / ".config" / "gh"
    hidden.mkdir(parents=True)
    exposed = str(hidden / "hosts.yml")
    args = _layout(Confinement("bwrap", "t", hidden=(str(hidden),), exposed=(exposed,),
                               writable=(str(tmp_path),)))  # fmt: skip
    assert _index(args, "--tmpfs", str(hidden)) < _index(args, "--ro-bind-try", exposed, exposed)


def _home_with(tmp_path: Path, *folders: str) -> Path:
    home = tmp_path / "home"
    for folder in folders:
        (home / folder).mkdir(parents=True)
    return home


def test_a_version_manager_is_shown_as_its_programs_and_the_version_it_names(
    tmp_path: Path,
) -> None:
    """Issue 59 #3: never a home folder whole — pyenv's programs and the version its `version`
    file names, not its other versions."""
    home = _home_with(tmp_path, ".pyenv/shims", ".pyenv/libexec", ".pyenv/versions/3.12/bin",
                      ".pyenv/versions/3.11/bin")  # fmt: skip
    (home / ".pyenv" / "version").write_text("3.12\n")
    view = host_view(home, {"PATH": f"{home}/.pyenv/shims:/usr/bin"}, ())
    assert str(home) in view.private
    assert str(home) in view.homes
    pyenv = home / ".pyenv"
    assert {str(pyenv / "shims"), str(pyenv / "libexec"), str(pyenv / "version"),
            str(pyenv / "versions/3.12/bin")} <= set(view.shown)  # fmt: skip
    assert str(pyenv) not in view.shown
    assert not [path for path in view.shown if path.startswith(str(pyenv / "versions/3.11"))]


def test_a_prefixs_settings_and_top_files_stay_hidden_beside_its_programs(tmp_path: Path) -> None:
    """nvm's `etc/npmrc` (a registry's `_authToken`), `~/.fly/config.yml` and
    `~/.pulumi/credentials.json` lie beside the programs PATH runs (issue 59 #3)."""
    home = _home_with(tmp_path, ".nvm/versions/node/v20/bin", ".nvm/versions/node/v20/lib",
                      ".nvm/versions/node/v20/etc", ".fly/bin", ".pulumi/bin",
                      ".pulumi/plugins")  # fmt: skip
    node = home / ".nvm/versions/node/v20"
    for secret in (node / "etc/npmrc", home / ".fly/config.yml",
                   home / ".pulumi/credentials.json"):  # fmt: skip
        secret.write_text("token")
    path = f"{node}/bin:{home}/.fly/bin:{home}/.pulumi/bin"
    shown = set(host_view(home, {"PATH": path}, ()).shown)
    assert {str(node / "bin"), str(node / "lib"), str(home / ".fly/bin"),
            str(home / ".pulumi/bin"), str(home / ".pulumi/plugins")} <= shown  # fmt: skip
    for never in (node, node / "etc", home / ".fly", home / ".pulumi", home / ".nvm"):
        assert str(never) not in shown


def test_a_venvs_hooks_are_hidden_inside_the_shown_venv(tmp_path: Path) -> None:
    """virtualenvwrapper's `postactivate` exports secrets; the venv's programs still run."""
    home = _home_with(tmp_path, ".virtualenvs/app/bin")
    venv = home / ".virtualenvs/app"
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin/postactivate").write_text("export TOKEN=x\n")
    (home / ".virtualenvs/postactivate").write_text("export TOKEN=x\n")
    view = host_view(home, {"PATH": f"{venv}/bin"}, ())
    assert str(venv) in view.shown
    assert str(venv / "bin/postactivate") in view.hidden
    assert str(home / ".virtualenvs") not in view.shown


def test_every_top_level_folder_but_the_systems_is_private_and_the_working_copy_too(
    tmp_path: Path,
) -> None:
    """Issue 59 #1, #2: `/opt`, `/var`, `/workspace` are empty, and so is the repository's
    working copy wherever it lies; `/usr` and `/etc` stay."""
    top = tmp_path / "top"
    for name in ("opt", "var", "workspace", "usr", "etc"):
        (top / name).mkdir(parents=True)
    (top / "bin").symlink_to("usr/bin")
    copy = tmp_path / "src" / "app"
    copy.mkdir(parents=True)
    view = host_view(tmp_path / "nohome", {"PATH": ""}, (), top=top, working_copies=[copy])
    for name in ("opt", "var", "workspace"):
        assert str(top / name) in view.private
    for name in ("usr", "etc", "bin"):
        assert str(top / name) not in view.private
    assert str(copy) in view.private


def test_only_the_path_entry_is_shown_where_its_folder_also_holds_credentials(
    tmp_path: Path,
) -> None:
    """`~/.cargo/bin` (with rustup's toolchains beside it), never `~/.cargo/credentials.toml`;
    `~/.local/bin`, never `~/.local/share/keyrings`."""
    home = _home_with(tmp_path, ".cargo/bin", ".rustup/toolchains", ".local/bin",
                      ".local/share/keyrings")  # fmt: skip
    (home / ".cargo" / "credentials.toml").write_text("token")
    view = host_view(home, {"PATH": f"{home}/.cargo/bin:{home}/.local/bin"}, ())
    assert set(view.shown) >= {str(home / ".cargo/bin"), str(home / ".rustup"),
                               str(home / ".local/bin")}  # fmt: skip
    assert str(home / ".cargo") not in view.shown
    assert str(home / ".local") not in view.shown


def test_a_path_entry_in_a_credential_folder_or_a_private_root_itself_is_never_shown(
    tmp_path: Path,
) -> None:
    home = _home_with(tmp_path, ".ssh/bin", "tools/bin")
    view = host_view(home, {"PATH": f"{home}/.ssh/bin:{home}:/tmp"}, ())
    assert not [path for path in view.shown if path.startswith(str(home / ".ssh"))]
    assert str(home) not in view.shown
    assert "/tmp" not in view.shown


def test_a_venv_under_tmp_on_path_is_shown_but_never_one_under_a_hidden_path(
    tmp_path: Path,
) -> None:
    venv, hidden = tmp_path / "clone" / ".venv" / "bin", tmp_path / "secret" / "bin"
    venv.mkdir(parents=True)
    (venv.parent / "pyvenv.cfg").write_text("home = /usr/bin\n")
    hidden.mkdir(parents=True)
    view = host_view(tmp_path / "nohome", {"PATH": f"{venv}:{hidden}"}, (str(hidden.parent),))
    assert str(venv.parent) in view.shown
    assert not any(path.startswith(str(hidden.parent)) for path in view.shown)


def test_a_script_named_in_tmp_itself_is_shown_alone_one_in_a_clone_with_its_folder(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "agent.py").write_text("")
    loose = Path("/tmp") / f"imm-unit-{tmp_path.name}.py"
    loose.write_text("")
    try:
        shown = named_folders(["python3", str(loose), str(clone / "agent.py")],
                              Confinement("bwrap", "t"))  # fmt: skip
    finally:
        loose.unlink()
    assert shown == (str(loose), str(clone))


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
