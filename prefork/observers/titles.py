"""Process titles an operator reads in `ps` and `top -c`. Never a DSN or a secret."""
import setproctitle


def set_title(text):
    setproctitle.setproctitle(f"prefork-queue {text}")


def master_title(queues, alive, target, done, dead, note=""):
    text = f"master [{','.join(queues)}] workers {alive}/{target} done {done} dead {dead}"
    return f"{text} {note}".rstrip()


def worker_title(slot, queues, state, job=None, busy_seconds=0.0):
    prefix = f"worker {slot} [{','.join(queues)}]"
    if job is not None:
        return f"{prefix} busy job {job.id} {job.type} {int(busy_seconds)}s"
    return f"{prefix} {state}"
