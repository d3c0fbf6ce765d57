"""`hpctl plan`: the failure model on hand-computed cases, the Poisson tail, the event-based rate, the JSON shape,
bad input and the plot."""

from __future__ import annotations

import datetime as dt
import json
import math
import shlex
import sys
from typing import Any

import pytest
from hpctl_testkit import CLUSTER, CLUSTER_ARN, config_data, stubbed

from hpctl import plan
from tests.conftest import ROOT

KEYS = [
    "group",
    "instances",
    "accelerators_per_instance",
    "interruptions_per_day",
    "mtbf_hours",
    "checkpoint_write_seconds",
    "checkpoint_interval_minutes",
    "goodput",
    "spare_instances",
]


def group(name: str, instance_type: str, count: int) -> dict[str, Any]:
    return {"name": name, "instance_type": instance_type, "instance_count": count, "az_id": "usw2-az2"}


def config(*groups: dict[str, Any], fsx: dict[str, Any] | None = None) -> dict[str, Any]:
    data = config_data(instance_groups=list(groups) or [group("workers", "ml.p4d.24xlarge", 2)])
    if fsx is not None:
        data["storage"] = {"fsx_lustre": {"enabled": True, **fsx}}
    return data


# --- the model, by hand --------------------------------------------------------------------------------


def test_default_rate_is_the_llama3_figure() -> None:
    # 419 / (54 d x 24 h x 16384 GPUs) = 419 / 21,233,664 = 1.9733e-5 per accelerator-hour
    assert plan.DEFAULT_FAILURES_PER_ACCELERATOR_HOUR == 419 / 21_233_664
    assert round(plan.DEFAULT_FAILURES_PER_ACCELERATOR_HOUR, 9) == 1.9733e-5


def test_a_hand_computed_group() -> None:
    # N=2, a=8, F=1/1600: lambda = 16/1600 = 0.01 per hour, M = 100 h, 0.24 interruptions a day.
    # C = 72 GiB x 1024 / 1024 MiB/s = 72 s, c = 0.02 h < M/2.
    # tau = sqrt(2 x 0.02 x 100) - 0.02 = 2 - 0.02 = 1.98 h = 118.8 min.
    # r = 15/60 = 0.25 h; w = 0.02/1.98 + (1.98 + 0.02)/200 + 0.25/100 = 0.0101010 + 0.01 + 0.0025 = 0.0226010.
    # Spares: X ~ Poisson(0.01 x 1 h); P(X > 0) = 1 - e^-0.01 = 0.00995 < 0.01, so S = 0.
    p = plan.plan_group(
        "g",
        2,
        8,
        failures_per_accelerator_hour=1 / 1600,
        write_seconds=plan.checkpoint_write_seconds(72, 1024),
    )
    assert p.checkpoint_write_seconds == pytest.approx(72)
    assert p.interruptions_per_day == pytest.approx(0.24)
    assert p.mtbf_hours == pytest.approx(100)
    assert p.checkpoint_interval_minutes == pytest.approx(118.8)
    assert p.goodput == pytest.approx(1 - (0.02 / 1.98 + 0.01 + 0.0025))
    assert p.goodput == pytest.approx(0.977399, abs=1e-6)
    assert p.spare_instances == 0


def test_a_longer_repair_needs_a_spare() -> None:
    # Same group, 2 h to repair: X ~ Poisson(0.02); P(X > 0) = 1 - e^-0.02 = 0.0198 >= 0.01,
    # P(X > 1) = 1 - e^-0.02 x 1.02 = 0.000197 < 0.01, so S = 1.
    p = plan.plan_group("g", 2, 8, failures_per_accelerator_hour=1 / 1600, write_seconds=72, repair_hours=2)
    assert p.spare_instances == 1


def test_checkpoint_longer_than_half_the_mtbf_checkpoints_every_mtbf_and_goodput_floors_at_zero() -> None:
    # N=1, a=8, F=12.5: lambda = 100 per hour, M = 0.01 h. C = 72 s: c = 0.02 h >= M/2 = 0.005, so tau = M = 0.6 min.
    # w = 0.02/0.01 + (0.01 + 0.02)/0.02 + 0.25/0.01 = 2 + 1.5 + 25 > 1: goodput 0, not negative.
    p = plan.plan_group("g", 1, 8, failures_per_accelerator_hour=12.5, write_seconds=72)
    assert p.checkpoint_interval_minutes == pytest.approx(0.6)
    assert p.goodput == 0


