"""What a step tells the Actions runner: outputs, annotations, the lane matrix."""

from __future__ import annotations

from pathlib import Path

from imm_action.actions.runtime import (
    ActionsFiles,
    annotation,
    output_lines,
    write_outputs,
)
from imm_action.errors import Problem


def test_an_output_value_on_many_lines_is_framed_by_a_delimiter_it_cannot_contain() -> None:
    text = output_lines({"summary": "one\ntwo"})
    head, value_one, value_two, tail, end = text.split("\n")
    name, delimiter = head.split("<<")
    assert (name, value_one, value_two, tail, end) == ("summary", "one", "two", delimiter, "")


def test_outputs_are_appended_to_the_file_the_runner_named(tmp_path: Path) -> None:
    output = tmp_path / "output"
    output.write_text("earlier<<X\nv\nX\n")
    write_outputs(ActionsFiles(output, None), {"has-lanes": "true"})
    lines = output.read_text().splitlines()
    assert lines[:3] == ["earlier<<X", "v", "X"]
    assert lines[4] == "true"


def test_an_annotation_points_at_the_file_and_line() -> None:
    problem = Problem("docs/plans/a.intent.json", 7, "scope_hint: must not be empty")
    assert annotation(problem) == (
        "::error file=docs/plans/a.intent.json,line=7::scope_hint: must not be empty"
    )


def test_an_annotation_escapes_what_would_end_its_properties_or_message() -> None:
    problem = Problem("a,b:c.md", None, "two\nlines 100%")
    assert annotation(problem, "warning") == "::warning file=a%2Cb%3Ac.md::two%0Alines 100%25"


def test_the_batch_outputs_say_the_agents_cost_and_tokens_where_they_said() -> None:
    from imm_action.actions.runtime import batch_outputs
    from imm_action.model.spend import AgentSpend
    from tests.unit.test_decide import batch, pending

    spent = pending("a").model_copy(update={"spend": AgentSpend(cost_usd=0.5, tokens=1200, runs=1)})
    outputs = batch_outputs(batch(spent, pending("b")))
    assert (outputs["cost-usd"], outputs["tokens"]) == ("0.50", "1200")
    assert (outputs["integrated"], outputs["parked"], outputs["waiting"]) == ("0", "0", "2")
    assert outputs["green-head"] == ""  # no branch checks
