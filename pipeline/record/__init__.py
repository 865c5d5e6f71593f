"""The recorder: `campaign start`, `round`, `campaign final` and `ab` write stored attempts.

Modules: ``options`` (RunOptions: how the runs of a round are made, traced and measured, and
ab's policy defaults), ``order`` (the balanced, seeded run order), ``environment`` (where a
round ran), ``runner`` (one run of one side as a fresh process), ``measure`` (what the recorder
measures of a run itself), ``rounds`` (a whole round), ``until`` (``--until-decided``: looks
and stops) and ``campaign`` (campaign.json, the final assessment, the one-line A/B comparison).

Options are parsed once. ``round`` and ``ab`` hand the recorder one ``RunOptions`` (their
shared run options), ``round`` wraps it in a ``RoundRequest`` (campaign, sides, commands),
``ab`` takes it beside its policy (laid over ``options.AB_POLICY``, the same from Python as
from the command line). A new option of ``round``, ``ab`` and ``campaign final --confirm`` is:

1. one entry of ``ROUND_OPTIONS`` (pipeline/record/options.py: flags, help, default, what it
   accepts; cli/record.py makes the click option of every entry) and one field of the same
   name in ``RunOptions`` (or ``MeasureOptions``), checked in its ``__post_init__``;
2. the code in the recorder that uses ``request.run.<field>`` (``rounds.record_round``);
3. its line in docs/record.md (+ docs/zh/record.md).

An option of ``ab`` alone that changes its policy (e.g. a gate) is a key of the ``policy`` ab
takes, its default in ``AB_POLICY`` when it differs from the contract's; an option of ``round``
alone is a field of ``RoundRequest``. The plan of looks of ``--until-decided`` is one
``assessment.sequential.Schedule`` (first_look, look_every, max_pairs), its defaults declared in
attempt.schema.json.
"""

DEFAULT_TIMEOUT = 600.0
"""Seconds after which a run is killed and counted failed when --timeout is not given (0: no
limit). Ten minutes is far longer than one run of a benchmark (seconds to a few minutes, loading
a model included), and short enough that a hung command costs minutes, not the rest of the day:
a side that keeps failing stops the round after GIVE_UP_AFTER runs (rounds.py). Declared here,
where `--help` can read it without loading the recorder."""