def test_daly_interval_at_its_boundary() -> None:
    # c = M/2 exactly takes the second branch: tau = M.
    assert plan.daly_interval_hours(1.0, 2.0) == 2.0
    # Just below: sqrt(2 x 0.99 x 2) - 0.99 = sqrt(3.96) - 0.99 = 1.98997 - 0.99 = 0.99997
    assert plan.daly_interval_hours(0.99, 2.0) == pytest.approx(math.sqrt(3.96) - 0.99)


def test_daly_interval_is_near_the_best_goodput_of_the_waste_function() -> None:
    # c/tau + tau/(2M) is smallest at tau = sqrt(2cM) = sqrt(2 x 0.05 x 40) = 2 h; Daly's interval is c below it
    # (1.95 h), which costs next to nothing: the goodput differs by less than 1e-4.
    c, m, r = 0.05, 40.0, 0.25
    taus = [t / 1000 for t in range(100, 10_000)]
    values = [plan.goodput(t, c, m, r) for t in taus]
    assert taus[values.index(max(values))] == pytest.approx(2.0)
    assert plan.daly_interval_hours(c, m) == pytest.approx(1.95)
    assert max(values) - plan.goodput(1.95, c, m, r) < 1e-4


def test_fsx_write_throughput() -> None:
    # 2400 GiB = 2.34375 TiB x 500 MB/s/TiB = 1171.875 MiB/s
    assert plan.fsx_write_mib_per_s(2400, 500) == 1171.875


# --- the Poisson tail ------------------------------------------------------------------------------------


def test_poisson_tail_by_hand() -> None:
    # mean 1: P(X > 0) = 1 - e^-1 = 0.632121; P(X > 2) = 1 - e^-1 (1 + 1 + 1/2) = 1 - 2.5/e = 0.080301
    assert plan.poisson_tail(0, 1.0) == pytest.approx(1 - math.exp(-1))
    assert plan.poisson_tail(2, 1.0) == pytest.approx(1 - 2.5 / math.e)
    assert plan.poisson_tail(0, 0.0) == 0.0


def test_spares_are_the_smallest_count_below_the_risk() -> None:
    # mean 1: P(X > 3) = 1 - (8/3)/e = 0.018988 >= 0.01, P(X > 4) = 1 - (65/24)/e = 0.003660 < 0.01, so S = 4.
    assert plan.spare_instances(1.0) == 4
    assert plan.spare_instances(0.0) == 0
    # The one-pass search agrees with the definition through poisson_tail wherever it is checked.
    for mean in (1e-6, 0.3, 2.5, 7.0, 33.3, 100.0):
        spares = plan.spare_instances(mean)
        assert plan.poisson_tail(spares, mean) < 0.01, mean
        assert spares == 0 or plan.poisson_tail(spares - 1, mean) >= 0.01, mean


def test_spares_for_a_large_mean_do_not_underflow() -> None:
    # e^-1000 underflows to 0 in floating point; the tail is computed in log space.
    spares = plan.spare_instances(1000.0)
    assert plan.poisson_tail(spares, 1000.0) < 0.01 <= plan.poisson_tail(spares - 1, 1000.0)
    assert 1000 + 2 * math.sqrt(1000) < spares < 1000 + 3 * math.sqrt(1000)  # the normal 99% quantile is 2.33 sd


# --- the command -----------------------------------------------------------------------------------------


