"""An exactly-once event consumer behind Pub/Sub push.

Scheduler ticks, storage notifications and deploy hooks arrive at ``POST /push``; each event takes
effect once however often it is delivered. Start with ``consumer.app.create_app``.
"""
