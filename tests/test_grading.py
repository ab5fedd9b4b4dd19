"""Grading: MUI v2, its split, delivery, the ablation deltas and the harness check, to the exact Fraction.

Two known scenarios: records built by hand whose figures are worked out on paper below, and the
real calibration agent run over bundled tasks, whose effect follows from the corpus.
`scenario_records` and `store_scenario` are reused by the aggregation and report tests.
"""

from __future__ import annotations

import hashlib
import math
import random
import subprocess
from fractions import Fraction
from pathlib import Path

import pyarrow as pa
import pytest
from scipy import stats as sps

from tasks_lib.agents.base import Transcript, TranscriptStep
from tasks_lib.analysis.grading import (
    GradingSummary,
    delivery_rates,
    grade_attempts,
    mui_credit,
    mui_harm,
    summarize,
    surface_echo,
)
from tasks_lib.analysis.headline import Comparison
from tasks_lib.analysis.stats import mcnemar_exact, sign_test, wilcoxon_signed_rank_exact
from tasks_lib.arm.audit import AuditReceipt
from tasks_lib.arm.steps import run_matrix, schedule, select_tasks
from tasks_lib.artifacts import ArtifactStore, LocalStore, run_key
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.delivery.provenance import wrap_block
from tasks_lib.memory.delivery.witness import DeliveryReceipt, ServedRecall, text_digest
from tasks_lib.run.layout import RECORD_JSON, RECORDS_TABLE, attempt_file
from tasks_lib.run.seal import seal_run

REPO = Path(__file__).resolve().parents[1]
DIGEST = "0" * 64

# Hand-built scenario, trials 0 and 1. Each cell: (outcome, tokens, injection).
#   alpha: a convention. off fails both trials; on passes both, delivered -> 2 success lifts.
#   beta:  deducible. Both pass. t0: off 3000 vs on 2000 -> exactly 1.5x, a cost saving;
#          t1: off 1400 vs on 1000 -> 1.4x, no credit.
#   gamma: t0 on passes but delivery was NOT confirmed (off failed) -> no credit;
#          t1 on fails, off passes -> no credit.
#   delta: t0 on passes delivered, but off is ungradable -> no credit;
#          t1 on is ungradable -> not in any denominator.
# Gradable on attempts: 2 + 2 + 2 + 1 = 7; credits 2 lifts + 1 saving -> MUI 3/7 = 2/7 + 1/7.
# Pass rates (gradable): on 6/7; off 3/7 (alpha 0/2, beta 2/2, gamma 1/2, delta 0/1);
#   ablate:keyword 4/8 -> marginal 6/7 - 1/2 = 5/14; ablate:semantic 7/8 -> 6/7 - 7/8 = -1/56;
#   ablate:all 3/8 -> harness gap 3/8 - 3/7 = -3/56 (not flagged; per task every gap is 0).
# McNemar over the 6 gradable on/off pairs: only-on 3 (alpha x2, gamma t0), only-off 1 (gamma t1);
#   p = 2 * (C(4,0) + C(4,1)) / 2^4 = 5/8.
# Delivery under on: 7 of 8 confirmed (gamma t0 is not) = 7/8 < 9/10 -> warning.
P, F, U = "pass", "fail", "ungradable"
SCENARIO: dict[tuple[str, str], tuple[tuple[str, int, str], tuple[str, int, str]]] = {
    ("alpha", "off"): ((F, 2500, "no"), (F, 2600, "no")),
    ("alpha", "on"): ((P, 900, "yes"), (P, 950, "yes")),
    ("alpha", "ablate:all"): ((F, 2500, "no"), (F, 2500, "no")),
    ("alpha", "ablate:keyword"): ((F, 2400, "yes"), (F, 2400, "yes")),
    ("alpha", "ablate:semantic"): ((P, 900, "yes"), (F, 2400, "yes")),
    ("beta", "off"): ((P, 3000, "no"), (P, 1400, "no")),
    ("beta", "on"): ((P, 2000, "yes"), (P, 1000, "yes")),
    ("beta", "ablate:all"): ((P, 3000, "no"), (P, 1400, "no")),
    ("beta", "ablate:keyword"): ((P, 2000, "yes"), (P, 1000, "yes")),
    ("beta", "ablate:semantic"): ((P, 2000, "yes"), (P, 1000, "yes")),
    ("gamma", "off"): ((F, 1800, "no"), (P, 1700, "no")),
    ("gamma", "on"): ((P, 1200, "no"), (F, 1300, "yes")),
    ("gamma", "ablate:all"): ((F, 1800, "no"), (P, 1700, "no")),
    ("gamma", "ablate:keyword"): ((F, 1800, "yes"), (F, 1800, "yes")),
    ("gamma", "ablate:semantic"): ((P, 1200, "yes"), (P, 1200, "yes")),
    ("delta", "off"): ((U, 0, "no"), (F, 2200, "no")),
    ("delta", "on"): ((P, 1100, "yes"), (U, 0, "yes")),
    ("delta", "ablate:all"): ((F, 2200, "no"), (F, 2200, "no")),
    ("delta", "ablate:keyword"): ((P, 1100, "yes"), (P, 1100, "yes")),
    ("delta", "ablate:semantic"): ((P, 1100, "yes"), (P, 1100, "yes")),
}
MEMORY_TEXTS = {"alpha": ["Partial uploads exit with status 3 so the cron wrapper retries them."]}


