"""Availability under 16 slow clients: ``/healthz`` and ``/push`` probed once a second while
half the attackers dribble headers and half dribble bodies (a byte every 4.5 s, reconnecting when
cut off). The floor is the same probes on the same server with no attack, in the same run.

    python -m bench.slow_clients [--kind asyncio|sync|both] [--seconds 120] [--database DSN]

Bounded: the attack lasts ``--seconds``; the server and attackers stop at the end.
"""

from __future__ import annotations

import argparse
import json

from bench.servers import KINDS, database, server
from bench.support.slow_clients import SlowClients, measure, probe_healthz, probe_push
from consumer.wire.envelopes_out import tick_body

FLOOR_SECONDS = 10


def run(kind: str, seconds: float, admin_dsn: str | None) -> None:
    with database(admin_dsn) as url, server(kind, url) as (base, port):
        body = json.dumps(tick_body("cleanup")).encode()
        probes = {"healthz": probe_healthz(base), "push": probe_push(base, body, 200)}
        floor = measure(probes, FLOOR_SECONDS)
        clients = SlowClients("127.0.0.1", port, count=16, interval=4.5).start()
        try:
            attacked = measure(probes, seconds)
        finally:
            clients.stop()
    for name in probes:
        print(
            f"{kind:8} {name:8} attacked {attacked.answered[name]}/{attacked.asked[name]} "
            f"= {attacked.ratio(name):.1%}  floor (no attack) {floor.ratio(name):.1%}  "
            f"ratio {attacked.ratio(name) / max(floor.ratio(name), 1e-9):.3f}"
        )
    print(f"{kind:8} attacker connections: {clients.connections}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=(*KINDS, "both"), default="both")
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--database", default=None, help="PostgreSQL admin DSN (default SQLite)")
    args = parser.parse_args()
    for kind in KINDS if args.kind == "both" else (args.kind,):
        run(kind, args.seconds, args.database)


if __name__ == "__main__":
    main()
