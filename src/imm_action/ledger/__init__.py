"""Reading a check's test reports into its test ledger (issue 58): JUnit XML (pytest's, and
what unittest, jest-junit and most runners write), TAP (tape, node's test runner) and jest's
and vitest's JSON. Reports are untrusted text a lane's code wrote: parsed with a hardened XML
parser, bounded in size and count, and any report that does not parse is no report."""
