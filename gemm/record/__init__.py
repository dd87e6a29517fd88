"""Recording and publishing: the asv suite's classes and sample protocol, the asv machine
identity, the staged `asv run` that appends a commit to results/, history format migrations,
the published site (dashboard, series pages, gate verdicts, asv's HTML) and the PNG plots."""
