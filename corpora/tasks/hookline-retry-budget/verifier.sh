#!/bin/sh
# Checks the written answer and that the project's own tests still pass.
set -u
[ -f tests/test_answer_file.py ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }
[ -f answer.txt ] || { echo "verifier: answer.txt was not written" >&2; exit 1; }
PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -s tests -t . -q
