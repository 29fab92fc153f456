"""The reconcile pass, orchestrated: observe → decide → apply (SPEC §5.2; ADR 0020)."""
