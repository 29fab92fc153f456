"""The demo repository: a small Python project and a seven-task initiative over it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

SLUG = "shop"
TASKS: dict[str, tuple[list[str], str, list[str]]] = {
    # task: (blocked by, goal, scope)
    "money": ([], "Add exact money in cents", ["src/shop/money.py", "tests/test_money.py"]),
    "catalog": (["money"], "Add a product catalog",
                ["src/shop/catalog.py", "src/shop/registry.py", "tests/test_catalog.py"]),
    "tax": (["money"], "Add tax rates by kind of product",
            ["src/shop/tax.py", "src/shop/registry.py", "tests/test_tax.py"]),
    "cart": (["catalog"], "Add a cart that totals its items",
             ["src/shop/cart.py", "tests/test_cart.py"]),
    "discounts": (["money"], "Add discount codes",
                  ["src/shop/discounts.py", "tests/test_discounts.py"]),
    "checkout": (["cart", "tax", "discounts"], "Add checkout: discount, then tax",
                 ["src/shop/checkout.py", "tests/test_checkout.py"]),
    "docs": (["checkout"], "Document how prices combine", ["docs/pricing.md"]),
}  # fmt: skip

BASE_FILES = {
    "README.md": "# shop\n\nA tiny shop, built by an imm batch.\n",
    "src/shop/__init__.py": '"""A tiny shop."""\n',
    "src/shop/registry.py": (
        '"""Parts of the shop, registered by the tasks that add them."""\n\nPARTS: list[str] = []\n'
    ),
    "tests/__init__.py": (
        "import sys\nfrom pathlib import Path\n\n"
        'sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))\n'
    ),
    "tests/test_shop.py": (
        "import unittest\n\nimport shop\n\n\nclass Shop(unittest.TestCase):\n"
        "    def test_it_says_what_it_is(self):\n        self.assertTrue(shop.__doc__)\n"
    ),
    ".gitignore": "__pycache__/\n",
}  # fmt: skip
# the shop's whole suite gates every move; each task's own tests gate its lane's (ADR 0068)
SUITE = "python3 -m unittest discover -s tests -t . -q"


def _descriptor(task: str) -> str:
    if task == "docs":
        check = (
            "import pathlib,sys; t=pathlib.Path('docs/pricing.md').read_text(); "
            "sys.exit(0 if 'tax' in t else 1)"
        )
        argv = ["-c", check]
    else:
        argv = ["-m", "unittest", "-q", f"tests.test_{task}"]
    return json.dumps({
        "contract": "assurance_kernel/verification_descriptor/v2",
        "command": {"executable": "python3", "argv": argv, "timeout_ms": 60000},
    })  # fmt: skip


def demo_files(executor: str) -> dict[str, str]:
    files = dict(BASE_FILES)
    lines = [
        f"# Initiative {SLUG}",
        "",
        "Seven tasks, three levels deep; catalog and tax share a file.",
        "",
    ]
    for task, (needs, goal, scope) in TASKS.items():
        lines += [f"## {task}: {goal}", "Tasks:", f"- {task}"]
        if needs:
            lines.append("Blocked by: " + ", ".join(needs))
        lines.append("")
        acceptance = {
            "id": "tests",
            "assertion": f"The {task} checks pass.",
            "verification": _descriptor(task),
        }
        intent = {
            "contract": "assurance_kernel/task_intent/v1", "task_id": task, "goal": goal,
            "acceptance": [acceptance], "scope_hint": scope, "risk": "routine", "revision": 1,
            "owner": "user",
        }  # fmt: skip
        files[f"docs/plans/{task}.intent.json"] = json.dumps(intent, indent=2) + "\n"
    files[f"docs/initiatives/{SLUG}.md"] = "\n".join(lines)
    files[".github/imm.yml"] = (
        "# imm settings for the demo\nmax_parallel: 3\nqa_failure_limit: 2\n"
        f"executor: {json.dumps(executor)}\n"
        f"branch_checks:\n  - name: suite\n    command: {SUITE}\nheld_checks: branch\n"
        "# the demo's agent and tests need no network: they get none (issue 60)\n"
        "lane_network: none\ncheck_network: none\n"
    )
    return files


def bundled_executor() -> str:
    return shlex.join([sys.executable, "-m", "imm_action.demo.executor"])


def create_demo_repository(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for relative, content in demo_files(bundled_executor()).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "imm demo"],
        ["config", "user.email", "demo@imm-action.invalid"],
        ["add", "-A"],
        ["commit", "-q", "-m", "The shop before the initiative"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
