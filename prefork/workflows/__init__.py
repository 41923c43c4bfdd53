"""Workflows: chains, groups and batches of jobs whose callbacks run exactly once.

model.py says what a workflow is (its kinds, states and policies); spec.py is what
an application writes (prefork.job, prefork.chain, prefork.group); plan.py turns
that into the rows to insert; advance.py is the bookkeeping that every end of a
member runs in the transaction of that end; api.py enqueues on the application's
connection. Each backend's SQL is in the store (store/<backend>/workflow*.py).
"""
