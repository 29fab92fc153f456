"""pydantic models: the single source of every file format imm reads or writes.

Nothing is imported here: a command loads only the formats it reads (`imm lane` never builds
the report's models), and `imm_action.model.schemas` names them all for `imm schema`.
"""
