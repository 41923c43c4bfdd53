"""The worker: the claim-run-complete loop (loop.py), run in each child of the supervisor or
alone by `prefork-queue work`, and command jobs (commands.py, command_process.py).
"""
