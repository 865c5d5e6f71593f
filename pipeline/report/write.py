"""Writing report files: one campaign's page, or every campaign's page with an index."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.atomic import write_atomic
from pipeline.contract.policy import PolicyValue
from pipeline.errors import UsageError
from pipeline.report.data import NotAssessedError, load_campaign_data
from pipeline.report.pages import IndexEntry, render_campaign, render_index
from pipeline.store.tables import Store

SHARED_PLOTLY = "plotly-{version}.min.js"
"""With ``shared_plotly``: the one plotly.js file beside the pages (named by plotly's version, so
pages written by another version never load the wrong one)."""


def _write(path: Path, text: str) -> Path:
    """Write atomically, so a reader never sees half a report."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a file name (a folder only with --all)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the report: {exc.strerror or exc}") from exc
    return path


def default_output(campaign_id: str | None) -> Path:
    return Path("report") if campaign_id is None else Path(f"report-{campaign_id}.html")


def campaign_file_name(campaign_id: str) -> str:
    return f"campaign-{campaign_id}.html"


def write_report(
    store: Store, campaign_id: str, out: Path, *, what_if: Mapping[str, PolicyValue] | None = None
) -> Path:
    """Write the report of one campaign to ``out``; returns the path written."""
    return _write(out, render_campaign(load_campaign_data(store, campaign_id, what_if=what_if)))


@dataclass(frozen=True)
class IndexResult:
    index: Path
    pages: list[Path]
    not_assessed: list[str]


def write_all(
    store: Store,
    out_dir: Path,
    *,
    what_if: Mapping[str, PolicyValue] | None = None,
    shared_plotly: bool = False,
) -> IndexResult:
    """Write ``out_dir/index.html`` and one ``campaign-<id>.html`` per campaign beside it.

    A campaign that was never assessed gets no page; the index lists it with the command to run.
    With ``shared_plotly`` plotly.js is written once beside the pages and each page loads it
    (the folder must then stay together) instead of carrying its own copy (about 4.8 MB).
    """
    campaign_ids = store.campaign_ids("campaigns")
    if not campaign_ids:
        raise UsageError(
            f"store {store.root} has no campaigns: run `explain-pipeline ingest` first"
        )
    entries, pages = [], []
    plotly_src = _write_plotly(out_dir) if shared_plotly else None
    for cid in campaign_ids:
        try:
            data = load_campaign_data(store, cid, what_if=what_if)
        except NotAssessedError:
            entries.append(IndexEntry(cid, None, None))
            continue
        href = campaign_file_name(cid)
        text = render_campaign(data, index_href="index.html", plotly_src=plotly_src)
        pages.append(_write(out_dir / href, text))
        entries.append(IndexEntry(cid, href, data))
    index = _write(out_dir / "index.html", render_index(entries))
    return IndexResult(index, pages, [e.campaign_id for e in entries if e.data is None])


def _write_plotly(out_dir: Path) -> str:
    """plotly.js once in ``out_dir``; returns its name, relative to the pages."""
    import plotly
    from plotly.offline import get_plotlyjs

    name = SHARED_PLOTLY.format(version=plotly.__version__)
    _write(out_dir / name, get_plotlyjs())
    return name
