"""The reconcile pass: pure decisions (state transitions) and the short driver applying them."""
