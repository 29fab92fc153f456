"""A stateful fake of GitHub's REST API on 127.0.0.1, for PyGithub to talk to over HTTP."""

from tests.fake_github.faults import Fault, FaultPlan
from tests.fake_github.server import FakeGitHub, LoggedRequest

__all__ = ["FakeGitHub", "Fault", "FaultPlan", "LoggedRequest"]
