"""Benchmark ``POST /push`` against its floor on PostgreSQL (not a test).

Both servers run under the same gunicorn settings (``-w 2``, loopback, ``--worker sync``: gunicorn's
sync worker, or ``--worker asyncio``: production's ``consumer.http.worker.ConsumerWorker``, whose
buffering bridge then serves both apps with the same threads) on one fresh database:
  consumer  the real service, a new deploy event per request (parse, classify, claim, handler,
            finish), with a no-op deploy handler (``bench.noop_deploy``) so warming is not measured;
  floor     a minimal Flask route doing one ``INSERT ... ON CONFLICT DO NOTHING``
            (``bench.push_floor_app:app()``);
  2-writes  the same route doing the two durable statements any exactly-once design needs, a
            claim before the handler and the outcome before the answer
            (``bench.push_floor_app:two_writes()``): the ceiling of the consumer's ratio;
  2w-wsgi   the same two writes answered before Flask, by WSGI middleware, as the consumer
            answers ``/push`` (``bench.push_floor_app:two_writes_wsgi()``): the ratio to it is
            what the consumer costs beyond the writes, framework savings aside.
Each is driven with ``--connections`` keep-alive connections for ``--seconds``, alternately,
``--repeat`` times; the medians of req/s, p50 and p99 are printed with the ratio consumer/floor
(target >= 0.6, p99 < 25 ms), and the CPU each request cost the gunicorn workers and the
PostgreSQL backends (read from /proc: steadier than rates on a shared machine). The load
generator is ``wrk`` (Debian package) with a Lua script when it is installed, else a Python one
with keep-alive connections; the output says which. The last line sets the consumer's CPU
per push beside the two-writes route's (``push cpu: ...``).

``--one-commit`` adds ``1-commit``: the consumer with the same no-op deploy handler declared a
one-commit handler (``bench.one_commit_deploy``: claim and outcome in one transaction), and
``1c-floor``, the floor route writing the claim and the outcome in one transaction
(``bench.push_floor_app:one_commit()``), and prints their ratios to the one-insert floor
(target for ``1-commit`` >= 0.90) and ``1-commit``/``consumer``.

``--tracing`` adds ``traced``: the consumer with OpenTelemetry on, every trace sampled, its spans
exported over OTLP/HTTP to a local receiver that parses each request and counts its spans
(``bench.support.otlp_receiver``; it keeps none, as a collector on another machine would cost
this one nothing), and prints the ratio traced/consumer (target >= 0.90) and the app CPU per
request of each (the span cost itself, whatever else the machine does).

    python -m bench.push_bench [--seconds 10] [--repeat 3] [--connections 16]
                               [--worker sync|asyncio] [--one-commit] [--tracing]
                               [--profile | --phases]
"""

from __future__ import annotations

import argparse
import shutil
import statistics

