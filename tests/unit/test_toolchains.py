"""What a toolchain found through PATH needs beyond its programs (issue 59 #6, ADR 0067): each
shown where it lies and located the way the tool looks, never a credential with it."""

from __future__ import annotations

from pathlib import Path

from imm_action.sandbox.toolchains import MAVEN_SETTINGS, toolchains_of

SETTINGS = """<?xml version="1.0"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <localRepository>${user.home}/m2-cache</localRepository>
  <servers><server><id>corp</id><username>ci</username><password>S3CRET</password></server>
  </servers>
  <proxies><proxy><id>p</id><host>proxy.corp</host><port>8080</port>
    <username>me</username><password>PROXYPASS</password></proxy></proxies>
  <mirrors><mirror><id>m</id><url>https://repo.corp/maven</url><mirrorOf>*</mirrorOf></mirror>
  </mirrors>
</settings>
"""


def test_rustup_is_located_by_rustup_home_when_cargos_proxies_are_on_path(tmp_path: Path) -> None:
    (tmp_path / ".rustup" / "toolchains").mkdir(parents=True)
    (tmp_path / ".cargo" / "bin").mkdir(parents=True)
    found = toolchains_of(tmp_path, {"PATH": f"{tmp_path}/.cargo/bin:/usr/bin"})
    assert dict(found.variables)["RUSTUP_HOME"] == str(tmp_path / ".rustup")
    assert str(tmp_path / ".rustup") in found.shown
    assert not [path for path in found.shown if path.startswith(str(tmp_path / ".cargo"))]


def test_no_rustup_home_without_rustups_proxies_on_path(tmp_path: Path) -> None:
    (tmp_path / ".rustup").mkdir()
    assert "RUSTUP_HOME" not in dict(toolchains_of(tmp_path, {"PATH": "/usr/bin"}).variables)


def test_mavens_settings_reach_lane_code_without_servers_or_proxy_logins(tmp_path: Path) -> None:
    (tmp_path / ".m2").mkdir()
    (tmp_path / MAVEN_SETTINGS).write_text(SETTINGS)
    (tmp_path / "m2-cache").mkdir()
    found = toolchains_of(tmp_path, {"PATH": "/usr/bin"})
    [(relative, text)] = found.files
    assert relative == MAVEN_SETTINGS
    for secret in ("S3CRET", "PROXYPASS", "<servers", "<username>"):
        assert secret not in text
    assert "https://repo.corp/maven" in text  # the rest stays
    assert "proxy.corp" in text
    assert "ns0:" not in text
    assert 'xmlns="http://maven.apache.org/SETTINGS/1.0.0"' in text
    # `${user.home}` would be lane code's own home: the repository it names, by its real path
    assert f"<localRepository>{tmp_path / 'm2-cache'}</localRepository>" in text
    assert str(tmp_path / "m2-cache") in found.shown


def test_mavens_default_repository_is_shown_in_the_home_and_where_java_looks(
    tmp_path: Path,
) -> None:
    (tmp_path / ".m2" / "repository").mkdir(parents=True)
    found = toolchains_of(tmp_path, {"PATH": "/usr/bin"})
    assert (str(tmp_path / ".m2" / "repository"), ".m2/repository") in found.in_home
    assert str(tmp_path / ".m2" / "repository") in found.shown
    assert found.files == ()  # no settings.xml: none written


def test_unreadable_maven_settings_are_not_shown_at_all(tmp_path: Path) -> None:
    (tmp_path / ".m2").mkdir()
    (tmp_path / MAVEN_SETTINGS).write_text("<settings><servers><password>x</password>")
    assert toolchains_of(tmp_path, {"PATH": "/usr/bin"}).files == ()


def test_gradles_dependency_cache_is_shown_read_only_as_gradles_own_read_only_cache(
    tmp_path: Path,
) -> None:
    (tmp_path / ".gradle" / "caches" / "modules-2").mkdir(parents=True)
    (tmp_path / ".gradle" / "gradle.properties").write_text("token=x\n")
    found = toolchains_of(tmp_path, {"PATH": "/usr/bin"})
    caches = str(tmp_path / ".gradle" / "caches")
    assert dict(found.variables)["GRADLE_RO_DEP_CACHE"] == caches
    assert found.shown == (caches,)


def test_gos_module_cache_is_shown_as_gomodcache(tmp_path: Path) -> None:
    (tmp_path / "go" / "pkg" / "mod").mkdir(parents=True)
    found = toolchains_of(tmp_path, {"PATH": "/usr/bin"})
    assert dict(found.variables)["GOMODCACHE"] == str(tmp_path / "go" / "pkg" / "mod")
    elsewhere = tmp_path / "modcache"
    elsewhere.mkdir()
    found = toolchains_of(tmp_path, {"PATH": "/usr/bin", "GOMODCACHE": str(elsewhere)})
    assert dict(found.variables)["GOMODCACHE"] == str(elsewhere)
