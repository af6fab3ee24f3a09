"""Triggers as code: Terraform for Google Cloud, the CI deploy step, and the local stack."""