from bench.push_profile import phases, profile
from bench.push_serving import WORKERS, Run, database, hot_updates, lineup, measure, service_env
from bench.support.otlp_receiver import Receiver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default="on",
        help="PostgreSQL's synchronous_commit for both servers ('off': no wait for the disk)",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), default="sync")
    parser.add_argument(
        "--tracing", action="store_true", help="also the consumer with tracing on (OTLP/HTTP)"
    )
    parser.add_argument(
        "--one-commit",
        action="store_true",
        help="also the consumer with a one-commit handler, and its floor route",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the push path instead")
    parser.add_argument(
        "--phases", action="store_true", help="thread CPU per phase of a push, in process"
    )
    args = parser.parse_args()
    with database() as conninfo:
        if args.profile:
            profile(conninfo)
            return
        if args.phases:
            phases(conninfo)
            return
        env = service_env(conninfo, args.synchronous_commit)
        with Receiver(keep=False).running() as receiver:
            servers = lineup(env, receiver.url if args.tracing else "", args.one_commit)
            results: dict[str, list[Run]] = {name: [] for name in servers}
            for run in range(args.repeat):
                for name, (app, app_env) in servers.items():
                    results[name].append(measure(app, app_env, args, run, name))
                    last = results[name][-1]
                    cpu = f"CPU/request: app {last.app_cpu_ms:.2f} ms, db {last.db_cpu_ms:.2f} ms"
                    print(f"  run {run + 1} {name:<8} {last.result}  {cpu}", flush=True)
            exported = receiver.count
        hot = hot_updates(conninfo)
    report(results, args)
    if args.one_commit:
        report_one_commit(results)
    if args.tracing:
        report_tracing(results, exported)
    print(f"  HOT updates (of all): {hot}")
    print(cpu_line(results))


def report_one_commit(results: dict[str, list[Run]]) -> None:
    """The one-commit push against the one-insert floor and the two-commit push, same run."""
    rps = {name: median_of(runs)[0] for name, runs in results.items()}
    print(
        f"  ratio 1-commit/floor {rps['1-commit'] / rps['floor']:.2f}x (target >= 0.90); "
        f"1c-floor/floor {rps['1c-floor'] / rps['floor']:.2f}x (its ceiling); "
        f"1-commit/consumer {rps['1-commit'] / rps['consumer']:.2f}x"
    )


def report_tracing(results: dict[str, list[Run]], exported: int) -> None:
    """Tracing on against off, in the same run."""
    traced, plain = median_of(results["traced"]), median_of(results["consumer"])
    ratio = traced[0] / plain[0]
    print(
        f"  ratio traced/consumer {ratio:.2f}x (target >= 0.90); app CPU/request traced "
        f"{traced[4]:.2f} ms, untraced {plain[4]:.2f} ms; {exported} spans received"
    )


def report(results: dict[str, list[Run]], args: argparse.Namespace) -> None:
    generator = "wrk (Lua script)" if shutil.which("wrk") else "python keep-alive load generator"
    print(f"\n/push on PostgreSQL (synchronous_commit={args.synchronous_commit}), gunicorn -w 2 "
          f"-k {WORKERS[args.worker]}, {args.connections} connections, {args.seconds:g} s x "
          f"{args.repeat}, {generator}; medians:")  # fmt: skip
    medians = {name: median_of(runs) for name, runs in results.items()}
    for name, (rps, p50, p99, errors, app_cpu, db_cpu) in medians.items():
        cpu = f"CPU/request: app {app_cpu:.2f} ms, db {db_cpu:.2f} ms"
        print(f"  {name:<8} {rps:8.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
              f"non-2xx {errors:.0f}  {cpu}")  # fmt: skip
    ratio = medians["consumer"][0] / medians["floor"][0]
    p99 = medians["consumer"][2]
    ceiling = medians["2-writes"][0] / medians["floor"][0]
    print(f"  ratio consumer/floor {ratio:.2f}x (target >= 0.60); consumer p99 {p99:.1f} ms "
          f"(target < 25)")  # fmt: skip
    print(f"  ratio 2-writes/floor {ceiling:.2f}x (the ceiling of any claim-then-finish design); "
          f"consumer/2-writes {ratio / ceiling:.2f}x (target >= 0.90)")  # fmt: skip
    unframed = medians["consumer"][0] / medians["2w-wsgi"][0]
    print(f"  ratio consumer/2w-wsgi {unframed:.2f}x (the two writes answered before Flask, as "
          "the consumer answers /push)")  # fmt: skip


def cpu_line(results: dict[str, list[Run]]) -> str:
    """The bench's last line: CPU per push (gunicorn workers + the database's backends) beside
    the two-writes route's, same run, medians of repeats; steadier than rates on a shared
    machine. ``n/a`` where a reading is zero: /proc did not show those processes' CPU."""
    (worker, db), floor = cpu_us(results["consumer"]), cpu_us(results["2-writes"])
    if min(worker, db, *floor) <= 0:
        return "push cpu: consumer n/a us/push (worker n/a, db n/a) vs two-writes n/a us: n/a x"
    total = worker + db
    return (f"push cpu: consumer {total:.1f} us/push (worker {worker:.1f}, db {db:.1f}) "
            f"vs two-writes {sum(floor):.1f} us: {total / sum(floor):.2f} x")  # fmt: skip


def cpu_us(runs: list[Run]) -> tuple[float, float]:
    """Median worker and database CPU per request, in microseconds."""
    worker = statistics.median(run.app_cpu_ms for run in runs)
    return worker * 1000, statistics.median(run.db_cpu_ms for run in runs) * 1000


def median_of(runs: list[Run]) -> tuple[float, ...]:
    return (
        statistics.median(r.result.rps for r in runs),
        statistics.median(r.result.p50_ms for r in runs),
        statistics.median(r.result.p99_ms for r in runs),
        statistics.median(r.result.errors for r in runs),
        statistics.median(r.app_cpu_ms for r in runs),
        statistics.median(r.db_cpu_ms for r in runs),
    )


if __name__ == "__main__":
    main()