def record(task: str, condition: str, trial: int, outcome: str, tokens: int, injection: str, *, run_id: str = "scenario-run",
           calibration: bool = False) -> RunRecord:
    """A record of the scenario; transcript and receipt keys follow the arms layout."""
    prefix = run_key(run_id, "attempts", task, condition.replace(":", "-"), f"t{trial}")
    delivered = {"delivery_receipt": f"{prefix}/delivery.json", "delivery_nonce": hashlib.sha256(prefix.encode()).hexdigest()[:32],
                 "planted_ids": ("m1",), "delivered_ids": ("m1",)} if injection == "yes" else {}
    return RunRecord(
        run_id=run_id, task_id=task, condition=condition, trial=trial, agent="scripted", calibration=calibration,
        outcome=outcome, infra_failure=outcome == U, input_tokens=tokens - tokens // 10, output_tokens=tokens // 10,  # type: ignore[arg-type]
        cost_usd=0.0, wall_seconds=1.0 + tokens / 1000, injection=injection,  # type: ignore[arg-type]
        transcript=f"{prefix}/transcript.json", audit_receipt=f"{prefix}/audit.json", build_under_test="scripted/1",
        check_exit_code={P: 0, F: 1}.get(outcome), audit_passed=None if outcome == U else True, **delivered,
    )


def scenario_records(run_id: str = "scenario-run", overrides: dict[tuple[str, str], tuple] | None = None) -> list[RunRecord]:
    """Every attempt of the hand-built scenario (optionally with some cells replaced)."""
    cells = {**SCENARIO, **(overrides or {})}
    return [record(task, condition, trial, *cell, run_id=run_id)
            for (task, condition), trials in cells.items() for trial, cell in enumerate(trials)]


