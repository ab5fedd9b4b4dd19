#!/bin/sh
# Runs the project's shell test cases, including the post-turn ones.
set -u
[ -f tests/default_window.sh ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }
exec sh tests/run.sh
