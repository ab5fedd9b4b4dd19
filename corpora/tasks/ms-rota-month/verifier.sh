#!/bin/sh
# Runs the package's node:test suite (the post-turn tests are judged apart).
set -u
exec node --test