def store_scenario(store: ArtifactStore, records: list[RunRecord], *, echo_task: str = "alpha") -> None:
    """Store records.parquet as `memtrial paired` does, with a record, a transcript and an audit receipt per attempt.

    In `echo_task`'s on attempts the agent quotes its memory (a v1 surface echo); the receipt of
    delta/off/t0 is left out, as if it had been lost.
    """
    run_id = records[0].run_id
    for r in records:
        memory = MEMORY_TEXTS["alpha"][0]
        steps = [TranscriptStep(source="user", kind="prompt", text="Fix the uploader.")]
        if r.injection == "yes":
            steps.append(TranscriptStep(source="hook", kind="context", text=wrap_block("prompt-time", ["m1"], memory)))
            store.put_json(r.delivery_receipt or "", DeliveryReceipt(
                nonce=r.delivery_nonce or "", realm="project:0123456789abcdef", served_by="scripted", planted_ids=("m1",),
                recalls=(ServedRecall(realm="project:0123456789abcdef", lanes=("keyword",), ids=("m1",),
                                      text_sha256=(text_digest(memory),), at=1.0),)))
        quote = memory if (r.task_id == echo_task and r.condition == "on") else "Done; the tests pass."
        steps.append(TranscriptStep(source="agent", kind="message", text=quote))
        store.put_json(r.transcript or "", Transcript(agent="scripted", steps=tuple(steps)))
        if (r.task_id, r.condition, r.trial) != ("delta", "off", 0):
            store.put_json(r.audit_receipt or "", AuditReceipt(
                allowed_output_paths=("src",), before_digest=DIGEST, after_digest=DIGEST, entries_before=3,
                entries_after=3, violations=(), allowed_changes=(), passed=True))
        store.put_json(run_key(run_id, attempt_file(r.task_id, r.condition, r.trial, RECORD_JSON)), r)
    store.put_table(run_key(run_id, RECORDS_TABLE), pa.Table.from_pylist([r.model_dump(mode="json") for r in records]))
    seal_run(store, run_id)


def _summary(records: list[RunRecord]) -> GradingSummary:
    return summarize("scenario-run", records, grade_attempts(records))


def _pooled(summary: GradingSummary, kind: str, lane: str) -> Fraction:
    (row,) = [a for a in summary.ablations if a.kind == kind and a.lane == lane and a.task_id == "*"]
    return Fraction(row.delta)


def test_hand_built_scenario_mui_and_split_are_exact() -> None:
    summary = _summary(scenario_records())
    pooled = {t.task_id: t for t in summary.mui}
    assert (pooled["*"].on_attempts, pooled["*"].success_lift, pooled["*"].cost_saving) == (7, 2, 1)
    assert Fraction(pooled["*"].mui) == Fraction(3, 7)
    assert Fraction(pooled["*"].success_lift_share) == Fraction(2, 7)
    assert Fraction(pooled["*"].cost_saving_share) == Fraction(1, 7)
    assert Fraction(pooled["*"].success_lift_share) + Fraction(pooled["*"].cost_saving_share) == Fraction(pooled["*"].mui)
    assert {t: Fraction(pooled[t].mui) for t in ("alpha", "beta", "gamma", "delta")} == {
        "alpha": 1, "beta": Fraction(1, 2), "gamma": 0, "delta": 0}
    assert pooled["delta"].on_attempts == 1, "the ungradable on attempt is in no denominator"


def test_hand_built_scenario_credits_and_reasons_per_attempt() -> None:
    grades = {(g.task_id, g.trial): g for g in grade_attempts(scenario_records()) if g.condition == "on"}
    assert {k: g.mui_credit for k, g in grades.items()} == {
        ("alpha", 0): "success-lift", ("alpha", 1): "success-lift", ("beta", 0): "cost-saving", ("beta", 1): "none",
        ("gamma", 0): "none", ("gamma", 1): "none", ("delta", 0): "none", ("delta", 1): "none"}
    assert "not confirmed delivered" in grades[("gamma", 0)].mui_reason
    assert "ungradable" in grades[("delta", 0)].mui_reason
    assert "< 1.5 x" in grades[("beta", 1)].mui_reason
    assert (grades[("beta", 0)].tokens, grades[("beta", 0)].paired_off_tokens) == (2000, 3000)


