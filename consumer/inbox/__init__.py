"""The inbox: one row per idempotency key, so each event's handler runs once however often it is
delivered. The tick tables are defined beside it (``schema``, which the migrations read); their
queries and store are the ticks feature's (``consumer.ticks``)."""