def test_worked_example_of_the_docs(run, write_config) -> None:
    # docs/resilience.md: 128 x ml.p5.48xlarge (8 GPUs), 1000 GiB checkpoints, FSx 24000 GiB x 500 MB/s/TiB.
    # W = 24000/1024 x 500 = 11718.75 MiB/s; C = 1000 x 1024 / 11718.75 = 87.38 s; c = 0.024272 h.
    # lambda = 1024 x 419/21233664 = 0.020206 per hour; M = 49.489 h; 0.48495 a day.
    # tau = sqrt(2 x 0.024272 x 49.489) - 0.024272 = 1.55005 - 0.02427 = 1.52578 h = 91.55 min.
    # w = 0.024272/1.52578 + (1.52578 + 0.024272)/98.979 + 0.25/49.489 = 0.015908 + 0.015661 + 0.005052 = 0.036621.
    # Spares: Poisson(0.020206): P(X > 0) = 0.0200 >= 0.01; P(X > 1) = 0.000201 < 0.01, so 1.
    data = config(
        group("p5", "ml.p5.48xlarge", 128), fsx={"capacity_gib": 24000, "throughput_per_tib": 500}
    )
    code, result = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "1000")
    assert code == 0
    (p,) = result
    assert p["accelerators_per_instance"] == 8
    assert p["checkpoint_write_seconds"] == pytest.approx(87.381, abs=1e-3)
    assert p["mtbf_hours"] == pytest.approx(49.489, abs=1e-3)
    assert p["interruptions_per_day"] == pytest.approx(0.48495, abs=1e-5)
    assert p["checkpoint_interval_minutes"] == pytest.approx(91.54, abs=0.01)
    assert p["goodput"] == pytest.approx(1 - 0.036621, abs=1e-5)
    assert p["spare_instances"] == 1


@pytest.mark.parametrize("page", ["resilience.md", "hpctl.md"])
def test_console_output_in_the_docs_is_what_plan_prints(run, write_config, page: str) -> None:
    data = config(
        group("p5-workers", "ml.p5.48xlarge", 128),
        group("system", "ml.m5.2xlarge", 2),
        fsx={"capacity_gib": 24000, "throughput_per_tib": 500},
    )
    code, out, _ = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "1000")
    assert code == 0
    text = (ROOT / "docs" / page).read_text()
    block = text.split("$ hpctl plan ", 1)[1].split("```", 1)[0]
    assert block.split("\n", 1)[1] == out, f"docs/{page}: the plan example is stale"


def test_json_is_one_object_per_accelerated_group_with_exactly_the_keys(run, write_config) -> None:
    data = config(
        group("p4d", "ml.p4d.24xlarge", 2),
        group("cpu", "ml.m5.2xlarge", 1),
        group("g5", "ml.g5.12xlarge", 4),
    )
    code, result = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                            "--write-mib-per-s", "100")
    assert code == 0
    assert [p["group"] for p in result] == ["p4d", "g5"]
    for p in result:
        assert list(p) == KEYS
    assert [(p["instances"], p["accelerators_per_instance"]) for p in result] == [(2, 8), (4, 4)]
    # Both groups have 16 accelerators: the same rate, so the same figures.
    assert result[0]["mtbf_hours"] == result[1]["mtbf_hours"] == pytest.approx(1 / (16 * 419 / 21_233_664))


def test_trainium_groups_are_planned_by_their_neuron_devices(run, write_config) -> None:
    # Trn1 and Trn2 have no GPUs: a job counts their Neuron devices, 16 on ml.trn1.32xlarge and ml.trn2.48xlarge,
    # 1 on ml.trn2.3xlarge (the instance catalog). botocore lists no ml.inf type, so no config can hold one.
    data = config(
        group("trn1", "ml.trn1.32xlarge", 4),
        group("trn2", "ml.trn2.48xlarge", 2),
        group("small", "ml.trn2.3xlarge", 3),
        group("p4d", "ml.p4d.24xlarge", 8),
    )
    code, result = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                            "--write-mib-per-s", "100")
    assert code == 0
    assert [(p["group"], p["instances"], p["accelerators_per_instance"]) for p in result] == [
        ("trn1", 4, 16), ("trn2", 2, 16), ("small", 3, 1), ("p4d", 8, 8)]
    # 4 x 16 Neuron devices are as many accelerators as 8 x 8 GPUs: the same rate, so the same figures.
    assert result[0]["mtbf_hours"] == result[3]["mtbf_hours"] == pytest.approx(1 / (64 * 419 / 21_233_664))


def test_a_gpu_type_without_a_count_is_skipped_and_named(run, write_config) -> None:
    data = config(group("p4d", "ml.p4d.24xlarge", 2), group("t4", "ml.g4dn.12xlarge", 2))
    code, out, _ = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                       "--write-mib-per-s", "100")
    assert code == 0
    assert "skipped t4: ml.g4dn.12xlarge has no count of its accelerators in the instance catalog" in out


