#!/bin/sh
# Checks the written answer and that the project's own tests still pass.
set -u
[ -f answer.txt ] || { echo "verifier: answer.txt was not written" >&2; exit 1; }
PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -s tests -t . -q
