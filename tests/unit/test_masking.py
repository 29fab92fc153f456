"""Secret values never reach what imm writes; the executor sees only its allowlist."""

from __future__ import annotations

import io

from imm_action.lanes.environment import executor_environment
from imm_action.masking import MASK, MaskingWriter, masker_for

KEY = "sk-ant-api03-0123456789abcdef"
ENV = {"ANTHROPIC_API_KEY": KEY, "DB_PASSWORD": "hunter22-long", "PATH": "/usr/bin", "X": "1"}


def test_values_of_secret_looking_variables_are_masked() -> None:
    mask = masker_for(ENV)
    text = f"key={KEY} pw=hunter22-long path=/usr/bin"
    assert mask(text) == f"key={MASK} pw={MASK} path=/usr/bin"


def test_values_of_ordinary_variables_and_short_values_are_left_alone() -> None:
    mask = masker_for({"PATH": "/usr/bin", "GITHUB_TOKEN": "abc", "MODE": "secret-ish"})
    assert mask("/usr/bin abc secret-ish") == "/usr/bin abc secret-ish"


def test_a_secret_split_across_two_writes_of_a_stream_is_still_masked() -> None:
    sink = io.StringIO()
    writer = MaskingWriter(sink, masker_for(ENV))
    writer.write("token " + KEY[:7])
    writer.write(KEY[7:] + " done\n")
    writer.close()
    assert sink.getvalue() == f"token {MASK} done\n"


def test_a_stream_without_secrets_passes_through_unchanged() -> None:
    sink = io.StringIO()
    writer = MaskingWriter(sink, masker_for({"PATH": "/bin"}))
    writer.write("line one\nline two")
    writer.close()
    assert sink.getvalue() == "line one\nline two"


def test_the_executor_environment_is_an_allowlist() -> None:
    parent = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C", "ANTHROPIC_API_KEY": KEY,
        "IMM_TEST_BEHAVIOUR": "/b.json", "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "RANDOM_APP_SETTING": "x", "MY_MAPPED": "m",
    }  # fmt: skip
    env = executor_environment(parent, ["MY_MAPPED"], {"IMM_TASK_ID": "a"})
    assert env == {
        "PATH": "/usr/bin", "HOME": "/home/u", "LC_ALL": "C", "ANTHROPIC_API_KEY": KEY,
        "MY_MAPPED": "m", "IMM_TASK_ID": "a",
    }  # fmt: skip


def test_an_imm_variable_passes_only_when_it_is_imms_own_or_listed() -> None:
    parent = {"IMM_TEST_BEHAVIOUR": "/b.json", "IMM_SOMETHING": "x", "IMM_ATTEMPT": "1"}
    assert executor_environment(parent, [], {}) == {"IMM_ATTEMPT": "1"}
    listed = {**parent, "IMM_EXECUTOR_ENV": "IMM_TEST_BEHAVIOUR, OTHER"}
    assert executor_environment(listed, [], {}) == {
        "IMM_ATTEMPT": "1",
        "IMM_TEST_BEHAVIOUR": "/b.json",
    }


def test_github_tokens_runner_credentials_and_git_plumbing_never_pass_even_when_mapped() -> None:
    parent = {
        "GITHUB_TOKEN": "ghs_token_value", "GH_TOKEN": "gho_token_value",
        "IMM_GITHUB_TOKEN": "imm_token_value", "ACTIONS_RUNTIME_TOKEN": "runtime-token",
        "IMM_TOKEN": "the-actions-write-token", "IMM_TOKEN_FILE": "/tmp/token",
        "IMM_DEFAULT_TOKEN": "true",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x", "GIT_DIR": "/elsewhere/.git",
        "GIT_CONFIG_GLOBAL": "/evil",
    }  # fmt: skip
    assert executor_environment(parent, list(parent), {}) == {}
    operator = {**parent, "IMM_EXECUTOR_ENV": ",".join(parent)}
    assert executor_environment(operator, [], {}) == {}


def test_the_addresses_of_host_sockets_and_the_users_xdg_folders_never_pass_even_when_mapped() -> (
    None
):
    """ADR 0059, issue 59 #7: agents' and the session's sockets, and the XDG folders, which lie
    in the user's home; listed by the config and by the operator alike."""
    parent = {
        "SSH_AUTH_SOCK": "/run/user/0/ssh", "SSH_AGENT_PID": "42", "GPG_AGENT_INFO": "/run/g",
        "XDG_RUNTIME_DIR": "/run/user/0", "XDG_CONFIG_HOME": "/home/u/.config",
        "XDG_DATA_HOME": "/home/u/.local/share", "XDG_STATE_HOME": "/home/u/.local/state",
    }  # fmt: skip
    assert executor_environment(parent, list(parent), {}) == {}
    operator = {**parent, "IMM_EXECUTOR_ENV": ",".join(parent)}
    assert executor_environment(operator, [], {}) == {}
