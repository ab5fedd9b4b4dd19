"""Job definitions for the batch runner: `name: value` lines, one job per block."""

from pytimeparse.timeparse import timeparse


class JobConfigError(ValueError):
    """A job block cannot be read."""


def parse_block(text):
    """The `key: value` pairs of one job block, keys lower-cased."""
    fields = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise JobConfigError(f"line {number}: expected 'key: value'")
        fields[key.strip().lower()] = value.strip()
    if "name" not in fields:
        raise JobConfigError("a job needs a name")
    return fields


def timeout_seconds(fields):
    """How long the runner lets the job run before killing it, in seconds."""
    if "timeout" not in fields:
        return 2700
    seconds = timeparse(fields["timeout"])
    if seconds is None or seconds <= 0:
        raise JobConfigError(f"job {fields['name']}: cannot read timeout {fields['timeout']!r}")
    return int(seconds)