def test_human_output_lists_skipped_groups_and_what_it_assumes(run, write_config) -> None:
    data = config(group("p4d", "ml.p4d.24xlarge", 2), group("cpu", "ml.m5.2xlarge", 1))
    code, out, err = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                         "--write-mib-per-s", "100", "--restart-minutes", "20", "--repair-hours", "4")
    assert code == 0 and err == ""
    header, row, skipped, assumes = out.strip().splitlines()
    assert header.split()[:3] == ["GROUP", "INSTANCES", "ACCEL"]
    assert row.split()[:3] == ["p4d", "2", "8"]
    assert skipped.startswith("skipped cpu: ml.m5.2xlarge has no accelerators")
    assert "20 min to restart" in assumes and "4 h to replace" in assumes and "100 MiB/s" in assumes
    assert "arXiv 2407.21783" in assumes


def test_explicit_rate_and_write_throughput_override_the_defaults(run, write_config) -> None:
    # F = 1/1600 on 2 x 8 GPUs: M = 100 h. W given: 72 GiB / 1024 MiB/s = 72 s even with FSx on.
    data = config(group("p4d", "ml.p4d.24xlarge", 2), fsx={"capacity_gib": 2400, "throughput_per_tib": 500})
    code, (p,) = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "72",
                          "--write-mib-per-s", "1024", "--failures-per-accelerator-hour", "0.000625")
    assert code == 0
    assert p["mtbf_hours"] == pytest.approx(100)
    assert p["checkpoint_interval_minutes"] == pytest.approx(118.8)


def test_fsx_throughput_is_used_when_no_write_rate_is_given(run, write_config) -> None:
    # 75 GiB x 1024 / 1171.875 MiB/s = 65.536 s
    data = config(group("p4d", "ml.p4d.24xlarge", 2), fsx={"capacity_gib": 2400, "throughput_per_tib": 500})
    code, (p,) = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "75")
    assert code == 0
    assert p["checkpoint_write_seconds"] == pytest.approx(65.536)


def test_group_picks_one_group(run, write_config) -> None:
    data = config(group("a", "ml.p4d.24xlarge", 2), group("b", "ml.g5.12xlarge", 4))
    code, result = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                            "--write-mib-per-s", "100", "--group", "b")
    assert code == 0
    assert [p["group"] for p in result] == ["b"]


