"""The supervisor: the parent process that forks, watches and replaces the workers (loop.py),
its record of each child (children.py), the child's boot (child.py), the pipe protocol
between them (protocol.py), and its own database work (upkeep.py).
"""
