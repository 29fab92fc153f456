"""The demo's bundled executor: deterministic, no AI. It writes each task's files; the cart
task ships a bug on its first attempt, so the QA loop retries it with the findings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

FILES: dict[str, dict[str, str]] = {
    "money": {
        "src/shop/money.py": (
            '"""Exact money in cents."""\n\n\n'
            "def cents(amount: str) -> int:\n"
            '    units, _, fraction = amount.partition(".")\n'
            '    return int(units) * 100 + int((fraction + "00")[:2])\n\n\n'
            "def show(value: int) -> str:\n"
            '    return f"{value // 100}.{value % 100:02d}"\n'
        ),
        "tests/test_money.py": (
            "import unittest\n\nfrom shop.money import cents, show\n\n\n"
            "class MoneyTest(unittest.TestCase):\n"
            "    def test_round_trip(self) -> None:\n"
            '        self.assertEqual(show(cents("12.5")), "12.50")\n'
        ),
    },
    "catalog": {
        "src/shop/catalog.py": (
            "from shop.money import cents\n\n"
            'PRICES = {"apple": cents("0.40"), "pear": cents("0.65"), "book": cents("12.00")}\n'
        ),
        "tests/test_catalog.py": (
            "import unittest\n\nfrom shop.catalog import PRICES\n\n\n"
            "class CatalogTest(unittest.TestCase):\n"
            "    def test_prices(self) -> None:\n"
            '        self.assertEqual(PRICES["book"], 1200)\n'
        ),
    },
    "tax": {
        "src/shop/tax.py": (
            'RATES = {"book": 7, "food": 0}\n\n\n'
            "def tax(kind: str, net: int) -> int:\n"
            "    return net * RATES.get(kind, 19) // 100\n"
        ),
        "tests/test_tax.py": (
            "import unittest\n\nfrom shop.tax import tax\n\n\n"
            "class TaxTest(unittest.TestCase):\n"
            "    def test_rates(self) -> None:\n"
            '        self.assertEqual(tax("book", 1000), 70)\n'
            '        self.assertEqual(tax("toy", 1000), 190)\n'
        ),
    },
    "cart": {
        "src/shop/cart.py": (
            "from shop.catalog import PRICES\n\n\n"
            "def total(items: dict[str, int]) -> int:\n"
            "    return sum(PRICES[name] * count for name, count in items.items())\n"
        ),
        "tests/test_cart.py": (
            "import unittest\n\nfrom shop.cart import total\n\n\n"
            "class CartTest(unittest.TestCase):\n"
            "    def test_total(self) -> None:\n"
            '        self.assertEqual(total({"apple": 3, "book": 1}), 1320)\n'
        ),
    },
    "discounts": {
        "src/shop/discounts.py": (
            'CODES = {"TENOFF": 10}\n\n\n'
            "def discounted(code: str, amount: int) -> int:\n"
            "    return amount - amount * CODES.get(code, 0) // 100\n"
        ),
        "tests/test_discounts.py": (
            "import unittest\n\nfrom shop.discounts import discounted\n\n\n"
            "class DiscountTest(unittest.TestCase):\n"
            "    def test_code(self) -> None:\n"
            '        self.assertEqual(discounted("TENOFF", 1000), 900)\n'
        ),
    },
    "checkout": {
        "src/shop/checkout.py": (
            "from shop.cart import total\nfrom shop.discounts import discounted\n"
            "from shop.tax import tax\n\n\n"
            "def checkout(items: dict[str, int], code: str, kind: str) -> int:\n"
            "    net = discounted(code, total(items))\n"
            "    return net + tax(kind, net)\n"
        ),
        "tests/test_checkout.py": (
            "import unittest\n\nfrom shop.checkout import checkout\n\n\n"
            "class CheckoutTest(unittest.TestCase):\n"
            "    def test_checkout(self) -> None:\n"
            '        self.assertEqual(checkout({"book": 1}, "TENOFF", "book"), 1155)\n'
        ),
    },
    "docs": {
        "docs/pricing.md": (
            "# Pricing\n\nA cart's total in Money (cents), less a discount code, plus tax by "
            "kind of product.\n"
        ),
    },
}
BUGGY_FIRST = {"cart": ("src/shop/cart.py",)}  # first attempt multiplies by 1: a wrong total
REGISTERS = {"catalog": "catalog", "tax": "tax"}  # both add a line to the shared registry


def main() -> int:
    task = os.environ["IMM_TASK_ID"]
    attempt = int(os.environ.get("IMM_ATTEMPT", "1"))
    for path, content in FILES[task].items():
        buggy = task in BUGGY_FIRST and attempt == 1 and path == BUGGY_FIRST[task][0]
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            content.replace(" * count", " * 1") if buggy else content, encoding="utf-8"
        )
    if task in REGISTERS:
        registry = Path("src/shop/registry.py")
        registry.write_text(registry.read_text() + f'PARTS.append("{REGISTERS[task]}")\n')
    print(f"demo executor: wrote {task} (attempt {attempt})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
