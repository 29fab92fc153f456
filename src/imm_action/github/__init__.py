"""GitHub access: the only package that talks to GitHub (PyGithub + tenacity)."""
