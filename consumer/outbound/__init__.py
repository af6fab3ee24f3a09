"""Outbound HTTP that ends at a wall-clock deadline, and the budget it may spend: the rooms the
cache warmer and HTTP targets share (neither feature owns the other's plumbing)."""
