"""Ingest: read and check stored attempts, then normalize them into the store's tables.

    attempts.py    ingest: campaigns and attempts found, checked in batches, written to the store

The precise engine (contract §2: the JSON Schemas and the rules a schema cannot say), split by
what is validated; nothing in it touches the store:

    jsontext.py    JSON text: NaN/Infinity and repeated keys kept visible, nesting, positions
    timestamps.py  RFC 3339 timestamps with a time zone
    plain.py       measurement lines valid beyond doubt (no jsonschema)
    rules.py       every problem of one parsed document: the schemas' and the other rules
    files.py       one input file read, parsed and checked whole: Issue, validate_document,
                   validate_measurements
    folders.py     a campaign or attempt folder: its id, its files, validate_campaign and
                   validate_attempt

The fast engine, tested against the precise one:

    bulk.py        many attempts' files checked at once: columnar first, then the decoders
    columnar.py    the usual file, every line of one shape, read and checked as Arrow columns
    decoders.py    the typed msgspec decoders: the JSON documents, and the other files' lines
    batch.py       what a check of a batch gives (Checked) and the store's rows from it
"""
