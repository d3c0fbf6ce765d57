"""The failure model behind `hpctl plan`: interruption rate, checkpoint interval, goodput and spare instances.

Pure arithmetic, no AWS: docs/resilience.md explains each formula, its sources and its assumptions.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Meta's Llama 3 405B pre-training: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs, about 78%
# of them confirmed or suspected hardware ("The Llama 3 Herd of Models", https://arxiv.org/abs/2407.21783, its
# section on reliability; figures as reported at https://glennklockwood.com/garden/component-reliability and
# https://huggingface.co/posts/singhsidhukuldeep/833816740809851, the paper's own text was not at hand).
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384
DEFAULT_FAILURES_PER_ACCELERATOR_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)
DEFAULT_SOURCE = (
    f"Llama 3 pre-training: {LLAMA3_INTERRUPTIONS} in {LLAMA3_DAYS} days on {LLAMA3_GPUS:,} H100s, arXiv 2407.21783"
)

# Spot capacity is taken back on top of hardware faults. No interruption rate of HyperPod's spot capacity was found
# (the API reference of ClusterCapacityRequirements and ClusterSpotOptions gives none:
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterCapacityRequirements.html; unverified that
# AWS publishes none elsewhere); the closest published figure is EC2's Spot Instance Advisor, whose "frequency of
# interruption represents the rate at which Spot has reclaimed capacity during the trailing month", in bands of
# <5%, 5-10%, 10-15%, 15-20% and >20% (the advisor's own wording, as quoted by its data's readers: https://pkg.go.dev/github.com/grailbio/base/cloud/spotadvisor).
# `plan` takes that percentage only when given: that EC2's figure for a family holds for HyperPod's ml. type is an
# assumption (unverified). Read as the share of instances reclaimed within a month of 730 hours (8760 / 12), at a
# constant rate: lambda = -ln(1 - p) / 730 per instance-hour.
SPOT_SOURCE = "EC2 Spot Instance Advisor's frequency of interruption (share of capacity reclaimed in a month)"
HOURS_PER_MONTH = 8760 / 12

DEFAULT_RESTART_MINUTES = 15.0
DEFAULT_REPAIR_HOURS = 1.0
# Keep enough spares that more failures than spares within one repair time has a chance below 1%.
SPARE_RISK = 0.01
# Below this many observed failures the event-based rate is mostly noise (relative standard error of a
# Poisson count n is 1/sqrt(n): 45% at 5), so `--from-events` falls back to the default.
MIN_EVENTS = 5


@dataclass(frozen=True)
class GroupPlan:
    """The figures for one accelerated instance group; the fields are the keys of `hpctl plan --json`."""

    group: str
    instances: int
    accelerators_per_instance: int
    interruptions_per_day: float
    mtbf_hours: float
    checkpoint_write_seconds: float
    checkpoint_interval_minutes: float
    goodput: float
    spare_instances: int


def checkpoint_write_seconds(checkpoint_gib: float, write_mib_per_s: float) -> float:
    """C = checkpoint size in MiB / write throughput in MiB/s."""
    return checkpoint_gib * 1024 / write_mib_per_s


def fsx_write_mib_per_s(capacity_gib: int, throughput_per_tib: int) -> float:
    """FSx for Lustre throughput: storage in TiB x per-unit throughput (MB/s per TiB, taken as MiB/s)."""
    return capacity_gib / 1024 * throughput_per_tib


def daly_interval_hours(c: float, m: float) -> float:
    """Daly's first-order optimum checkpoint interval (hours) for write time c and MTBF m (hours).

    tau = sqrt(2 c M) - c while c < M/2, else M. J. T. Daly, "A higher order estimate of the optimum
    checkpoint interval for restart dumps", Future Generation Computer Systems 22(3), 303-312 (2006),
    https://doi.org/10.1016/j.future.2004.11.016. The sqrt(2 c M) - c form is as summarised at
    https://blog.acolyer.org/2015/06/10/a-higher-order-estimate-of-the-optimun-checkpoint-interval-for-restart-dumps/;
    unverified: the tau = M branch for c >= M/2, not in the parts of the paper that were at hand.
    """
    if c < m / 2:
        return math.sqrt(2 * c * m) - c
    return m


def waste(tau: float, c: float, m: float, r: float) -> float:
    """Fraction of time lost: writing checkpoints, redoing half an interval (plus the write) after each
    interruption, and restarting."""
    return c / tau + (tau + c) / (2 * m) + r / m


def goodput(tau: float, c: float, m: float, r: float) -> float:
    return max(0.0, 1 - waste(tau, c, m, r))


def poisson_tail(k: int, mean: float) -> float:
    """P(X > k) for X ~ Poisson(mean)."""
    if mean == 0:
        return 0.0
    # Terms in log space: exp(-mean) alone underflows for a mean above ~745.
    cdf = sum(math.exp(i * math.log(mean) - mean - math.lgamma(i + 1)) for i in range(k + 1))
    return max(0.0, 1 - cdf)


def spare_instances(mean_failures: float, risk: float = SPARE_RISK) -> int:
    """The smallest S >= 0 with P(X > S) < risk, X ~ Poisson(mean_failures).

    One pass: the CDF grows by one term per candidate S, summed in the order ``poisson_tail`` sums them (so the
    same floating-point values), instead of summing S + 1 terms again for each S (quadratic: about 0.4 s for a
    mean of 1000)."""
    if mean_failures == 0:
        return 0
    log_mean = math.log(mean_failures)
    cdf = 0.0
    spares = 0
    while True:
        cdf += math.exp(spares * log_mean - mean_failures - math.lgamma(spares + 1))
        if max(0.0, 1 - cdf) < risk:
            return spares
        spares += 1


def spot_interruptions_per_instance_hour(percent_per_month: float) -> float:
    """The constant hourly rate at which ``percent_per_month`` of the instances are reclaimed within a month."""
    return -math.log(1 - percent_per_month / 100) / HOURS_PER_MONTH


def plan_group(
    group: str,
    instances: int,
    accelerators_per_instance: int,
    *,
    failures_per_accelerator_hour: float,
    write_seconds: float,
    restart_minutes: float = DEFAULT_RESTART_MINUTES,
    repair_hours: float = DEFAULT_REPAIR_HOURS,
    spot_interruptions_per_instance_hour: float = 0.0,
) -> GroupPlan:
    """The figures of one group; a spot group adds its instances' reclaim rate to the hardware faults."""
    rate = instances * (accelerators_per_instance * failures_per_accelerator_hour
                        + spot_interruptions_per_instance_hour)  # lambda, per hour
    m = 1 / rate
    c = write_seconds / 3600
    tau = daly_interval_hours(c, m)
    return GroupPlan(
        group=group,
        instances=instances,
        accelerators_per_instance=accelerators_per_instance,
        interruptions_per_day=24 * rate,
        mtbf_hours=m,
        checkpoint_write_seconds=write_seconds,
        checkpoint_interval_minutes=tau * 60,
        goodput=goodput(tau, c, m, restart_minutes / 60),
        spare_instances=spare_instances(rate * repair_hours),
    )


