"""Concurrency and rate limits per job type (and per concurrency key): the rules
(rules.py) and the limited claim's plan (planner.py), which every dialect's
store carries out with its own statements."""
