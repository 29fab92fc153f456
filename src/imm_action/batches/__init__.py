"""What the batch commands share: the repository a batch runs in, a pass request and its ports,
a person's decisions applied through a pass, and the batch report printed."""
