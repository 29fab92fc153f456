"""imm-check.yml end to end with act: a pull request with a broken intent."""

from __future__ import annotations

import json

from tests.e2e.act_world import REPO, ActWorld
from tests.webhook_examples import example


def test_a_pull_request_with_a_broken_intent_gets_an_annotation_at_its_file_and_line(
    world: ActWorld,
) -> None:
    world.create({"a": []}, "shop")
    base = world._git(world.work, "rev-parse", "HEAD").strip()
    path = world.work / "docs/plans/a.intent.json"
    data = json.loads(path.read_text())
    data["risk"] = "whenever"
    path.write_text(json.dumps(data, indent=2) + "\n")
    world._git(world.work, "commit", "-q", "-am", "a: riskier")
    head = world._git(world.work, "rev-parse", "HEAD").strip()
    # GitHub's merge ref; the base has not moved, so the merge is the head itself.
    world.push("HEAD:refs/heads/riskier", "HEAD:refs/pull/7/merge")
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"risk"' in text)
    payload = example("pull_request.opened")
    payload["number"] = payload["pull_request"]["number"] = 7
    payload["pull_request"]["base"] |= {"sha": base, "ref": "main"}
    payload["pull_request"]["head"] |= {"sha": head, "ref": "riskier"}
    payload["repository"] |= {"full_name": REPO, "name": "shop"}
    run = world.act("pull_request", "imm-check.yml", payload, world.new_run_id())
    assert run.exit_code != 0
    assert f"file=docs/plans/a.intent.json,line={line}" in run.log
    repo = world.github.repo(REPO)
    check = next(r for r in repo.check_runs.values() if r["name"] == "imm: check")
    assert (check["head_sha"], check["conclusion"]) == (head, "failure")
    annotations = repo.annotations[check["id"]]
    assert [(a["path"], a["start_line"]) for a in annotations] == [
        ("docs/plans/a.intent.json", line)
    ]