BAD_INPUTS = [
    (["--checkpoint-gib", "0"], "--checkpoint-gib must be more than zero, got 0"),
    (["--checkpoint-gib", "-5"], "--checkpoint-gib must be more than zero, got -5"),
    (["--checkpoint-gib", "nan"], "--checkpoint-gib must be more than zero"),
    (["--write-mib-per-s", "0"], "--write-mib-per-s must be more than zero"),
    (["--restart-minutes", "-1"], "--restart-minutes must be zero or more"),
    (["--repair-hours", "0"], "--repair-hours must be more than zero"),
    (["--failures-per-accelerator-hour", "0"], "--failures-per-accelerator-hour must be more than zero"),
    (["--group", "nope"], "--group nope: no such instance group in the config (have: p4d, cpu)"),
    (["--group", "cpu"], "--group cpu: ml.m5.2xlarge has no accelerators"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(run, write_config, extra: list[str], message: str) -> None:
    data = config(group("p4d", "ml.p4d.24xlarge", 2), group("cpu", "ml.m5.2xlarge", 1))
    argv = {"--checkpoint-gib": "10", "--write-mib-per-s": "100"}
    argv.update(dict(zip(extra[::2], extra[1::2], strict=True)))
    code, out, err = run("plan", "--config", str(write_config(data)), *[x for kv in argv.items() for x in kv])
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err, err


def test_no_write_throughput_without_fsx_is_exit_2(run, write_config) -> None:
    code, out, err = run("plan", "--config", str(write_config(config())), "--checkpoint-gib", "10")
    assert code == 2 and out == ""
    assert err == (
        "hpctl: --write-mib-per-s is required: storage.fsx_lustre is disabled, so the config has no throughput\n"
    )


def test_a_config_without_accelerated_groups_is_exit_2(run, write_config) -> None:
    data = config(group("cpu", "ml.m5.2xlarge", 1))
    code, _, err = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10", "--write-mib-per-s", "1")
    assert code == 2
    assert err.startswith("hpctl: no instance group with accelerators in the config (skipped cpu: ")


# --- --from-events ---------------------------------------------------------------------------------------


def event(n: int, days_ago: float, level: str, resource: str = "Instance", group: str | None = "p4d",
          instance: str | None = None) -> dict[str, Any]:
    """A ClusterEventSummary as botocore's sagemaker model describes it."""
    summary: dict[str, Any] = {
        "EventId": f"00000000-0000-4000-8000-{n:012d}",
        "ClusterArn": CLUSTER_ARN,
        "ClusterName": CLUSTER,
        "ResourceType": resource,
        "EventTime": dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago),
        "EventLevel": level,
        "Description": "test event",
    }
    if group is not None:
        summary["InstanceGroupName"] = group
    if instance is not None:
        summary["InstanceId"] = instance
    return summary


def events_client(*pages: list[dict[str, Any]]) -> Any:
    client, stub = stubbed("sagemaker")
    request = {"ClusterName": CLUSTER, "SortBy": "EventTime", "SortOrder": "Descending", "MaxResults": 100}
    for i, events in enumerate(pages):
        response: dict[str, Any] = {"Events": events}
        if i < len(pages) - 1:
            response["NextToken"] = f"page-{i + 1}"
        stub.add_response("list_cluster_events", response, {**request, **({"NextToken": f"page-{i}"} if i else {})})
    return client, stub


def test_rate_from_events_counts_failed_instances_over_the_window(run, write_config) -> None:
    # Window: oldest event 100 days ago = 2400 h; 2 x ml.p4d.24xlarge = 16 GPUs: 38,400 accelerator-hours.
    # Failed instances: i-1 .. i-6 (i-1 logged twice, counted once) = 6; F = 6 / 38400 = 1/6400.
    # lambda = 16/6400 = 0.0025 per hour: M = 400 h.
    # Not counted: a Warn, an Info, a Cluster-level Error, an Error in a CPU group.
    page1 = [event(i, i, "Error", instance=f"i-{i}") for i in range(1, 7)]
    page1.append(event(7, 2, "Error", instance="i-1"))
    page2 = [
        event(8, 3, "Warn", instance="i-9"),
        event(9, 4, "Error", resource="Cluster", group=None),
        event(10, 5, "Error", group="cpu", instance="i-10"),
        event(11, 100, "Info", resource="InstanceGroup"),
    ]
    client, stub = events_client(page1, page2)
    data = config(group("p4d", "ml.p4d.24xlarge", 2), group("cpu", "ml.m5.2xlarge", 1))
    path = str(write_config(data))
    code, out, err = run("plan", "--config", path, "--checkpoint-gib", "10", "--write-mib-per-s", "100",
                         "--from-events", "--json", clients={"sagemaker": client})
    stub.assert_no_pending_responses()
    assert code == 0
    (p,) = json.loads(out)
    assert p["mtbf_hours"] == pytest.approx(400, rel=1e-4)
    assert "6 failed instance(s)" in err and "38,400 accelerator-hours" in err
    assert "warning" not in err


def test_too_few_events_fall_back_to_the_default_with_a_warning(run, write_config) -> None:
    client, stub = events_client([event(1, 10, "Error", instance="i-1"), event(2, 30, "Info")])
    data = config(group("p4d", "ml.p4d.24xlarge", 2))
    code, out, err = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                         "--write-mib-per-s", "100", "--from-events", clients={"sagemaker": client})
    assert code == 0
    assert "hpctl: warning: 1 failed instance(s)" in err and "using the default rate" in err
    assert plan.DEFAULT_SOURCE in out


def test_estimate_without_any_event_has_no_rate() -> None:
    estimate = plan.estimate_from_events([], {"p4d": 16}, dt.datetime.now(dt.UTC))
    assert (estimate.failures, estimate.accelerator_hours, estimate.rate) == (0, 0.0, None)


def test_from_events_and_an_explicit_rate_exclude_each_other(run, write_config) -> None:
    code, _, err = run("plan", "--config", str(write_config(config())), "--checkpoint-gib", "1",
                       "--write-mib-per-s", "1", "--from-events", "--failures-per-accelerator-hour", "1")
    assert code == 2 and "not allowed with" in err


