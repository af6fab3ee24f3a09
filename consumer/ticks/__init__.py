"""Tick tasks, one feature: their route policy (``policy``: coalescing, pause, overlap, the
completed slot), their catch-up runs (``catch_up``) and their own answers (``answers``), the
operator's pauses (``pauses``) and controls (``controls``: pause, resume, run now, the task list
that ``consumer tasks`` and the dashboard show). The pipeline asks the tick route's policy at each
step of a delivery and knows no tick."""
