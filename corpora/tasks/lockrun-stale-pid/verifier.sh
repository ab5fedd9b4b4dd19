#!/bin/sh
# Runs the project's own shell test cases (the post-turn tests are judged apart).
set -u
exec sh tests/run.sh
