"""Tick tasks, one feature: their route policy (``policy``: coalescing, pause, overlap, the
completed slot), their catch-up runs (``catch_up``) and their own answers (``answers``); the tick
tables, their statements and store (``schema``, ``queries``, ``store``); the operator's pauses
(``pauses``) and controls (``controls``: pause, resume, run now, the task list ``consumer tasks``
and the dashboard show); and a tick sent to
``POST /ticks/<task>`` read as a message (``hook``); and the Cloud Scheduler stand-in that ticks
a local server (``stand_in``). The pipeline asks the tick route's policy at
each step of a delivery and knows no tick."""
