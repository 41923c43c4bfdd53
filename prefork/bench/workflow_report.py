"""The workflow scenarios' section of the bench's report (--workflows): what each
measured, against what, and the targets issue 30 sets."""
import textwrap
from typing import Any, Dict, List, Optional

GROUP_TARGETS = ">= 0.8x, callback within 50 ms (p50)"
CHAIN_TARGET = "next step within 20 ms (p50)"
FOOTER_WIDTH = 100


def workflow_lines(workflows: Optional[Dict[str, Any]]) -> List[str]:
    """The section (after the table), wrapped; none without --workflows."""
    if workflows is None:
        return []
    group, chain = workflows["group"], workflows["chain"]
    lines = [_group_line(group), _chain_line(chain)]
    return ([f"workflows, {group['workers']} workers, each against its reference in the "
             "same run:"]
            + [textwrap.fill(line, FOOTER_WIDTH, initial_indent="- ", subsequent_indent="  ")
               for line in lines] + [""])


def _group_line(group: Dict[str, Any]) -> str:
    delays = group["callback_delays_ms"]
    return (f"group of {group['members']:,} no-op members and a callback, {group['groups']} "
            f"groups: members {group['jobs_per_s']:,.0f} jobs/s = {group['ratio']:.2f}x "
            f"{group['members']:,} plain jobs ({group['plain_jobs_per_s']:,.0f} jobs/s)"
            + _statements(group["stmts_per_job"], group["plain_stmts_per_job"])
            + f"; the callback started {group['callback_delay_p50_ms']:.1f} ms (p50; "
            f"{min(delays):.1f} to {max(delays):.1f}) after its last member was written done. "
            f"Targets {GROUP_TARGETS}.")


def _chain_line(chain: Dict[str, Any]) -> str:
    text = f"chain of {chain['steps']:,} steps: {chain['steps_per_s']:,.1f} steps/s"
    if chain["step_delay_p50_ms"] is not None:
        text += (f"; a step started {chain['step_delay_p50_ms']:.1f} ms (p50; p99 "
                 f"{chain['step_delay_p99_ms']:.1f} ms) after the step before it was "
                 "written done")
    if chain["stmts_per_step"] is not None:
        text += f"; {chain['stmts_per_step']:.2f} stmts/step"
    return text + f". Target {CHAIN_TARGET}."


def _statements(ours: Optional[float], plain: Optional[float]) -> str:
    """"; 0.45 stmts/job (0.33 plain)", or nothing on SQLite."""
    if ours is None or plain is None:
        return ""
    return f"; {ours:.2f} stmts/job ({plain:.2f} plain)"
