"""Secrets as references (flows/runtime/secrets.py): the flow run reads the Secret block a deployment names,
against a real Prefect API (the test harness)."""

from __future__ import annotations

import pytest

from flows.runtime.secrets import SecretReferenceError, resolve_secret_references


def test_a_named_secret_block_is_read_at_run_time(prefect_harness: None) -> None:
    from prefect.blocks.system import Secret

    Secret(value="s3cr3t-value").save("memtrial-test-s3-secret", overwrite=True)
    env = {"MEMTRIAL_SECRET_AWS_SECRET_ACCESS_KEY": "memtrial-test-s3-secret"}
    assert resolve_secret_references(env) == ["AWS_SECRET_ACCESS_KEY"]
    assert env["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"


def test_a_variable_the_worker_already_set_wins(prefect_harness: None) -> None:
    """The failure prevented: a deployment's reference overwriting the credentials a worker was given."""
    env = {"MEMTRIAL_SECRET_AWS_SECRET_ACCESS_KEY": "memtrial-test-s3-secret", "AWS_SECRET_ACCESS_KEY": "worker-own"}
    assert resolve_secret_references(env) == []
    assert env["AWS_SECRET_ACCESS_KEY"] == "worker-own"


def test_a_missing_block_names_the_variable_the_block_and_the_fix(prefect_harness: None) -> None:
    """The failure prevented: a flow run starting without credentials and failing later on S3."""
    env = {"MEMTRIAL_SECRET_AWS_ACCESS_KEY_ID": "memtrial-no-such-block"}
    with pytest.raises(SecretReferenceError, match=r"MEMTRIAL_SECRET_AWS_ACCESS_KEY_ID=memtrial-no-such-block: .*Secret\(value=\.\.\.\)"):
        resolve_secret_references(env)
    assert "AWS_ACCESS_KEY_ID" not in env
