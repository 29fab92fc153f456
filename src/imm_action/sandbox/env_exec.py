"""`python -I -S env_exec.py FILE ARGV...`: exec ARGV with the environment FILE holds (JSON).

The sandbox's sudo path (confine.py): sudo replaces the environment, and putting it on a
command line would show it to every local process, so the command's environment travels in a
file only imm's user reads, bound read-only into the sandbox. Standalone: imports nothing of
imm."""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: env_exec.py FILE ARGV...")
    with open(sys.argv[1], encoding="utf-8") as handle:
        env = {str(k): str(v) for k, v in json.load(handle).items()}
    argv = sys.argv[2:]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as error:
        sys.exit(f"cannot start {argv[0]}: {error.strerror}")


if __name__ == "__main__":
    main()