def test_hand_built_scenario_ablation_deltas_are_marginal_and_exact() -> None:
    summary = _summary(scenario_records())
    assert _pooled(summary, "marginal", "keyword") == Fraction(5, 14)
    assert _pooled(summary, "marginal", "semantic") == Fraction(-1, 56)
    assert _pooled(summary, "harness-check", "all") == Fraction(-3, 56)
    assert {a.kind for a in summary.ablations} == {"marginal", "harness-check"}, "no summed row"
    per_task = {a.task_id: Fraction(a.delta) for a in summary.ablations if a.kind == "harness-check"}
    assert per_task == {"alpha": 0, "beta": 0, "gamma": 0, "delta": 0, "*": Fraction(-3, 56)}
    assert not any(a.flagged for a in summary.ablations)
    keyword_alpha = next(a for a in summary.ablations if a.lane == "keyword" and a.task_id == "alpha")
    assert Fraction(keyword_alpha.delta) == 1


def test_hand_built_scenario_pass_rates_and_paired_tests() -> None:
    summary = _summary(scenario_records())
    rates = {(r.task_id, r.condition): r for r in summary.pass_rates}
    assert Fraction(rates[("*", "on")].rate) == Fraction(6, 7) and rates[("*", "on")].ungradable == 1
    assert Fraction(rates[("*", "off")].rate) == Fraction(3, 7)
    low, high = rates[("alpha", "off")].wilson_low, rates[("alpha", "off")].wilson_high
    assert low == 0.0 and 0 < high < 1, "0/n keeps a width (no Wald collapse)"
    assert summary.mcnemar is not None
    assert (summary.mcnemar.pairs, summary.mcnemar.on_only, summary.mcnemar.off_only) == (6, 3, 1)
    assert Fraction(summary.mcnemar.pvalue) == Fraction(5, 8)
    tokens = next(p for p in summary.paired if p.measure == "tokens")
    diffs = [-1600, -1650, -1000, -400, -600, -400]  # alpha t0,t1; beta t0,t1; gamma t0,t1 (on - off)
    assert (tokens.pairs, tokens.exploratory, tokens.median_difference) == (6, False, -800.0)
    assert tokens.sign_pvalue == sign_test(diffs).pvalue
    assert tokens.wilcoxon_pvalue == wilcoxon_signed_rank_exact(diffs).pvalue


def test_low_delivery_rate_is_a_warning_a_human_sees() -> None:
    summary = _summary(scenario_records())
    on = next(d for d in summary.delivery if d.condition == "on")
    assert (on.confirmed, on.attempts, Fraction(on.rate)) == (7, 8, Fraction(7, 8))
    assert on.warning and "7 of 8" in on.warning
    assert any("7 of 8" in w for w in summary.warnings)


def test_memory_delivered_where_it_is_off_is_flagged_as_a_leak() -> None:
    records = scenario_records(overrides={("beta", "off"): ((P, 3000, "yes"), (P, 1400, "no"))})
    off = next(d for d in delivery_rates(records) if d.condition == "off")
    assert off.warning and "leak" in off.warning


def test_harness_gap_far_from_zero_is_flagged_never_a_memory_effect() -> None:
    """Regression: ablate:all that behaves like on means the switch misses an injection path."""
    broken = {("alpha", "ablate:all"): ((P, 900, "yes"), (P, 950, "yes")), ("delta", "ablate:all"): ((P, 1100, "yes"), (P, 1100, "yes"))}
    summary = _summary(scenario_records(overrides=broken))
    assert _pooled(summary, "harness-check", "all") == Fraction(7, 8) - Fraction(3, 7)
    flagged = [a for a in summary.ablations if a.flagged]
    assert {a.task_id for a in flagged} == {"alpha", "delta", "*"}
    assert any(w.startswith("harness check") for w in summary.warnings)


@pytest.mark.parametrize(
    ("on", "off", "credit"),
    [
        ((P, 1000, "yes"), (F, 1000, "no"), "success-lift"),
        ((P, 1000, "yes"), (P, 1500, "no"), "cost-saving"),
        ((P, 1000, "yes"), (P, 1499, "no"), "none"),
        ((P, 1000, "unknown"), (F, 1000, "no"), "none"),
        ((F, 1000, "yes"), (F, 9000, "no"), "none"),
        ((P, 0, "yes"), (P, 10, "no"), "none"),
    ],
    ids=["off-failed-is-a-lift", "exactly-1.5x-is-a-saving", "just-under-1.5x-is-nothing", "unknown-delivery-earns-nothing",
         "failed-on-earns-nothing", "zero-reported-tokens-cannot-show-a-saving"],
)
def test_mui_credit_rules(on: tuple[str, int, str], off: tuple[str, int, str], credit: str) -> None:
    assert mui_credit(record("t", "on", 0, *on), record("t", "off", 0, *off))[0] == credit


