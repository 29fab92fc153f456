"""Under act, with the shipped workflows, a lane job's executor is held to `lane_network`
(issue 60, ADR 0070): it reaches the listed host through imm's proxy and is refused another,
and the job's log names the refused host with the line that allows it."""

from __future__ import annotations

import json

from imm_action.sandbox.proxy import HOSTS_VARIABLE
from tests.e2e.act_world import ActWorld
from tests.network_world import hosts_file, web_host


def test_a_lane_jobs_executor_reaches_the_listed_host_and_is_refused_another(
    world: ActWorld,
) -> None:
    with web_host() as port:
        allowed, other = f"http://allowed.test:{port}/", f"http://other.test:{port}/"
        world.env = {"IMM_E2E_NET": json.dumps([allowed, other]),
                     HOSTS_VARIABLE: str(hosts_file(world.root.parent))}  # fmt: skip
        world.behaviour = {"a": "network"}
        world.create({"a": []}, "net", config="lane_network: [allowed.test]\n")
        world.dispatch({"initiative": "net"})
        runs = world.run_dispatches()
    assert {run.exit_code for run in runs} == {0}, runs[-1].log[-4000:]
    assert world.state()["batch_state"] == "completed"
    said = json.loads((world.spy / "network.a.json").read_text())
    assert said[allowed] == f"hello from allowed.test:{port}\n"
    assert said[other].startswith("not reached: HTTP Error 403")
    refused = f'other.test:{port} is not on lane_network: add "other.test:{port}" to lane_network'
    assert any(refused in run.log for run in runs)
