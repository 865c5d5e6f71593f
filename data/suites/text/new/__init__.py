"""One side of the text suite of docs/suites.md: a package, so both sides keep the file
name test_text.py."""