@dataclass(frozen=True)
class EventEstimate:
    """A failure rate measured on the cluster's own events."""

    failures: int
    accelerator_hours: float

    @property
    def rate(self) -> float | None:
        """Failures per accelerator-hour, or None when there are too few failures to trust it."""
        if self.failures < MIN_EVENTS or self.accelerator_hours <= 0:
            return None
        return self.failures / self.accelerator_hours


def is_node_failure(event: Mapping[str, Any]) -> bool:
    """An Error-level event about one instance.

    ListClusterEvents has no event-type field: the only enums of ClusterEventSummary (botocore's
    sagemaker/2017-07-24 model) are ResourceType (Cluster | InstanceGroup | Instance) and EventLevel
    (Info | Warn | Error). They cannot tell a hardware fault from, say, a failed instance creation, so this
    counts every Error about an instance, which errs towards more failures (shorter intervals, more spares).
    """
    return event.get("ResourceType") == "Instance" and event.get("EventLevel") == "Error"


def estimate_from_events(
    events: Iterable[Mapping[str, Any]], accelerators_by_group: Mapping[str, int], now: dt.datetime
) -> EventEstimate:
    """Failures per accelerator-hour over the window the events cover (oldest event to now).

    A failure is one instance with at least one Error event in an accelerated group (a failing node often
    logs several; its replacement gets a new instance ID). Accelerator-hours are the groups' accelerators
    (instances x accelerators per instance) times the window, as if the groups had their current size
    throughout.
    """
    failed: set[str] = set()
    oldest: dt.datetime | None = None
    for event in events:
        time = event["EventTime"]
        oldest = time if oldest is None else min(oldest, time)
        group = event.get("InstanceGroupName")
        if group in accelerators_by_group and is_node_failure(event):
            failed.add(str(event.get("InstanceId") or event["EventId"]))
    hours = (now - oldest).total_seconds() / 3600 if oldest is not None else 0.0
    return EventEstimate(failures=len(failed), accelerator_hours=sum(accelerators_by_group.values()) * hours)