@pytest.mark.parametrize(
    ("on", "off", "harm"),
    [
        ((F, 1000, "yes"), (P, 1000, "no"), True),
        ((F, 1000, "no"), (P, 1000, "no"), False),
        ((P, 1500, "yes"), (P, 1000, "no"), True),
        ((P, 1499, "yes"), (P, 1000, "no"), False),
        ((F, 1000, "yes"), (F, 1000, "no"), False),
        ((P, 9000, "yes"), (F, 1000, "no"), False),
        ((P, 10, "yes"), (P, 0, "no"), False),
        ((F, 1000, "yes"), (U, 0, "no"), False),
    ],
    ids=["failed-where-off-passed", "harm-needs-confirmed-delivery-like-credit", "exactly-1.5x-a-passing-off-is-harm",
         "just-under-1.5x-is-no-harm", "both-failed-is-no-harm", "tokens-of-a-failed-off-do-not-count",
         "off-reporting-no-tokens-cannot-show-harm", "ungradable-off-is-no-harm"],
)
def test_mui_harm_rules(on: tuple[str, int, str], off: tuple[str, int, str], harm: bool) -> None:
    assert (mui_harm(record("t", "on", 0, *on), record("t", "off", 0, *off)) is not None) == harm


def _headline(summary: GradingSummary, a: str = "on", b: str = "off") -> Comparison:
    return next(c for c in summary.headline if (c.condition_a, c.condition_b) == (a, b))


def test_hand_built_scenario_headline_is_the_mean_over_tasks() -> None:
    """Per task (on - off): alpha 1, beta 0, gamma 0, delta 1 -> 1/2. MUI per task: alpha lift 1,
    beta saving 1/2, gamma harm 1/2 (t1: off passed, on failed), delta 0 -> lift 1/4, saving 1/8,
    harm 1/8, net 1/4. Four tasks can reject nothing at 95% (p = 1/2); the success interval is the
    Agresti-Min t interval, worked by hand: centre 2/6 with pseudo-tasks, sum of squares 7/3, 3 df."""
    summary = _summary(scenario_records())
    on_off = _headline(summary)
    assert (on_off.kind, on_off.tasks, on_off.attempts_a, on_off.gradable_a, on_off.passes_a, on_off.gradable_b, on_off.passes_b) == (
        "memory-effect", 4, 8, 7, 6, 7, 3), "raw counts, never reduced"
    success = on_off.success_difference
    assert (success.estimate, success.high, success.p_value) == (0.5, 1.0, 0.5)
    assert success.low == pytest.approx(1 / 3 - sps.t.ppf(0.975, 3) * math.sqrt(7 / 3 / 5 / 6))
    assert "all 2^4 = 16 sign assignments" in success.method and "Agresti-Min" in success.method
    assert success.exploratory, "two tasks differ: under five, the success difference is exploratory"
    assert on_off.token_difference.exploratory and on_off.token_difference.p_value is None
    # mean on - mean off per task: alpha 925 - 2550, beta 1500 - 2200, gamma 1250 - 1750, delta 1100 - 2200
    assert on_off.token_difference.estimate == (-1625 - 700 - 500 - 1100) / 4
    mui = on_off.mui
    assert mui is not None
    assert (mui.success_lift, mui.cost_saving, mui.harm, mui.net, mui.high) == (0.25, 0.125, 0.125, 0.25, 1.0)
    assert -1.0 < mui.low < 0.0
    assert (mui.on_attempts, mui.success_lifts, mui.cost_savings, mui.harms) == (7, 2, 1, 1)
    assert on_off.trial_level_mcnemar is not None and on_off.trial_level_mcnemar.p_value == 0.625, "kept as a reference"
    pooled = next(t for t in summary.mui if t.task_id == "*")
    assert (pooled.harm, Fraction(pooled.harm_share), Fraction(pooled.net)) == (1, Fraction(1, 7), Fraction(2, 7))
    harmed = [(g.task_id, g.trial) for g in grade_attempts(scenario_records()) if g.harm]
    assert harmed == [("gamma", 1)]
    assert [(c.kind, c.condition_a, c.condition_b) for c in summary.headline] == [
        ("memory-effect", "on", "off"), ("ablation", "on", "ablate:all"), ("ablation", "on", "ablate:keyword"),
        ("ablation", "on", "ablate:semantic"), ("versus-off", "ablate:all", "off"), ("versus-off", "ablate:keyword", "off"),
        ("versus-off", "ablate:semantic", "off")]
    assert all(c.mui is None for c in summary.headline[1:])
    keyword = _headline(summary, "on", "ablate:keyword").success_difference
    assert keyword.estimate == float(Fraction(1 + 0 + Fraction(1, 2) + 0, 4)), "alpha 1, beta 0, gamma 1/2 - 0, delta 0"
    at_k = {(r.condition, r.k): (Fraction(r.pass_at_k), Fraction(r.pass_hat_k)) for r in summary.pass_at_k}
    assert at_k[("ablate:semantic", 2)] == (1, Fraction(3, 4)), "alpha: one of two passes; every other task both"
    assert ("on", 2) not in at_k, "delta has one gradable on attempt: k stops at 1"


