"""The pure planning core: no I/O, no environment, no clock. Data in, decisions out."""
