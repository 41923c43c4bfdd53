"""Handlers for tests/worker/test_worker_exits.py: handlers that end their process, or try
to, instead of returning or raising an Exception."""
import os
import sys

import prefork


@prefork.handler("exits.sys_exit")
def sys_exit(job):
    sys.exit(3)


@prefork.handler("exits.system_exit")
def system_exit(job):
    raise SystemExit


@prefork.handler("exits.keyboard_interrupt")
def keyboard_interrupt(job):
    raise KeyboardInterrupt


@prefork.handler("exits.generator_exit")
def generator_exit(job):
    raise GeneratorExit


@prefork.handler("exits.os_exit")
def os_exit(job):
    """Ends the worker at once with payload['code'], as a library's os._exit() would."""
    os._exit(job.payload["code"])