BUNDLED = REPO / "corpora" / "tasks"


def _bundled_task_ids() -> list[str]:
    return sorted(t.task_id for t in load_tasks(BUNDLED))


def test_an_agent_that_ignores_memory_shows_no_effect() -> None:
    """Regression: a coin-flip agent that ignores memory read "MUI 26%". Over the bundled tasks x
    off/on x 3 trials, the success difference's interval and net MUI's interval both contain 0."""
    rng = random.Random(1616)
    tasks = _bundled_task_ids()
    records = [record(task, condition, trial, P if rng.random() < 0.5 else F, rng.randint(800, 4000),
                      "yes" if condition == "on" else "no", run_id="coin-run")
               for task in tasks for condition in ("off", "on") for trial in range(3)]
    summary = summarize("coin-run", records, grade_attempts(records))
    on_off = _headline(summary)
    assert on_off.tasks == len(tasks) >= 10 and on_off.attempts_a == on_off.attempts_b == 3 * len(tasks)
    success, mui = on_off.success_difference, on_off.mui
    assert mui is not None and success.low is not None and success.high is not None
    assert success.low <= 0 <= success.high and success.p_value is not None and success.p_value > 0.05
    assert mui.low <= 0 <= mui.high and mui.p_value > 0.05
    assert mui.harms > 0 and mui.harm > 0, "the other direction is counted"
    assert Fraction(next(t for t in summary.mui if t.task_id == "*").mui) > Fraction(1, 5), "the one-sided MUI still looks like a benefit"
    assert not on_off.token_difference.exploratory and on_off.token_difference.low is not None


