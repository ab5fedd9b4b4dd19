#!/bin/sh
# Runs the package's node:test suite, including the post-turn tests.
set -u
[ -f test/months.test.js ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }
exec node --test
