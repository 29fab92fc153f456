"""JUnit XML: what pytest (`--junitxml`), unittest's XML runners, jest-junit, mocha, Maven's
surefire and most runners write. Parsed by defusedxml (no DTD, no entity, no external
reference: a report is lane-written text) into ElementTree's elements, read in one walk:
every `testcase`, suites nested or not, and how its children say it ended (junitparser's
wrappers did the same walk in 12 of the 20 ms a 2,000-test report may cost; ADR 0066)."""

from __future__ import annotations

from collections.abc import Iterator
from xml.etree.ElementTree import Element

from defusedxml import ElementTree as SafeTree

from imm_action.ledger.bounds import bounded_ledger
from imm_action.model.ledger import TestLedger, TestOutcome


class NotJUnit(ValueError):
    """The text is not a JUnit XML report."""


def read_junit(data: bytes) -> TestLedger:
    """The ledger of a JUnit XML report: every test case of every suite."""
    try:
        root = SafeTree.fromstring(data)
    except Exception as error:  # defusedxml's refusals and expat's errors alike
        raise NotJUnit(f"not XML a runner wrote: {error}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise NotJUnit(f"the root element is <{root.tag}>, not <testsuites> or <testsuite>")
    return bounded_ledger("junit", _cases(root))


def _cases(root: Element) -> Iterator[tuple[str, TestOutcome]]:
    modules: dict[str, str] = {}  # a file's dotted module, once per file
    for case in root.iter("testcase"):
        file, classname, name = case.get("file"), case.get("classname") or "", case.get("name")
        if file and file.endswith(".py"):
            module = modules.get(file)
            if module is None:
                module = modules[file] = file[: -len(".py")].replace("/", ".")
            yield _node_id(file, module, classname, name or ""), _outcome(case)
        else:
            yield (f"{classname}.{name}" if classname else name or ""), _outcome(case)


def _outcome(case: Element) -> TestOutcome:
    """How a case ended, by its children: an error, a failure, or a skip — which pytest
    writes for an expected failure too, of type `pytest.xfail`."""
    ended = {child.tag: child for child in case}
    if "error" in ended:
        return "error"
    if "failure" in ended:
        return "failed"
    skipped = ended.get("skipped")
    if skipped is not None:
        return "xfailed" if "xfail" in (skipped.get("type") or "") else "skipped"
    return "passed"


def _node_id(file: str, module: str, classname: str, name: str) -> str:
    """pytest's node id, where the report names the file (`tests/test_c.py::TestC::test_x`:
    junit_family xunit1, which imm asks pytest for). Without it a case's id is the dotted one
    unittest itself prints (`tests.test_c.TestC.test_x`)."""
    if classname == module:
        return f"{file}::{name}"
    inner = classname[len(module) + 1 :] if classname.startswith(f"{module}.") else ""
    return "::".join([file, *(part for part in inner.split(".") if part), name])