# --- --plot ----------------------------------------------------------------------------------------------


def test_plot_without_matplotlib_says_how_to_get_it(run, write_config, monkeypatch, tmp_path) -> None:
    from hpctl.commands.plan import plot_requirement

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    target = tmp_path / "goodput.png"
    code, out, err = run("plan", "--config", str(write_config(config())), "--checkpoint-gib", "10",
                         "--write-mib-per-s", "100", "--plot", str(target))
    assert code == 2 and out == ""
    command = f"{shlex.quote(sys.executable)} -m pip install {shlex.quote(plot_requirement())}"
    assert err == f"hpctl: --plot needs matplotlib, which is not installed here: {command}\n"
    # The requirement is the plot extra's, as the installed distribution declares it: a command that works, not
    # an extra of a distribution the package index does not have.
    assert plot_requirement().startswith("matplotlib") and "hyperpod-eks-cdk" not in err
    assert not target.exists()


def test_plot_writes_a_png(run, write_config, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "goodput.png"
    code, out, _ = run("plan", "--config", str(write_config(config())), "--checkpoint-gib", "10",
                       "--write-mib-per-s", "100", "--plot", str(target))
    assert code == 0 and f"plot written to {target}" in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_curve_peaks_at_the_chosen_interval() -> None:
    pytest.importorskip("matplotlib")
    from hpctl.plan_plot import curve

    p = plan.plan_group("g", 2, 8, failures_per_accelerator_hour=1 / 1600, write_seconds=72)
    minutes, values = curve(p, 0.25)
    best = minutes[values.index(max(values))]
    assert minutes[0] < p.checkpoint_interval_minutes < minutes[-1]
    assert best == pytest.approx(p.checkpoint_interval_minutes, rel=0.05)


# --- spot groups ---------------------------------------------------------------------------------------------


def spot(name: str, instance_type: str, count: int) -> dict[str, Any]:
    return {**group(name, instance_type, count), "capacity": "spot"}


def test_a_spot_group_is_not_planned_as_on_demand_without_a_spot_rate(run, write_config) -> None:
    data = config(group("od", "ml.p4d.24xlarge", 2), spot("sp", "ml.p4d.24xlarge", 2))
    code, out, _ = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                       "--write-mib-per-s", "100")
    assert code == 0
    assert "skipped sp: capacity is spot" in out and "--spot-interruption-percent-per-month" in out
    code, _, err = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                       "--write-mib-per-s", "100", "--group", "sp")
    assert code == 2 and "--group sp: capacity is spot" in err


def test_a_spot_rate_adds_the_reclaims_to_the_hardware_faults(run, write_config) -> None:
    data = config(group("od", "ml.p4d.24xlarge", 2), spot("sp", "ml.p4d.24xlarge", 2))
    code, result = run.json("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                            "--write-mib-per-s", "100", "--failures-per-accelerator-hour", "0.001",
                            "--spot-interruption-percent-per-month", "10")
    assert code == 0
    by_group = {p["group"]: p for p in result}
    spot_rate = -math.log(0.9) / 730  # 10% of the instances reclaimed in a month of 730 hours
    assert by_group["od"]["mtbf_hours"] == pytest.approx(1 / (16 * 0.001))
    assert by_group["sp"]["mtbf_hours"] == pytest.approx(1 / (16 * 0.001 + 2 * spot_rate))
    code, _, err = run("plan", "--config", str(write_config(data)), "--checkpoint-gib", "10",
                       "--write-mib-per-s", "100", "--spot-interruption-percent-per-month", "100")
    assert code == 2 and "less than 100" in err


# --- the plot's curves -------------------------------------------------------------------------------------


def test_identical_groups_share_one_curve_and_labels_count_instances_right() -> None:
    from hpctl.plan_plot import curves

    same = [plan.plan_group(name, 2, 8, failures_per_accelerator_hour=1 / 1600, write_seconds=72)
            for name in ("a", "b")]
    single = plan.plan_group("one", 1, 8, failures_per_accelerator_hour=1 / 1600, write_seconds=72)
    labels = [label for label, _ in curves([*same, single])]
    assert labels == ["a, b (2 instances each)", "one (1 instance)"]
