"""The store: Parquet tables, all-or-nothing writes, staleness, integrity and SQL over them."""
