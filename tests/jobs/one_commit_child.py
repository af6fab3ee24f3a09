"""A process that dies holding a one-commit delivery's transaction open: it dispatches one jobs
topic message whose handler enqueues the job, prints ``written`` and sleeps until the test
kills it with SIGKILL.

    python -m tests.jobs.one_commit_child DATABASE_URL MESSAGE_ID
"""

from __future__ import annotations

import sys
import time
from typing import Any

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from tests.jobs.test_topic import job_message


def main(url: str, message_id: str) -> None:
    settings = Settings(database_url=url, local_mode=True, plugins=("tests.jobs.kinds_plugin",))
    registry = build_registry(settings)
    enqueue = registry.routes.get("job")
    assert enqueue is not None

    def enqueue_then_hang(context: HandlerContext, event: Any) -> Any:
        result = enqueue(context, event)
        print("written", flush=True)
        time.sleep(120)
        return result

    registry.route("job", enqueue_then_hang, replace=True, local_effects=True)
    engine = make_engine(url)
    Dispatcher(settings, engine, registry).dispatch(job_message(message_id))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
