#!/bin/sh
# Runs the project's whole unittest suite, including the post-turn tests.
set -u
[ -f tests/test_close.py ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }
PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -s tests -t . -q
