"""The HTML report: one self-contained, offline file per campaign, and an index linking them.

Everything comes from the store: the output tables written by ``assess`` (``assessments``,
``comparisons``, ``outcomes``) and the input tables ``campaigns``, ``attempts``, ``expectations``
and ``integrity``. Plots are drawn by plotly; plotly.js is inlined once per file, figures are
embedded as JSON data blocks, so the file makes no network request and opens from disk.

Every user-provided string (hypothesis, candidate, region and counter names) is HTML-escaped, in
the page and inside the plot labels (plotly renders a subset of HTML in labels); JSON inside
``<script>`` has ``<``, ``>`` and ``&`` escaped so no string can close the script block.

The parts:

- ``data``: loading one campaign's report data from the store (and its what-if verdicts);
- ``style``: colours, symbols and the formatting of numbers, escaped text and embedded JSON;
- ``figures``: the campaign timeline and the per-attempt forest plot (plotly);
- ``pages``: the HTML sections, a campaign's page and the index;
- ``write``: writing the files.
"""

from pipeline.report.data import CampaignData, NotAssessedError, known_campaign, load_campaign_data
from pipeline.report.figures import forest_figure, forest_rows, timeline_figure
from pipeline.report.pages import IndexEntry, render_campaign, render_index
from pipeline.report.style import esc, fmt_pct, html_number, script_json
from pipeline.report.write import (
    IndexResult,
    campaign_file_name,
    default_output,
    write_all,
    write_report,
)

__all__ = [
    "CampaignData",
    "IndexEntry",
    "IndexResult",
    "NotAssessedError",
    "campaign_file_name",
    "default_output",
    "esc",
    "html_number",
    "fmt_pct",
    "forest_figure",
    "forest_rows",
    "known_campaign",
    "load_campaign_data",
    "render_campaign",
    "render_index",
    "script_json",
    "timeline_figure",
    "write_all",
    "write_report",
]
