"""The recorder: `campaign start`, `round`, `campaign final` and `ab` write stored attempts.

Modules: ``order`` (the balanced, seeded run order), ``files`` (atomic writes), ``environment``
(where a round ran), ``runner`` (one run of one side as a fresh process), ``rounds`` (a whole
round) and ``campaign`` (campaign.json, the final assessment, the one-line A/B comparison).
"""
