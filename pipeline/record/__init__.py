"""The recorder: `campaign start`, `round`, `campaign final` and `ab` write stored attempts.

Modules: ``order`` (the balanced, seeded run order), ``files`` (atomic writes), ``environment``
(where a round ran), ``runner`` (one run of one side as a fresh process), ``rounds`` (a whole
round) and ``campaign`` (campaign.json, the final assessment, the one-line A/B comparison).
"""

DEFAULT_TIMEOUT = 600.0
"""Seconds after which a run is killed and counted failed when --timeout is not given (0: no
limit). Ten minutes is far longer than one run of a benchmark (seconds to a few minutes, loading
a model included), and short enough that a hung command costs minutes, not the rest of the day:
a side that keeps failing stops the round after GIVE_UP_AFTER runs (rounds.py). Declared here,
where `--help` can read it without loading the recorder."""
