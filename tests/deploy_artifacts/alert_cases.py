"""For each alert rule the overlays ship, a case where it must fire and one where it must stay
silent (``test_alert_rules`` hands them to ``promtool test rules``): input series with the names
the service exports (``consumer.observe.metrics``, ``consumer.http.state_metrics``), the labels a
scrape adds (``instance``) written where the rule aggregates them away."""

from __future__ import annotations

from dataclasses import dataclass, field

Series = list[tuple[str, str]]


@dataclass(frozen=True)
class Case:
    """Input series (one sample a minute), the time to look, and, if the alert must fire there,
    the labels each alert adds to the rule's own and how its annotations' templates render."""

    series: Series
    at: str
    fires: list[dict[str, str]] = field(default_factory=list)
    renders: dict[str, str] = field(default_factory=dict)


def fire(series: Series, at: str, *labels: dict[str, str], **renders: str) -> Case:
    return Case(series, at, list(labels) or [{}], {f"{{{{ {k} }}}}": v for k, v in renders.items()})


def silent(series: Series, at: str) -> Case:
    return Case(series, at)


DECISIONS = "consumer_push_decisions_total"
PERIOD = "consumer_tick_period_seconds"
SLOT = "consumer_tick_last_slot_timestamp_seconds"
DEAD_JOBS = 'consumer_job_results_total{kind="%s",result="dead",instance="%s"}'
DONE_JOBS = 'consumer_job_results_total{kind="record",result="done",instance="pod-a"}'
INBOX = 'consumer_inbox_rows{route="%s",status="%s"}'
REDRIVES = 'consumer_inbox_redrives_total{route="%s",instance="%s"}'
DURATION = "$value | humanizeDuration"
PERCENT = "$value | humanizePercentage"

