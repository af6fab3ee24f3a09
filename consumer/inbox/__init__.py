"""The inbox: one row per idempotency key, so each event's handler runs once however often it is
delivered; and ``tick_progress``, each tick task's latest completed slot."""
