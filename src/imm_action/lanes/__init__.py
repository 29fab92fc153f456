"""Lane execution: one task's work, from lane base to a published outcome."""
