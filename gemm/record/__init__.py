"""Recording and publishing: the asv suite's classes and sample protocol, the asv machine file,
the staged `asv run` that appends a commit to results/, history format migrations, asv's HTML
and the PNG plots."""
