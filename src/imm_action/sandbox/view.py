"""What lane code sees of the host (SPEC §8, ADRs 0059, 0067): an empty root made of what it
needs.

The host's program and library folders (`/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, `/sys`, and
the stores `/nix`, `/gnu`, `/snap`) are bound into the sandbox's empty root, read-only, so the
user's toolchain works as for the user (`system_layout`). Every other place is absent — or an
empty tmpfs where a system folder would show it — the private roots:

- every other top-level folder (`/opt`, `/srv`, `/var`, `/mnt`, `/media`, `/data`, `/workspace`,
  `/builds`, ...): a self-hosted runner's `.credentials`, a service's 0600 files under
  `/var/lib`, a container's mounted working copy; and every top-level file;
- the repository's own working copy, wherever it lies (`/usr/src/app` too): its gitignored
  `.env` is the one place sure to hold this project's secrets;
- the homes: `$HOME`, the account's home, and `/home` and `/root` where imm's user can read
  them (a home holds credentials no list keeps up with);
- the socket folders: `/run` (and `/var/run`) and `$XDG_RUNTIME_DIR`: a read-only bind does not
  stop `connect()` on a unix socket;
- `/tmp`, `/var/tmp` and `/dev/shm`, the command's own.

Into them only what the user's programs need is shown back, read-only: each `PATH` entry as that
entry and what its programs need (`programs_of`) — never a home folder whole — the interpreter
a venv's `pyvenv.cfg` names, the targets of the entries' links, imm's own interpreter and
install, the files the resolver needs (`/etc/resolv.conf` may link into `/run`), and the files
and folders a trusted command line names. Never a private root itself: a script in `/tmp` is
shown alone, not `/tmp` with it. Files under `/etc` that imm's user can read but others cannot
(`/etc/shadow` for root, host keys) are hidden too.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ALWAYS_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm", "/run")
# the top-level folders lane code sees as the host has them, read-only: programs, libraries,
# the system's settings, package stores, the kernel's view of the devices
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/nix",
                  "/gnu", "/snap", "/sys")  # fmt: skip
# and what the sandbox makes anew (`/proc`, `/dev`) or keeps private
PROGRAM_FOLDERS = frozenset({*SYSTEM_FOLDERS, "/proc", "/dev", "/tmp", "/run"})
# never a private root, whatever $HOME says (HOME=/ in some containers)
_SYSTEM = frozenset(
    {"/", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt", "/var", "/srv",
     "/nix", "/proc", "/sys", "/dev", "/boot", "/mnt", "/media", "/snap"}
)  # fmt: skip
# folders of a home never shown back, even when `PATH` runs through them: credentials
_NEVER_SHOWN = frozenset(
    {".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store", ".docker", ".netrc",
     ".git-credentials", ".vault-token", ".pypirc", ".npmrc", ".claude", ".claude.json",
     ".codex", ".gemini", ".copilot", ".cursor", "runners", "actions-runner"}
)  # fmt: skip
# folders of a home that hold a tool's programs beside its credentials or the user's data:
# only what `PATH` names in them is shown (`~/.cargo/bin`, never `~/.cargo/credentials.toml`)
_ENTRY_ONLY = frozenset(
    {".local", ".config", ".cargo", ".gem", ".m2", ".gradle", ".npm", ".composer", ".cache",
     ".yarn", ".terraform.d"}
)  # fmt: skip
# what a shown entry needs beside it: rustup's proxies in ~/.cargo/bin run its toolchains
_COMPANIONS = {".cargo/bin": (".rustup",)}
# the names of a PATH entry that is a prefix's programs: its prefix's folders are shown too
_PROGRAM_ENTRIES = frozenset({"bin", "sbin", "shims"})
# folders of a prefix never shown with it: its settings (nvm's `etc/npmrc` holds a registry's
# `_authToken`), a version manager's other versions (those in use are shown by their own
# entries, and the one its `version` file names), and what no program runs from (sources,
# tests, manuals: each shown folder is a mount in every command's start)
_PREFIX_KEPT_BACK = frozenset(
    {"etc", "versions", "src", "test", "tests", "man", "doc", "docs", "completions"}
)
# files of a prefix that its programs read: pyenv's global version
_PREFIX_FILES = ("version",)
# virtualenvwrapper's hooks in a venv's `bin` (a `postactivate` exports secrets): hidden
VENV_HOOKS = ("postactivate", "preactivate", "predeactivate", "postdeactivate",
              "get_env_details", "postmkvirtualenv", "premkvirtualenv")  # fmt: skip
# files the C library reads that may be links into a private root (systemd-resolved's stub)
RESOLVER_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/localtime")
_LINKS_FOLLOWED = 200  # at most this many links of one shown PATH folder are followed


@dataclass(frozen=True)
class HostView:
    """The private roots beyond /tmp, /var/tmp, /dev/shm and /run (`homes` among them), what
    is shown back of them, read-only, and what is hidden again inside what is shown (a venv's
    hooks)."""

    private: tuple[str, ...]
    homes: tuple[str, ...]
    shown: tuple[str, ...]
    hidden: tuple[str, ...] = ()


def host_view(
    home: Path,
    environ: Mapping[str, str],
    hidden: Sequence[str],
    extra: Iterable[Path] = (),
    *,
    working_copies: Sequence[Path] = (),
    top: Path = Path("/"),
) -> HostView:
    """The view lane code gets here (module docstring); `extra`: more programs' folders to show
    back (imm's interpreter and install are always); `working_copies`: the repository's;
    `top`: the root whose other folders are private (a test's stand-in for `/`)."""
    homes = _existing([home, *_account_home(), Path("/home"), Path("/root")], readable=True)
    sockets = _existing(
        [Path("/run"), Path("/var/run"), *_runtime_dir(environ)], readable=False
    )  # fmt: skip
    others = _top_level(top)
    copies = [os.path.realpath(path) for path in working_copies if path.is_dir()]
    private = _outermost(
        list(dict.fromkeys([*homes, *sockets, *others, *(c for c in copies if c != "/")]))
    )
    homes = tuple(path for path in homes if path in private or _inside_any(path, private))
    candidates = [Path(entry) for entry in environ.get("PATH", "").split(os.pathsep)
                  if os.path.isabs(entry)]  # fmt: skip
    candidates += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent,
                   Path(__file__).parents[2], *extra]  # fmt: skip
    candidates += [home for home in map(_venv_home, list(candidates)) if home is not None]
    # every home, a nested one too ($HOME inside the account's home): a program is judged by
    # the innermost home it lies in, so a home is never shown back as a "version manager"
    roots = (*ALWAYS_PRIVATE, *private, *homes)
    shown: list[str] = []
    for candidate in candidates:
        for folder in _shown_for(candidate, roots, homes, hidden):
            if folder not in shown:
                shown.append(folder)
    for folder in list(shown):  # what the links of a shown PATH folder point into
        for target in _link_targets(folder):
            for more in _shown_for(target, roots, homes, hidden):
                if not _inside_any(more, shown):
                    shown.append(more)
    for name in RESOLVER_FILES:
        with contextlib.suppress(OSError):
            real = os.path.realpath(name)
            if real != name and _inside_any(real, roots) and real not in shown:
                shown.append(real)
    hooks = [hook for folder in shown for name in VENV_HOOKS
             if os.path.isfile(hook := os.path.join(folder, "bin", name))]  # fmt: skip
    outer = [path for path in shown
             if not any(other != path and within(path, other) for other in shown)]  # fmt: skip
    return HostView(private, homes, tuple(outer), tuple(hooks))


def shown_for_command(
    argv: Sequence[str], roots: Sequence[str], homes: Sequence[str], hidden: Sequence[str]
) -> tuple[str, ...]:
    """What a trusted command line (the configured executor, `lane_setup`) names by absolute
    path inside a private root, shown read-only: the folder of a named file (a script in a
    clone, beside the modules it imports) when strictly below the root, else the file alone
    (`python3 /tmp/agent.py` shows `/tmp/agent.py`, never `/tmp`). Never a hidden path."""
    found: list[str] = []
    for argument in argv:
        if not os.path.isabs(argument) or not os.path.isfile(argument):
            continue
        real = os.path.realpath(argument)
        folder = os.path.dirname(real)
        if any(within(real, path) for path in hidden) or not _inside_any(folder, roots):
            continue
        shown = folder if folder not in roots and folder not in homes else real
        if shown not in found:
            found.append(shown)
    return tuple(found)


def default_tmpfs_bytes() -> int:
    """An eighth of the machine's memory, between 64 MiB and 1 GiB: what /tmp and /var/tmp of
    one command may hold — several checks at once cannot fill the memory with them."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 1 << 30
    return max(64 << 20, min(1 << 30, memory // 8))


def private_etc_files() -> tuple[str, ...]:
    """Files and folders under /etc that imm's user can read and others cannot (`/etc/shadow`
    and the host's ssh keys for root): hidden like credentials."""
    return _private_etc(os.geteuid())


@cache
def _private_etc(uid: int) -> tuple[str, ...]:
    found: list[str] = []
    for folder, subfolders, files in os.walk("/etc"):
        for name in list(subfolders):
            path = os.path.join(folder, name)
            mode = _mode(path)
            if mode is not None and stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                subfolders.remove(name)
                if os.access(path, os.R_OK | os.X_OK):
                    found.append(path)
        for name in files:
            path = os.path.join(folder, name)
            mode = _mode(path)
            if (mode is not None and stat.S_ISREG(mode) and not mode & stat.S_IROTH
                    and os.access(path, os.R_OK)):  # fmt: skip
                found.append(path)
    return tuple(found)


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _inside_any(path: str, roots: Iterable[str]) -> bool:
    return any(within(path, root) for root in roots)


def _mode(path: str) -> int | None:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def _account_home() -> list[Path]:
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        return [Path(pwd.getpwuid(os.geteuid()).pw_dir)]
    return []


def _runtime_dir(environ: Mapping[str, str]) -> list[Path]:
    value = environ.get("XDG_RUNTIME_DIR", "")
    return [Path(value)] if os.path.isabs(value) else []


def _existing(paths: Sequence[Path], *, readable: bool) -> tuple[str, ...]:
    """The real folders among `paths`, no system folder, none twice; `readable`: only those
    imm's user may list (another user's closed home is closed to lane code anyway)."""
    found: list[str] = []
    for path in paths:
        with contextlib.suppress(OSError):
            real = os.path.realpath(path)
            if real in _SYSTEM or not os.path.isdir(real) or real in found:
                continue
            if readable and not os.access(real, os.R_OK | os.X_OK):
                continue
            found.append(real)
    return tuple(found)


def _top_level(top: Path) -> list[str]:
    """The top-level folders that are no program folder: what `/` holds besides the system,
    absent in the sandbox (named, so a program found only there is refused naming it)."""
    folders: list[str] = []
    with contextlib.suppress(OSError), os.scandir(top) as entries:
        for entry in entries:
            path = os.path.join("/", entry.name) if str(top) == "/" else entry.path
            if "/" + entry.name in PROGRAM_FOLDERS or entry.is_symlink():
                continue  # a link (`/bin` -> `usr/bin`) shows what its target shows
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    folders.append(path)
    return sorted(folders)


def in_system(path: str) -> bool:
    """Whether `path` lies in a folder the sandbox shows as the host has it."""
    return any(within(path, folder) for folder in SYSTEM_FOLDERS)


@cache
def system_layout() -> tuple[str, ...]:
    """bwrap's arguments that build the root from the system's folders, read-only: a link
    (`/bin` -> `usr/bin` on a merged /usr) as a link, a folder bound."""
    args: list[str] = []
    for folder in SYSTEM_FOLDERS:
        with contextlib.suppress(OSError):
            if os.path.islink(folder):
                args += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
    return tuple(args)


def _outermost(paths: Sequence[str]) -> tuple[str, ...]:
    """`paths` without those inside another of them (one tmpfs covers both)."""
    return tuple(
        path for path in paths if not any(other != path and within(path, other) for other in paths)
    )


def _venv_home(candidate: Path) -> Path | None:
    """The interpreter folder a venv's `pyvenv.cfg` names (a venv's python links into it)."""
    prefix = candidate.parent if candidate.name == "bin" else candidate
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in (prefix / "pyvenv.cfg").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and os.path.isabs(value.strip()):
                return Path(value.strip())
    return None


def _shown_for(
    candidate: Path, roots: Sequence[str], homes: Sequence[str], hidden: Sequence[str]
) -> list[str]:
    """The folders to show back so that `candidate` (a program folder) works, where a private
    root would hide it; [] where nothing hides it, or a credential would be shown."""
    try:
        real = os.path.realpath(candidate)
    except OSError:
        return []
    around = [root for root in roots if within(real, root)]
    if not around or real in around or _inside_any(real, hidden):
        return []
    root = max(around, key=len)
    if root in homes:
        parts = Path(real).relative_to(root).parts
        if parts[0] in _NEVER_SHOWN:
            return []
        if parts[0] in _ENTRY_ONLY:
            if len(parts) == 1:
                return []  # `~/.cargo` itself holds the credentials: never whole
            shown = [real]
            for entry, companions in _COMPANIONS.items():
                if "/".join(parts) == entry:
                    shown += [os.path.join(root, name) for name in companions
                              if os.path.isdir(os.path.join(root, name))]  # fmt: skip
            return shown
    return programs_of(real, root, homes)


def programs_of(entry: str, root: str, homes: Sequence[str]) -> list[str]:
    """What a program folder inside the private root `root` needs shown: a venv's `bin`, its
    venv; a prefix's `bin` (`~/.nvm/versions/node/v20/bin`, `~/.fly/bin`), the prefix's folders
    but its settings (`etc`) and other versions, and no file of its top (`~/.fly/config.yml`,
    `~/.pulumi/credentials.json`) but the version it names; any other entry, itself alone."""
    prefix = os.path.dirname(entry) if os.path.basename(entry) in _PROGRAM_ENTRIES else entry
    if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        return [prefix]  # a venv: its scripts, its site-packages
    if prefix in (entry, root) or prefix in homes or within(root, prefix):
        return [entry]
    shown = [entry]
    with contextlib.suppress(OSError), os.scandir(prefix) as children:
        for child in children:
            name = child.name
            if (child.is_dir(follow_symlinks=False) and not name.startswith(".")
                    and name not in _PREFIX_KEPT_BACK and name not in _NEVER_SHOWN):  # fmt: skip
                shown.append(child.path)
    for name in _PREFIX_FILES:
        version = os.path.join(prefix, name)
        with contextlib.suppress(OSError, UnicodeDecodeError):
            named = Path(version).read_text(encoding="utf-8").split()
            shown.append(version)
            chosen = os.path.join(prefix, "versions", named[0]) if named else ""
            if named and "/" not in named[0] and os.path.isdir(chosen):
                shown += [p for p in programs_of(os.path.join(chosen, "bin"), root, homes)
                          if p not in shown]  # fmt: skip
    return [path for path in shown if os.path.exists(path)]


def _link_targets(folder: str) -> list[Path]:
    """Where the links in `folder` point (pipx's `~/.local/bin/black` into its venv): the
    target's prefix when it is a `bin`'s program, else its folder."""
    targets: list[Path] = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count >= _LINKS_FOLLOWED:
                break
            if entry.is_symlink():
                with contextlib.suppress(OSError):
                    parent = Path(os.path.realpath(entry.path)).parent
                    targets.append(parent.parent if parent.name == "bin" else parent)
    return targets