CASES: dict[str, tuple[Case, Case]] = {
    "ConsumerJobsStuck": (
        # A job has waited 700 s; sweeps come every 300 s (another task's long period is ignored).
        fire(
            [
                ("consumer_oldest_due_job_age_seconds", "700x20"),
                (f'{PERIOD}{{task="sweep"}}', "300x20"),
                (f'{PERIOD}{{task="warm"}}', "3600x20"),
            ],
            "10m",
            **{DURATION: "11m 40s"},
        ),
        silent(
            [
                ("consumer_oldest_due_job_age_seconds", "500x20"),
                (f'{PERIOD}{{task="sweep"}}', "300x20"),
            ],
            "10m",
        ),
    ),
    "ConsumerSweepStalled": (
        # The last sweep slot stays at the epoch while the clock runs on (period: one minute).
        fire(
            [
                (f'{SLOT}{{task="sweep"}}', "0x20"),
                (f'{PERIOD}{{task="sweep"}}', "60x20"),
                (f'{PERIOD}{{task="warm"}}', "3600x20"),
            ],
            "10m",
            **{DURATION: "10m 0s"},
        ),
        # Each minute's sweep slot completes; a stale task other than the sweep does not count.
        silent(
            [
                (f'{SLOT}{{task="sweep"}}', "0+60x20"),
                (f'{PERIOD}{{task="sweep"}}', "60x20"),
                (f'{SLOT}{{task="warm"}}', "0x20"),
                (f'{PERIOD}{{task="warm"}}', "60x20"),
            ],
            "10m",
        ),
    ),
    "ConsumerTaskPausedTooLong": (
        # "report" was paused at the epoch; "sweep" two hours later (10 h 10 m before the look).
        fire(
            [
                ('consumer_task_paused{task="report",instance="pod-a"}', "0x740"),
                ('consumer_task_paused{task="report",instance="pod-b"}', "0x740"),
                ('consumer_task_paused{task="sweep",instance="pod-a"}', "7200x740"),
            ],
            "12h10m",
            {"task": "report"},
            **{DURATION: "12h 10m 0s"},
        ),
        # Paused 10 hours ago, and a task paused at the epoch was resumed (its series ended).
        silent(
            [
                ('consumer_task_paused{task="sweep",instance="pod-a"}', "7200x740"),
                ('consumer_task_paused{task="report",instance="pod-a"}', "0x600"),
            ],
            "12h10m",
        ),
    ),
    "ConsumerDeadJobsRising": (
        # A pod's counter of dead "record" jobs rises; another pod's first dead "export" job
        # creates its series at 1 (a labelled counter has no series before its first increment).
        fire(
            [
                (DEAD_JOBS % ("record", "pod-a"), "0x34 1x10"),
                (DEAD_JOBS % ("export", "pod-b"), "_x34 1x10"),
                (DONE_JOBS, "0+5x44"),
            ],
            "40m",
            {"kind": "export"},
            {"kind": "record"},
        ),
        # Jobs went dead 38 minutes ago and none since; done jobs go on.
        silent(
            [
                (DEAD_JOBS % ("record", "pod-a"), "2x44"),
                (DEAD_JOBS % ("export", "pod-b"), "_ 1x43"),
                (DONE_JOBS, "0+5x44"),
            ],
            "40m",
        ),
    ),
    "ConsumerDeadEventsRising": (
        # The first dead row of route storage (a status with no rows has no series), and one
        # more of route tick.
        fire(
            [
                (INBOX % ("storage", "dead"), "_x34 1x10"),
                (INBOX % ("tick", "dead"), "2x34 3x10"),
            ],
            "40m",
            {"route": "storage"},
            {"route": "tick"},
        ),
        # Old dead rows, one added 38 minutes ago; failed rows (retried) come and go.
        silent(
            [
                (INBOX % ("storage", "dead"), "3x44"),
                (INBOX % ("tick", "dead"), "1 2x43"),
                (INBOX % ("storage", "failed"), "0+1x44"),
            ],
            "40m",
        ),
    ),
    "ConsumerInboxRedrives": (
        # A pod re-drove a row of route tick 5 minutes ago; another pod's first re-drive of route
        # storage creates its series at 1.
        fire(
            [
                (REDRIVES % ("tick", "pod-a"), "0x34 1x5"),
                (REDRIVES % ("storage", "pod-b"), "_x34 1x5"),
            ],
            "39m",
            {"route": "storage"},
            {"route": "tick"},
        ),
        # Re-drives 38 minutes ago and none since.
        silent(
            [
                (REDRIVES % ("tick", "pod-a"), "0 2x44"),
                (REDRIVES % ("storage", "pod-b"), "_ 1x43"),
            ],
            "40m",
        ),
    ),
    "ConsumerUnavailableRatio": (
        # 10 of every 100 deliveries a minute are answered 503.
        fire(
            [
                (f'{DECISIONS}{{route="storage",outcome="unavailable",status="503"}}', "0+10x30"),
                (f'{DECISIONS}{{route="storage",outcome="done",status="200"}}', "0+90x30"),
            ],
            "25m",
            **{PERCENT: "10%"},
        ),
        # 1 in 100 (a blip), and server errors other than 503 are another alert's.
        silent(
            [
                (f'{DECISIONS}{{route="storage",outcome="unavailable",status="503"}}', "0+1x30"),
                (f'{DECISIONS}{{route="storage",outcome="error",status="500"}}', "0+10x30"),
                (f'{DECISIONS}{{route="storage",outcome="done",status="200"}}', "0+89x30"),
            ],
            "25m",
        ),
    ),
    "ConsumerServerErrors": (
        # 2 of every 100 deliveries a minute end in a 500.
        fire(
            [
                (f'{DECISIONS}{{route="tick",outcome="error",status="500"}}', "0+2x30"),
                (f'{DECISIONS}{{route="tick",outcome="done",status="200"}}', "0+98x30"),
            ],
            "25m",
            **{PERCENT: "2%"},
        ),
        # Many 503s (transient) and rejections, but no other server error.
        silent(
            [
                (f'{DECISIONS}{{route="tick",outcome="unavailable",status="503"}}', "0+20x30"),
                (f'{DECISIONS}{{route="-",outcome="rejected",status="400"}}', "0+20x30"),
                (f'{DECISIONS}{{route="tick",outcome="done",status="200"}}', "0+60x30"),
            ],
            "25m",
        ),
    ),
    "ConsumerCertificateFetchFailures": (
        fire([('consumer_oidc_cert_fetch_failures_total{instance="pod-a"}', "0x5 1x10")], "10m"),
        # Failures long ago, none in the last 15 minutes.
        silent([('consumer_oidc_cert_fetch_failures_total{instance="pod-a"}', "0 3x30")], "25m"),
    ),
    "ConsumerStateUnreadable": (
        fire(
            [
                ('consumer_state_up{instance="pod-a"}', "0x30"),
                ('consumer_state_up{instance="pod-b"}', "0x30"),
            ],
            "20m",
        ),
        # One pod cannot read the state; another can.
        silent(
            [
                ('consumer_state_up{instance="pod-a"}', "0x30"),
                ('consumer_state_up{instance="pod-b"}', "1x30"),
            ],
            "20m",
        ),
    ),
    "ConsumerMetricsAbsent": (
        # The pods were scraped for five minutes, then no more.
        fire([('consumer_state_up{instance="pod-a"}', "1x5")], "30m"),
        silent([('consumer_state_up{instance="pod-a"}', "1x30")], "30m"),
    ),
}
