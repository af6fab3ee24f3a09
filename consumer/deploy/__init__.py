"""Deploy hooks and cache warming (docs/deploy-hooks.md).

A deploy arrives as a Pub/Sub message (``event=deploy``) or as a signed ``POST /hooks/deploy``;
both become one ``DeployEvent`` keyed by service + release and go through the same inbox, so a
release warms its caches once. Plugins add warmers with ``registry.warmer(...)``.
"""
