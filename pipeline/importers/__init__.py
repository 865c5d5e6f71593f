"""Importers: real profiler output -> one contract §2.4 measurement line per run.

    reader.py        what every format's reader is given and gives back: InputFile, ImportOptions
                     (parsed once), Imported (step -> region -> seconds, counters, the metric)
    registry.py      the formats (IMPORTERS), the choices and help texts derived from them, and
                     reading a run's files with the chosen format's reader
    lines.py         the one place a line is built, renamed and checked against
                     schemas/measurement.schema.json; import_line reads and builds one run's
    measurements.py  lines appended to a measurements file (refusing a run already there) or
                     printed; import_run is the ``import`` command's call
    folders.py       a folder of profiler files grouped into runs by file name; import_folder
    common.py        what the formats share: errors naming file and line, tables, exact units
    kernels.py       kernel GPU time as regions (--kernel-regions)
    naming.py        the default names of regions and counters
    kineto.py (kineto_stream.py), nsys.py, ncu.py, msprof.py, suites.py: one module per format

Every format module reads its files into an ``Imported``, all values exact Decimals. A new format
is its module's ``read`` and one entry in ``registry.IMPORTERS``.
"""
