"""Background workers that drain the jobs table."""
