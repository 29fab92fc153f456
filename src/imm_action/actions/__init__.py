"""The GitHub Actions runtime (SPEC §3): step outputs, the job summary, annotations, log groups.

Pure text builders plus two appenders; the composition root decides whether they are used
(only when the Actions environment names the files).
"""
