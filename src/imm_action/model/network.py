"""What network lane code may reach (issue 60, decision 0070): `open`, `none`, or a list of
hosts, each with an optional port and a leading wildcard (`api.anthropic.com`,
`*.pythonhosted.org`, `registry.npmjs.org:443`). `true` and `false`, the old values of
`check_network`, keep their meaning (`open`, `none`).

A host is judged by the name a command asked the proxy for, never by an address it resolved: a
name matches a rule written as that name (any letter case, a trailing dot ignored), or, for a
`*.` rule, any name below it (never the name itself); an address matches only a rule that
writes that address. Without a port a rule admits every port of its host."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag

from imm_action.model.validation import HOSTS_FORM, WORD_FORM

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOST_PATTERN = rf"^(?:(?:\*\.)?{_LABEL}(?:\.{_LABEL})*\.?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{{1,5}})?$"
_RULE = re.compile(HOST_PATTERN)


def _valid_rule(text: str) -> str:
    HostRule.parse(text)  # a port past 65535, an address that is none
    return text


# the pattern stands in the JSON Schema; `_valid_rule` judges it, saying what an entry is
HostRuleText = Annotated[
    str, Field(max_length=260, json_schema_extra={"pattern": HOST_PATTERN}),
    AfterValidator(_valid_rule),
]  # fmt: skip
NetworkMode = Literal["open", "none"]


def _from_bool(value: Any) -> Any:
    """`true`/`false` (check_network's first values) as `open`/`none`."""
    if value is True:
        return "open"
    if value is False:
        return "none"
    return value


def _shape(value: Any) -> str:
    return HOSTS_FORM if isinstance(value, list) else WORD_FORM


# One shape judged, never both: a list's bad entry is told as that, not also as "should be
# 'open' or 'none'"
NetworkPolicy = Annotated[
    Annotated[NetworkMode, Tag(WORD_FORM)] | Annotated[list[HostRuleText], Tag(HOSTS_FORM)],
    Discriminator(_shape),
    BeforeValidator(_from_bool, json_schema_input_type=bool | NetworkMode | list[HostRuleText]),
]


@dataclass(frozen=True)
class HostRule:
    """One entry of a list: a host (lower case, no trailing dot; an address as written, in its
    normal form), whether it stands for the names below it, and its port (None: any)."""

    host: str
    below: bool = False
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> HostRule:
        if not _RULE.match(text):
            raise ValueError(f"{text!r} is not a host, *.host or host:port")
        host, port = split_host_port(text)
        if text.startswith("[") and not is_address(host):
            raise ValueError(f"{text!r}: only an IPv6 address is written in brackets")
        below = host.startswith("*.")
        host = host.removeprefix("*.")
        return cls(_normal_host(host), below, port)

    def admits(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        asked = _normal_host(host)
        if self.below:
            return asked.endswith("." + self.host) and not is_address(asked)
        return asked == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        name = f"*.{host}" if self.below else host
        return name if self.port is None else f"{name}:{self.port}"


@dataclass(frozen=True)
class HostRules:
    """A list's rules: what they admit (nothing, for an empty list)."""

    rules: tuple[HostRule, ...]

    @classmethod
    def of(cls, texts: list[str]) -> HostRules:
        return cls(tuple(HostRule.parse(text) for text in texts))

    def admits(self, host: str, port: int) -> bool:
        return any(rule.admits(host, port) for rule in self.rules)


def rules_of(policy: NetworkMode | list[str]) -> HostRules | None:
    """The list's rules; None for `open` and `none` (no proxy)."""
    return None if isinstance(policy, str) else HostRules.of(policy)


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _normal_host(host: str) -> str:
    host = host.strip("[]").rstrip(".").lower()
    if is_address(host):
        return str(ipaddress.ip_address(host))
    return host


def split_host_port(text: str) -> tuple[str, int | None]:
    """`host`, `host:port` or `[v6 address]:port` as (host, port or None): a list's entry, a
    CONNECT's target, a refused address. ValueError where the port is not 1 to 65535."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    else:
        host, colon, port = text.rpartition(":")
        if not colon:
            host, port = text, None
    if port is None:
        return host, None
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: a port is 1 to 65535")
    return host, int(port)


def host_port(host: str, port: int) -> str:
    """`host:port` as a list writes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def refused_line(key: str, host: str, port: int) -> str:
    """What a refusal says, wherever it is shown: the host, and the line that allows it."""
    return (f"{host_port(host, port)} is not on {key}: add \"{host_port(host, port)}\" to "
            f"{key} in .github/imm.yml to allow it")  # fmt: skip


def refused_address_line(key: str, address: str) -> str:
    """`refused_line` of a kept `host:port` (a `BlockedAddress`)."""
    host, port = split_host_port(address)
    return refused_line(key, host, port or 0)


_NAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")


def valid_host(host: str) -> bool:
    """Whether `host` is a name or an address (what a proxy request may ask for)."""
    return is_address(host) or (len(host) <= 253 and _NAME.match(host) is not None)


def _valid_address(text: str) -> str:
    host, port = split_host_port(text)
    if port is None or not valid_host(host):
        raise ValueError(f"{text!r} is not a host:port")
    return text


# A refused `host:port`, as a check's result or a lane's outcome keeps it (what a lane hands
# over is read like any input: an entry that is none is refused there, never at rendering)
BlockedAddress = Annotated[str, Field(max_length=270), AfterValidator(_valid_address)]
