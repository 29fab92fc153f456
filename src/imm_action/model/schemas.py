"""Every format imm reads or writes, by the name `imm schema` takes, and its JSON Schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from imm_action.model.config import RepoConfig
from imm_action.model.descriptor import VerificationDescriptor
from imm_action.model.initiative import LocalInitiativeObservation
from imm_action.model.intent import TaskIntent
from imm_action.model.plan import BatchPlan
from imm_action.model.report import BatchRunReport
from imm_action.model.shard import ShardVerdict
from imm_action.model.state import BatchRunState

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "intent": TaskIntent,
    "descriptor": VerificationDescriptor,
    "plan": BatchPlan,
    "state": BatchRunState,
    "report": BatchRunReport,
    "config": RepoConfig,
    "initiative": LocalInitiativeObservation,
    "verdict": ShardVerdict,
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema generated from the model behind a format name."""
    model = SCHEMA_MODELS[name]
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://imm-action.dev/schema/{name}.json"
    return schema
