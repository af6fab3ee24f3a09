"""Database access: engine set-up, the schema, and migrations."""
