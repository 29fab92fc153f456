"""The environment an executor (and `lane_setup`) gets: an allowlist, never the caller's whole
environment (SPEC §5.1, §8; docs/how-it-works.md lists it).

Passes: the basics a program needs to run (`PATH`, `HOME`, locale, terminal, temp dir, proxies and
CA bundles), the model providers' variables (`ANTHROPIC_*`, `OPENAI_*`, ... — agents need their
keys), imm's own `IMM_*` variables (set by the lane itself), and every name the repository
config maps in (`executor_env`) or the operator names in `IMM_EXECUTOR_ENV` (comma-separated:
the person or workflow running imm, trusted as the config is). Never the `IMM_` prefix: the
action's write token is `IMM_TOKEN`. Never passes, even when mapped: `GITHUB_TOKEN`,
`GH_TOKEN`, `IMM_TOKEN`, `IMM_TOKEN_FILE`, `IMM_GITHUB_TOKEN`, `IMM_DEFAULT_TOKEN`,
`INPUT_GITHUB_TOKEN`, `ACTIONS_*` (the runner's own credentials), git's plumbing variables
that would point the executor's git at another repository, and the addresses of the host's
sockets (`SSH_AUTH_SOCK`, `XDG_RUNTIME_DIR`, the session bus, `DISPLAY`, `DOCKER_HOST`, ...):
the sandbox shows no host socket (ADR 0059), and an agent that needs one gets it only through
`sandbox_expose`. `XDG_*` folders never pass, even mapped: they lie in the user's home, which lane
code does not see; the executor's own home holds its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BASICS = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM",
        "TZ", "TMPDIR", "TEMP", "TMP", "NO_COLOR", "FORCE_COLOR",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "CI", "RUNNER_TEMP",
    }
)  # fmt: skip
BASIC_PREFIXES = ("LC_",)
PROVIDER_PREFIXES = (
    "ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_API_KEY", "MISTRAL_",
    "GROQ_", "DEEPSEEK_", "OPENROUTER_", "AZURE_OPENAI_", "OLLAMA_",
)  # fmt: skip
# imm's own variables, which the lane sets itself (`extra`): the only IMM_* names that pass
IMM_OWN = frozenset(
    {
        "IMM_BATCH_ID", "IMM_INITIATIVE", "IMM_TASK_ID", "IMM_SLICE_ID", "IMM_INTENT_PATH",
        "IMM_PROMPT_FILE", "IMM_ATTEMPT", "IMM_BASE_HEAD", "IMM_AGENT_SESSION",
    }
)  # fmt: skip
# The session the agent's last run of this lane reported (issue 45): set for a QA attempt
# after a run that reported one, so the agent can resume it; never the caller's value.
AGENT_SESSION = "IMM_AGENT_SESSION"
OPERATOR_NAMES = "IMM_EXECUTOR_ENV"  # more names to pass, from whoever runs imm

NEVER = frozenset(
    {
        "GITHUB_TOKEN", "GH_TOKEN", "IMM_TOKEN", "IMM_TOKEN_FILE", "IMM_GITHUB_TOKEN",
        "IMM_DEFAULT_TOKEN", "INPUT_GITHUB_TOKEN",
        # doors out of the sandbox: sockets of agents, buses, displays and daemons
        "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "XDG_RUNTIME_DIR",
        "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY",
        "XAUTHORITY", "DOCKER_HOST", "CONTAINER_HOST", "PODMAN_HOST",
    }
)  # fmt: skip
# the runner's credentials, git's plumbing, the XDG folders (in the user's home, hidden)
NEVER_PREFIXES = ("ACTIONS_", "GIT_", "XDG_")


def never_passes(name: str) -> bool:
    return name in NEVER or name.startswith(NEVER_PREFIXES)


def allowed(name: str, mapped: frozenset[str]) -> bool:
    if never_passes(name):
        return False
    return (
        name in BASICS
        or name in IMM_OWN
        or name in mapped
        or name.startswith((*BASIC_PREFIXES, *PROVIDER_PREFIXES))
    )


def operator_names(parent: Mapping[str, str]) -> frozenset[str]:
    """The names `IMM_EXECUTOR_ENV` lists (commas or spaces between them)."""
    return frozenset(parent.get(OPERATOR_NAMES, "").replace(",", " ").split())


def executor_environment(
    parent: Mapping[str, str], mapped: Iterable[str], extra: Mapping[str, str]
) -> dict[str, str]:
    """The allowlisted part of `parent`, plus `extra` (the lane's IMM_* variables and git's
    discovery ceiling, which imm sets itself)."""
    names = frozenset(mapped) | operator_names(parent)
    kept = {name: value for name, value in parent.items() if allowed(name, names)}
    kept.update(extra)
    return kept
