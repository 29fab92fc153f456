"""`imm demo`: a real batch on a generated repository, run by the embedded local runner."""
