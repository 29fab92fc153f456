"""Initiative sources: a local markdown file, or a GitHub issue."""
