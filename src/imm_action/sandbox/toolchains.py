"""Toolchains as the user has them (issue 59 #6, ADR 0067): what a toolchain found through
`PATH` needs beyond its programs, where lane code's home is a fresh one of its own.

Each is bound read-only where it lies, never copied (a 426 MB `~/.m2` copied into every lane's
home cost 2.5 s a lane), and located the way the tool itself looks:

| toolchain | what is shown | how the tool finds it |
|---|---|---|
| rustup (`~/.cargo/bin`) | `~/.rustup` (its toolchains, its default) | `RUSTUP_HOME` |
| Maven | `~/.m2/repository`; `settings.xml` less `<servers>`, proxies' logins | `$HOME/.m2` |
| Gradle | `~/.gradle/caches` (its dependency cache) | `GRADLE_RO_DEP_CACHE` |
| Go | the module cache (`~/go/pkg/mod`, or `GOMODCACHE`) | `GOMODCACHE` |

Cargo's own home (`~/.cargo`: `credentials.toml`) is not shown: cargo's home is the command's
own (`$HOME/.cargo`). What the tool writes (cargo's `target/`, Go's build cache) goes to the
command's tree or home.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree.ElementTree import Element, tostring

from defusedxml import ElementTree as SafeTree

MAVEN_SETTINGS = ".m2/settings.xml"
_SETTINGS_LIMIT = 1 << 20  # a settings.xml larger than this is not read


@dataclass(frozen=True)
class Toolchains:
    """What lane code's toolchains need beyond their programs: `variables` to set, paths of the
    user's home to show inside the command's own home (`in_home`: source, relative), files to
    write there (`files`: relative, content), and paths to show where they lie (`shown`)."""

    variables: tuple[tuple[str, str], ...] = ()
    in_home: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    shown: tuple[str, ...] = ()


NO_TOOLCHAINS = Toolchains()
# what asks package managers not to print their update notices in a command's output (npm's
# filled the 12 lines of a failure a report shows)
QUIET = (("NPM_CONFIG_UPDATE_NOTIFIER", "false"), ("NO_UPDATE_NOTIFIER", "1"),
         ("PIP_DISABLE_PIP_VERSION_CHECK", "1"))  # fmt: skip


def populate_home(
    home: Path,
    binds: Sequence[tuple[str, str]],
    files: Sequence[tuple[str, str]],
    *,
    confined: bool,
) -> None:
    """Make a command's own `home` ready: `files` written, the mount points of `binds`
    (source, relative) made — bwrap would make them as whoever runs it — or, unconfined,
    links to their sources in their place."""
    for relative, content in files:
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(content, encoding="utf-8")
    for source, relative in binds:
        place = home / relative
        place.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(place):
            continue
        if not confined:
            place.symlink_to(source)
        elif os.path.isdir(source):
            place.mkdir()
        else:
            place.touch()


def toolchains_of(home: Path, environ: Mapping[str, str]) -> Toolchains:
    """What the toolchains of this user need (module docstring); only what exists."""
    variables: dict[str, str] = {}
    in_home: list[tuple[str, str]] = []
    files: list[tuple[str, str]] = []
    shown: list[str] = []
    entries = [entry for entry in environ.get("PATH", "").split(os.pathsep) if entry]
    rustup = _folder(environ.get("RUSTUP_HOME") or home / ".rustup")
    if rustup is not None and (environ.get("RUSTUP_HOME") or str(home / ".cargo/bin") in entries):
        variables["RUSTUP_HOME"] = rustup
        shown.append(rustup)
        if environ.get("RUSTUP_TOOLCHAIN"):
            variables["RUSTUP_TOOLCHAIN"] = environ["RUSTUP_TOOLCHAIN"]
    settings = home / MAVEN_SETTINGS
    local = None
    if settings.is_file():
        content, local = _maven_settings(settings, home)
        if content is not None:
            files.append((MAVEN_SETTINGS, content))
    named = _folder(local) if local is not None else None
    if named is not None:
        shown.append(named)
    else:
        repository = _folder(home / ".m2" / "repository")
        if repository is not None:  # in the command's home, and where Java looks (the account's)
            in_home.append((repository, ".m2/repository"))
            shown.append(repository)
    gradle = _folder(environ.get("GRADLE_USER_HOME") or home / ".gradle")
    if gradle is not None and os.path.isdir(os.path.join(gradle, "caches", "modules-2")):
        variables["GRADLE_RO_DEP_CACHE"] = os.path.join(gradle, "caches")
        shown.append(os.path.join(gradle, "caches"))
    modules = _folder(environ.get("GOMODCACHE") or home / "go" / "pkg" / "mod")
    if modules is not None:
        variables["GOMODCACHE"] = modules
        shown.append(modules)
    return Toolchains(tuple(variables.items()), tuple(in_home), tuple(files), tuple(shown))


def _folder(path: str | Path) -> str | None:
    """`path`'s real folder, or None where it is none."""
    with contextlib.suppress(OSError):
        real = os.path.realpath(path)
        if os.path.isdir(real):
            return real
    return None


def _maven_settings(path: Path, home: Path) -> tuple[str | None, str | None]:
    """The user's `settings.xml` without what holds credentials (`<servers>`, a proxy's
    `<username>`/`<password>`), and the local repository it names, written as an absolute
    path (`${user.home}` would be the command's home); (None, None) where it cannot be read
    as XML (it is then not shown at all)."""
    try:
        if path.stat().st_size > _SETTINGS_LIMIT:
            return None, None
        root = SafeTree.fromstring(path.read_bytes())
    except (OSError, SafeTree.ParseError, ValueError):
        return None, None
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    for servers in root.findall(f"{namespace}servers"):
        root.remove(servers)
    for proxy in root.iter(f"{namespace}proxy"):
        for name in ("username", "password"):
            for secret in proxy.findall(f"{namespace}{name}"):
                proxy.remove(secret)
    local = root.find(f"{namespace}localRepository")
    named = None
    if local is not None and local.text:
        named = local.text.strip().replace("${user.home}", str(home))
        local.text = os.path.realpath(named)
    return _text(root, namespace), named


def _text(root: Element, namespace: str) -> str:
    """The settings as Maven reads them: its parser takes tags as written, so the namespace
    is an `xmlns` attribute, never an `ns0:` prefix."""
    for element in root.iter():
        if isinstance(element.tag, str):
            element.tag = element.tag.removeprefix(namespace)
    if namespace:
        root.set("xmlns", namespace.strip("{}"))
    return tostring(root, encoding="unicode", xml_declaration=True)
