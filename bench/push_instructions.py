"""Pushes in process, for counting a push's instructions under callgrind (not a test).

CPU time on a shared machine varies with everything else it runs; instruction counts do not.
Run it twice under callgrind, with ``--pushes 0`` and ``--pushes N``: the difference of the two
totals, divided by N, is the worker's instructions per push (interpreter start, imports, the
database's set-up and the warm-up cancel out). Each push is a new deploy event through Flask's
test client (the front door answers ``/push`` before Flask, as when served), on a fresh migrated
database; the inbox's HOT updates are printed at the end (the finish's, mostly).

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=p0.cg \
        python -m bench.push_instructions --pushes 0
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=p2000.cg \
        python -m bench.push_instructions --pushes 2000
"""

from __future__ import annotations

import argparse
import time

import psycopg

from bench.push_load import deploy_body
from bench.push_serving import consumer_app, database

HOT = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'inbox'"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=2000)
    parser.add_argument("--warm", type=int, default=200, help="pushes before the counted ones")
    args = parser.parse_args()
    with database() as conninfo:
        client = consumer_app(conninfo).test_client()
        bodies = [deploy_body(f"push-{n}") for n in range(args.warm + args.pushes)]
        for body in bodies:
            answer = client.post("/push", data=body, content_type="application/json")
            assert answer.status_code == 200, answer.get_data()
        time.sleep(2)  # an idle backend reports its counts within a second
        with psycopg.connect(conninfo, autocommit=True) as connection:
            row = connection.execute(HOT).fetchone()
    print(f"{args.warm} + {args.pushes} pushes; inbox updates {row}: (all, HOT)")


if __name__ == "__main__":
    main()
