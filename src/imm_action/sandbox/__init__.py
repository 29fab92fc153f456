"""What confines lane code (SPEC §8): the view of the host, the bubblewrap sandbox, the reaper
that ends a command's whole process tree. Executors and checks both run through it."""
