"""pydantic models: the single source of every file format imm reads or writes.

Nothing is imported here: a command builds only the models its own modules import, and
`imm_action.model.schemas` names them all for `imm schema`.
"""