def test_repeating_a_deterministic_trial_adds_no_evidence() -> None:
    """Regression: 7 of 13 tasks won by memory, the same outcome in each of 3 trials, read p = 1/1,048,576
    by trial-level McNemar; clustered by task it is p = 1/64, exactly what one trial gives, and with one
    trial the task-level test is McNemar itself."""
    tasks = _bundled_task_ids()[:13]

    def run(trials: int) -> Comparison:
        records = [record(task, condition, trial, P if condition == "on" or i >= 7 else F, 1000,
                          "yes" if condition == "on" else "no", run_id=f"repeat-{trials}")
                   for i, task in enumerate(tasks) for condition in ("off", "on") for trial in range(trials)]
        return _headline(summarize(f"repeat-{trials}", records, grade_attempts(records)))

    one, three = run(1), run(3)
    assert three.success_difference.p_value == one.success_difference.p_value == 1 / 64
    assert (three.success_difference.low, three.success_difference.high) == (one.success_difference.low, one.success_difference.high)
    assert three.trial_level_mcnemar is not None and three.trial_level_mcnemar.p_value == 1 / 1_048_576
    assert one.trial_level_mcnemar is not None and one.trial_level_mcnemar.p_value == mcnemar_exact(7, 0).pvalue == 1 / 64
    assert three.mui is not None and three.mui.net == 7 / 13 and three.mui.low > 0, "7 of 13 tasks is an effect"


def test_surface_echo_counts_only_the_agents_own_words() -> None:
    text = MEMORY_TEXTS["alpha"]
    delivered_only = Transcript(agent="a", steps=(TranscriptStep(source="hook", kind="context", text=wrap_block("prompt-time", ["m"], text[0])),))
    quoted = Transcript(agent="a", steps=(TranscriptStep(source="agent", kind="message", text="Per the notes: " + text[0].upper()),))
    assert surface_echo(delivered_only, text) is False
    assert surface_echo(quoted, text) is True
    assert surface_echo(None, text) is None and surface_echo(quoted, None) is None


# --------------------------------------------------------------------------- the calibration agent

CALIBRATION_TASKS = ["logship-partial-exit", "tabmill-delimiter", "rotlog-keep-count"]


@pytest.mark.integration  # a real calibration run of three tasks
def test_calibration_agent_scenario_grades_exactly(tmp_path: Path) -> None:
    """From the corpus: memory decides logship (a success lift), halves tabmill's tokens (a cost
    saving) and only adds context on rotlog (no credit). Lanes overlap for the calibration agent,
    so ablating the keyword lane changes nothing, and ablate:all behaves exactly like off."""
    tasks = load_tasks(REPO / "corpora" / "tasks")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    plan = schedule(select_tasks(tasks, CALIBRATION_TASKS), ["off", "on", "ablate:all", "ablate:keyword"], 1)
    store = LocalStore(tmp_path / "artifacts")
    records = run_matrix(plan, run_id="calib-run", repo_root=REPO, commit=head, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=store)
    transcripts = {(r.task_id, r.condition, r.trial): store.get_json(r.transcript or "", Transcript) for r in records}
    texts = {t.task_id: [m.text for m in t.manifest.memories] for t in tasks}
    grades = grade_attempts(records, transcripts, texts)
    summary = summarize("calib-run", records, grades)

    credit = {g.task_id: g.mui_credit for g in grades if g.condition == "on"}
    assert credit == {"logship-partial-exit": "success-lift", "tabmill-delimiter": "cost-saving", "rotlog-keep-count": "none"}
    pooled = next(t for t in summary.mui if t.task_id == "*")
    assert (Fraction(pooled.mui), Fraction(pooled.success_lift_share), Fraction(pooled.cost_saving_share)) == (
        Fraction(2, 3), Fraction(1, 3), Fraction(1, 3))
    assert (pooled.surface_echo, pooled.surface_echo_known) == (0, 3), "the calibration agent applies memory without quoting it"
    deltas = {(a.kind, a.task_id): Fraction(a.delta) for a in summary.ablations}
    assert deltas == {(kind, task): 0 for task in [*sorted(CALIBRATION_TASKS), "*"] for kind in ("marginal", "harness-check")}
    delivery = {d.condition: Fraction(d.rate) for d in summary.delivery}
    assert delivery == {"off": 0, "on": 1, "ablate:all": 0, "ablate:keyword": 1}
    assert summary.calibration and any("calibration run" in w for w in summary.warnings)
    assert not [w for w in summary.warnings if "calibration run" not in w]
    assert summary.positive_control is not None and summary.positive_control.passed
    assert summary.positive_control.checked == 6, "three tasks under off and ablate:all"

    # The same effect, task-clustered and with intervals: three tasks can reject nothing at 95%.
    on_off = _headline(summary)
    assert (on_off.success_difference.estimate, on_off.success_difference.p_value) == (1 / 3, 1.0)
    assert (on_off.success_difference.low, on_off.success_difference.high) == (-1.0, 1.0)
    assert on_off.mui is not None
    assert (on_off.mui.success_lift, on_off.mui.cost_saving, on_off.mui.harm, on_off.mui.net) == (1 / 3, 1 / 3, 0.0, 2 / 3)
    assert (on_off.mui.low, on_off.mui.high, on_off.mui.harms) == (-1.0, 1.0, 0)
    assert on_off.token_difference.exploratory, "three tasks: tokens are described, not tested"
    assert {(c.condition_a, c.condition_b): c.success_difference.estimate for c in summary.headline} == {
        ("on", "off"): 1 / 3, ("on", "ablate:all"): 1 / 3, ("on", "ablate:keyword"): 0.0,
        ("ablate:all", "off"): 0.0, ("ablate:keyword", "off"): 1 / 3}
    # The agent is deterministic: two more identical trials change no task-level figure.
    tripled = [r.model_copy(update={"trial": t}) for r in records for t in range(3)]
    again = _headline(summarize("calib-run", tripled, grade_attempts(tripled)))
    assert again.success_difference == on_off.success_difference and again.mui == on_off.mui.model_copy(
        update={"on_attempts": 9, "success_lifts": 3, "cost_savings": 3})
    assert again.trial_level_mcnemar is not None and again.trial_level_mcnemar.p_value == 0.25 < on_off.success_difference.p_value


