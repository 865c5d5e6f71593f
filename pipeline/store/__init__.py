"""The store: Parquet tables, all-or-nothing writes, integrity and SQL over them."""
