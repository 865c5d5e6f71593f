"""The contract in one package: what every other layer reads, and nothing it computes.

    schemas.py   the JSON Schemas of the input documents and the column types of every table
                 (schemas/*.schema.json, schemas/tables.json): loaded once, never retyped
    declare.py   what derives from the schemas: choices, bounds, the id pattern, policy defaults,
                 the msgspec decoders' field lists
    policy.py    the frozen policy: defaults filled in, the canonical form and its digest
    layout.py    the stored-attempt layout: file names, the id rule and its message
    files.py     reading input files safely: regular files only, under a size limit

ingestion/, record/, assessment/, study/, importers/ and the CLI import the contract from here;
a rule changes in the schema file and every path follows.
"""
