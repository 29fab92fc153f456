"""imm-action: run an initiative in parallel lanes and land it through a guarded integrator."""

__version__ = "0.1.0"
