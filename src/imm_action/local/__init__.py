"""The embedded local runner: worktree lanes in a process pool, coordinated by reconcile passes."""
