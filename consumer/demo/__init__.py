"""``consumer demo``: the three-pod incident reproduced on one machine, before and after.

*Before*: three pods, each with an in-process timer that selects pending jobs and sends them.
*After*: three ``consumer serve`` pods behind a round-robin balancer, fed duplicated and
redelivered ``sweep`` ticks, one pod SIGKILLed mid-sweep. A real SMTP sink counts what arrived.
"""
