#!/bin/sh
# Runs the project's whole unittest suite (the post-turn tests are judged apart).
set -u
PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -s tests -t . -q
