"""`lane_network` and `check_network` (issue 60): what a list admits, judged by the name asked
for, and what the config accepts."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import ValidationError

from imm_action.model.config import RepoConfig
from imm_action.model.network import HostRule, HostRules, is_address, valid_host

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
NAME = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
PORT = st.integers(min_value=1, max_value=65535)


@given(NAME, NAME, PORT)
def test_a_wildcard_admits_every_name_below_it_and_never_its_own(
    below: str, base: str, port: int
) -> None:
    assume(not is_address(f"{below}.{base}"))  # `*.0.0.0` admits no address: one is no name
    rule = HostRule.parse(f"*.{base}")
    assert rule.admits(f"{below}.{base}", port)
    assert not rule.admits(base, port)


@given(NAME, NAME, PORT)
def test_a_name_admits_itself_in_any_letter_case_and_no_name_that_merely_ends_like_it(
    prefix: str, name: str, port: int
) -> None:
    rule = HostRule.parse(name)
    assert rule.admits(name.upper() + ".", port)
    assert not rule.admits(f"{prefix}{name}", port) or prefix.endswith(".")


@given(NAME, PORT, PORT)
def test_a_port_narrows_a_rule_to_it(name: str, port: int, other: int) -> None:
    rule = HostRule.parse(f"{name}:{port}")
    assert rule.admits(name, port)
    assert rule.admits(name, other) == (other == port)


def test_an_address_is_admitted_only_where_the_list_writes_it() -> None:
    rules = HostRules.of(["allowed.test", "10.0.0.1", "[::1]:8080"])
    assert rules.admits("10.0.0.1", 443)
    assert not rules.admits("10.0.0.2", 443)
    assert rules.admits("0:0::1", 8080)
    assert not rules.admits("127.0.0.1", 443)  # what allowed.test may resolve to


@pytest.mark.parametrize(
    ("written", "meant"),
    [(True, "open"), (False, "none"), ("open", "open"), ("none", "none"),
     (["api.anthropic.com", "*.pythonhosted.org", "registry.npmjs.org:443"],
      ["api.anthropic.com", "*.pythonhosted.org", "registry.npmjs.org:443"])],
)  # fmt: skip
def test_the_network_keys_take_open_none_a_list_and_the_old_booleans(
    written: object, meant: object
) -> None:
    config = RepoConfig.model_validate({"lane_network": written, "check_network": written})
    assert (config.lane_network, config.check_network) == (meant, meant)


@pytest.mark.parametrize(
    "bad", ["*", "*.", "a..b", "https://api.anthropic.com", "host:0", "host:70000", "[nope]", "a b"]
)
def test_a_list_entry_that_is_no_host_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        RepoConfig.model_validate({"lane_network": [bad]})


def test_a_host_a_lane_asks_for_is_a_name_or_an_address() -> None:
    assert valid_host("api.allowed.test")
    assert valid_host("::1")
    assert not valid_host("@octocat fixes #1")
    assert not valid_host("a" * 300)


@pytest.mark.parametrize("forged", ["no-port.test", "other.test:0", "@octocat fixes #1:443", ""])
def test_a_refused_address_a_lane_hands_over_is_a_host_and_port_or_refused_on_reading(
    forged: str,
) -> None:
    """A lane's outcome is input: an entry no renderer could read (it crashed the pass that
    built the report) is refused where the outcome is read."""
    from imm_action.model.outcome import Failure

    with pytest.raises(ValidationError):
        Failure(step="executor", command="x", exit_code=1, output_tail="", blocked_hosts=[forged])
    Failure(step="executor", command="x", exit_code=1, output_tail="",
            blocked_hosts=["other.test:443", "[::1]:8080"])  # fmt: skip


def test_a_wildcard_never_admits_an_address_that_ends_like_it() -> None:
    """Found by the property above: `0.0.0.0` ends like `*.0.0.0`, but an address is judged
    only where the list writes it."""
    assert not HostRule.parse("*.0.0.0").admits("0.0.0.0", 80)
