"""The report a team publishes (issue #35, item 7): what to distrust before any figure, the success
difference first and net MUI after it with its rule, one unit per kind of figure, raw counts,
p-values that say how they were counted, provenance after the results, the power method once,
and a pass-rate plot a browser shows at a readable size on a 44-task run.

The 44-task run is built from records (one trial, off and on) as `memtrial paired` stores them,
so the sign-flip test samples 20,000 seeded draws, as on the bundled corpus.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from flows.cli.main import main
from tasks_lib.artifacts import LocalStore
from tasks_lib.report import build_report
from test_grading import record, scenario_records, store_scenario
from test_report import ON_BLUE, _mask, chromium_argv

BIG = "big-run"
TASKS = [f"task-{i:02d}-with-a-longish-name" for i in range(44)]
ON_FAILS = {5, 16, 27, 38}
"""Tasks whose on attempt fails: 40/44 on attempts pass (a reduced fraction would read 10/11)."""
MIN_BAR_PIXELS = 150
"""Rendered height, in screen pixels, a 100% bar of the pass-rate plot must reach to be read (memtrial before
issue #35 drew 74 px; panels of at most 36 bars draw 171 px)."""


def big_records() -> list:
    """44 tasks x off/on x 1 trial: on passes all but ON_FAILS with fewer tokens, off passes every third task."""
    records = []
    for i, task in enumerate(TASKS):
        records.append(record(task, "off", 0, "pass" if i % 3 == 0 else "fail", 2000 + i, "no", run_id=BIG))
        records.append(record(task, "on", 0, "fail" if i in ON_FAILS else "pass", 1000 + i, "yes", run_id=BIG))
    return records


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(artifact root, the report page) of the 44-task run."""
    root = tmp_path_factory.mktemp("big-run") / "artifacts"
    store = LocalStore(root)
    store_scenario(store, big_records())
    built = build_report(store, BIG)
    return root, store.get_bytes(built.key).decode()


@pytest.fixture(scope="module")
def scenario_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The report of the hand-built 4-task scenario (2 trials, ablations, a lost receipt, a low delivery rate)."""
    store = LocalStore(tmp_path_factory.mktemp("scenario") / "artifacts")
    store_scenario(store, scenario_records("scenario-run"))
    return store.get_bytes(build_report(store, "scenario-run").key).decode()


def _text(page: str) -> str:
    """The page's visible text, tags and embedded images removed."""
    page = re.sub(r'src="data:[^"]*"', "", page)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_distrust_warnings_come_before_any_figure_not_after_them_behind_a_link(scenario_page: str) -> None:
    """The failure prevented: "Read before trusting" came after the headline's figures, reached by a
    link, so a reader quoted the numbers before seeing the delivery and ungradable warnings."""
    page = scenario_page
    assert 'href="#warnings"' not in page, "the warnings are on the page, not behind a link"
    warnings, headline = page.index('id="warnings"'), page.index('id="headline"')
    assert warnings < headline < page.index("+50.0 pp"), "the warnings come before the first figure"
    listed = page[warnings:headline]
    assert "DISTRUST: delivery confirmed on only 7 of 8 on attempts" in listed
    assert "DISTRUST: 2 attempt(s) are ungradable" in listed


def test_the_success_difference_leads_and_net_mui_follows_with_its_token_rule(scenario_page: str) -> None:
    """The failure prevented: net MUI, a composite with an unexplained 1.5x token rule, was the first bold figure
    while the CLI led with the success difference."""
    block = scenario_page[scenario_page.index('id="headline"'):scenario_page.index(">Layer 1: memory delivered")]
    first_bold = re.search(r"<strong>([^<]*)</strong>", block[block.index("</h2>"):])
    assert first_bold and first_bold.group(1).startswith("Success on - off: +50.0 pp"), first_bold
    assert block.index('id="success-difference"') < block.index('id="net-mui"')
    mui = _text(block[block.index('id="net-mui"'):])
    assert "net MUI +25.0 pp, 95% CI [" in mui and "p = 0.75 (exact)" in mui
    assert "off used at least 1.5x on's tokens" in mui and "on used at least 1.5x off's tokens" in mui, "the 1.5x rule, both ways"
    assert "confirmed delivered" in mui


def test_differences_are_in_percentage_points_and_rates_in_percent_never_mixed(scenario_page: str) -> None:
    """The failure prevented: net MUI in "% of on attempts" beside a success difference in pp, lane deltas as
    bare fractions ("-3/56"), the harness gap limit as "1/5 (20%)"."""
    text = _text(scenario_page)
    headline = text[text.index("Headline:"):text.index("Layer 1: memory delivered")]
    assert "net MUI +25.0 pp" in headline and "Net MUI +25.0%" not in headline
    interval = r"\[\d+\.\d%, \d+\.\d%\]"
    assert re.search(rf"success lift 25\.0% {interval} \+ cost saving 12\.5% {interval} - harm 12\.5% {interval} of on attempts",
                     headline), "components are shares, in %"
    assert not re.search(r"[+-]\d+\.\d% of on attempts", headline), "no signed difference in %"
    assert "-3/56" not in text and "-5.4 pp" in text, "a lane's marginal delta is in pp"
    assert "a gap above 20 pp" in text and "1/5 (20%)" not in text
    assert "% of pairs" in text and not re.search(r"[+-]\d+\.\d ?% of pairs", text), "a damage share is a rate: %, unsigned"


def test_counts_are_raw_never_reduced_fractions(big_run: tuple[Path, str]) -> None:
    """The failure prevented: the MUI "all tasks" row printed "19/22" for 38 of 44 attempts, so a reader could not
    see how many attempts stood behind a figure."""
    text = _text(big_run[1])
    assert "10/11" not in text and "5/16" not in text, "40/44 and 15/44, reduced"
    assert "40/44 on vs 15/44 off attempts passed" in text
    pooled_pass = re.search(r"all tasks on 40 44 0 ([^ ]+)", text)
    assert pooled_pass and pooled_pass.group(1) == "40/44", "the pooled pass rate keeps its counts"
    pooled_mui = re.search(r"all tasks 44 \d+ \d+ \d+ ([^ ]+)", text)
    assert pooled_mui and pooled_mui.group(1) == "40/44", "MUI = (lifts + savings) / on attempts, unreduced"
    assert "15/44 (34%)" in text


def test_monte_carlo_p_values_state_their_draws_and_only_enumerated_ones_say_exact(
        big_run: tuple[Path, str], scenario_page: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: "p = 0.0001" printed as a measured value where it is the floor of 20,000 Monte Carlo
    draws over 44 tasks, and "exact sign-flip" said of a sampled test."""
    root, page = big_run
    start = page.index('id="success-difference"')
    lead = _text(page[start:page.index("</p>", start)])
    assert "p < 0.0001 (20,000 draws)" in lead and "exact" not in lead and "p = 0.0001" not in lead, lead
    solve = _text(page[page.index("<p>", start):page.index("</p>", page.index("<p>", start))])
    assert "over 14 task(s), p < 0.001 (exact)" in solve, "tokens per solve, over 14 tasks, enumerated every assignment"
    assert "p < 0.0001 (20,000 draws)" in _text(page[page.index('id="net-mui"'):]), "net MUI's p too"
    assert "p = <" not in _text(page), "a bound is never written as a value"
    assert "p = 0.5 (exact)" in _text(scenario_page), "4 tasks: all 16 sign assignments were counted"
    assert main(["report", BIG, "--artifacts", str(root)]) == 0
    success = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("success on - off: "))
    assert re.fullmatch(r"success on - off: \+\d+\.\d pp, 95% CI \[\+\d+\.\d, \+\d+\.\d\], p < 0\.0001 \(20,000 draws\) over 44 "
                        r"tasks \(40/44 on vs 15/44 off attempts passed\)", success), success
    assert main(["runs", "--artifact-root", str(root), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["headline"]["p_text"] for r in listed] == ["p < 0.0001 (20,000 draws)"], "`memtrial runs` words it the same"


def test_the_readme_says_exact_only_where_the_test_enumerates() -> None:
    """The failure prevented: the README promised an "exact sign-flip test" where 44 tasks use 20,000 Monte Carlo draws."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "exact sign-flip" not in readme
    assert "p < 0.0001 (20,000 draws)" in readme


def test_provenance_hashes_come_after_the_results(scenario_page: str) -> None:
    """The failure prevented: config digests and corpus hashes sat between the headline and the results."""
    provenance = scenario_page.index('id="provenance"')
    for section in (">Layer 1: memory delivered", ">Pass rates", ">Layer 2-3: MUI v2", ">Harness check", ">Mutation audit",
                    ">Excluded attempts"):
        assert scenario_page.index(section) < provenance, section


def test_the_power_paragraph_states_its_method_once(scenario_page: str) -> None:
    """The failure prevented: the power paragraph stated its design (4 tasks x 2 trials) and its baseline (the off
    rates observed over the run's tasks) twice, once in its sentence and again in its method."""
    start = scenario_page.index('id="power"')
    power = _text(scenario_page[start:scenario_page.index("</p>", start)])
    for once in ("4 tasks x 2 trial(s)", "observed over 4 tasks", "simulated corpora", "seed", "Method:"):
        assert power.count(once) == 1, (once, power)


def test_the_power_command_explains_a_capped_difference_instead_of_an_unexplained_realized_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: `memtrial power` printed "realized +11.9" beside "+18 points" with no word on what it is."""
    root = tmp_path / "artifacts"
    store_scenario(LocalStore(root), scenario_records("scenario-run"))
    assert main(["power", "--run", "scenario-run", "--artifacts", str(root), "--tasks", "40", "--replicates", "300"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "realized" not in "\n".join(lines)
    found = re.match(r"smallest success difference detected with 80% power at the 5% level: \+(\d+) pp", lines[0])
    assert found, lines[0]
    capped = re.fullmatch(rf"capped: a task's on rate is off \+ d capped at 100%, so at d = \+{found.group(1)} pp the mean "
                          r"difference actually simulated is \+(\d+\.\d) pp", lines[1])
    assert capped and float(capped.group(1)) < int(found.group(1)), lines[1]
    assert main(["power", "--tasks", "30", "--trials", "3", "--baseline", "0.8", "--replicates", "200"]) == 0
    assert not any(line.startswith("capped:") for line in capsys.readouterr().out.splitlines()), "nothing capped, nothing said"


def test_the_pass_rate_plot_of_a_44_task_run_renders_tall_enough_to_read(big_run: tuple[Path, str], tmp_path: Path) -> None:
    """The failure prevented: the pass-rate plot of 44 tasks was one 6683x484 image the page scaled to about
    85 px tall, bars and labels unreadable. Headless Chromium renders the page; the tallest on bar (a 100% pass
    rate) must stand at least MIN_BAR_PIXELS screen pixels. The MUI and token plots are blanked (their bars share
    the colour), so every on-blue pixel on screen is the pass-rate plot's."""
    images = iter(range(3))
    only_pass_rates = re.sub(r'src="data:image/png;base64,[^"]*"',
                             lambda m: m.group(0) if next(images) == 0 else 'src=""', big_run[1])
    page = tmp_path / "report.html"
    page.write_text(only_pass_rates)
    shot = tmp_path / "report.png"
    done = subprocess.run([*chromium_argv(tmp_path, "--window-size=1280,5000", f"--screenshot={shot}"), page.as_uri()],
                          check=False, capture_output=True, text=True, timeout=180, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0 and shot.is_file(), f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    blue = _mask(np.asarray(Image.open(shot).convert("RGB")), ON_BLUE)
    assert blue.any(), "the pass-rate plot drew no on bar"
    tallest = max(_longest_run(column) for column in blue.T)
    assert tallest >= MIN_BAR_PIXELS, f"a 100% bar is {tallest} px tall on screen (at least {MIN_BAR_PIXELS} needed)"


def _longest_run(column: np.ndarray) -> int:
    """Length of the longest run of True in a column of pixels."""
    padded = np.concatenate(([0], column.astype(np.int8), [0]))
    edges = np.diff(padded)
    starts, ends = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
    return int((ends - starts).max()) if len(starts) else 0