@pytest.mark.parametrize("condition", ["off", "ablate:all"])
def test_a_calibration_pass_without_memory_on_a_memory_only_task_fails_the_positive_control(condition: str) -> None:
    """Regression: a leak into `off` (and `ablate:all` with it) was invisible, because the harness check
    only compares those two with each other. The calibration agent's memoryless outcome is known by
    construction: a convention task it passes without memory means memory got in."""
    records = [record("alpha", c, 0, F, 1000, "no", calibration=True) for c in ("off", "ablate:all")]
    records = [r.model_copy(update={"task_kind": "convention"}) for r in records]
    leaked = [r.model_copy(update={"outcome": P, "check_exit_code": 0}) if r.condition == condition else r for r in records]
    clean = summarize("calib", records, grade_attempts(records)).positive_control
    assert clean is not None and clean.passed and clean.checked == 2
    summary = summarize("calib", leaked, grade_attempts(leaked))
    assert summary.positive_control is not None and not summary.positive_control.passed
    assert summary.positive_control.deviations == (f"alpha/{condition}/t0 (convention) passed, fail by construction",)
    assert any(w.startswith("positive control failed: 1 of 2 calibration attempts without memory") for w in summary.warnings)


def test_the_positive_control_checks_nothing_without_calibration_attempts() -> None:
    """Not a pass by default: a run with no calibration attempt has no positive control at all."""
    records = scenario_records()
    assert summarize("scenario-run", records, grade_attempts(records)).positive_control is None


def test_the_report_counts_tasks_judged_in_process() -> None:
    """Regression (issue 29): a task whose post-turn tests ran beside the code they judge (which can
    read or forge them) looked as trustworthy as one judged apart; the warnings now count and name them."""
    records = [r.model_copy(update={"judge": "in-process" if r.task_id == "alpha" else "apart"}) for r in scenario_records()]
    tasks = {r.task_id for r in records}
    (warning,) = [w for w in _summary(records).warnings if "judged in process" in w]
    assert warning.startswith(f"1 of {len(tasks)} task(s) judged in process (alpha)")
    apart = [r.model_copy(update={"judge": "apart"}) for r in records]
    assert not [w for w in _summary(apart).warnings if "judged in process" in w]
