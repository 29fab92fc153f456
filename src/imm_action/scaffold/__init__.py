"""`imm init`: the repository config and the three workflows, written or brought up to date."""
