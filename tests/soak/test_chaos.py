"""Chaos soak with a ledger (issue 4): the supervisor under SIGKILLs, SIGHUPs, a frozen
child, a database restart (scenario 1), a network partition between one of two
supervisors and the database (scenario 2: connections reset), and a stalled link
(scenario 3: nothing reset, as when a host vanishes), then an audit: every job
done exactly once in the ledger, none lost, none reserved, attempts within bounds,
no orphan or zombie, the parent's RSS bounded.

The driver is tests/chaos.py (also a script for the full-size soak on your own
database); the workflow scenario is tests/workflows_chaos.py. Here it runs at a reduced size, all three in about a minute and a
half at most; PREFORK_SOAK_FULL=1 runs the full size (20,000 jobs, minutes).
Each scenario starts its own throwaway MariaDB server (tests/throwaway_db.py):
scenario 1 stops and restarts it, which the shared server must never see.
"""
import os

import pytest
from chaos import (
    Database,
    PartitionSettings,
    SoakSettings,
    StallSettings,
    assert_report,
    run_chaos,
    run_partition,
    run_stall,
)
from throwaway_db import throwaway_mariadb  # noqa: F401  (pytest fixture)

FULL = os.environ.get("PREFORK_SOAK_FULL") == "1"


@pytest.mark.soak
def test_chaos_soak_keeps_the_ledger_exactly_once(throwaway_mariadb, tmp_path):
    server = throwaway_mariadb
    settings = SoakSettings.full() if FULL else SoakSettings()
    report = run_chaos(Database(server.dsn, server, environ={}), settings, tmp_path)
    assert report.figures["kills"] >= settings.chaos_seconds / 0.3 * 0.5, report.text()
    assert report.figures["reloads"] >= 2, report.text()
    assert_report(report)


@pytest.mark.soak
def test_chaos_soak_forked_per_job_keeps_the_ledger_exactly_once(throwaway_mariadb, tmp_path):
    """Scenario 1 with --max-items 1: children forked with a job the parent claimed."""
    server = throwaway_mariadb
    settings = SoakSettings.fork_per_job(full=FULL)
    report = run_chaos(Database(server.dsn, server, environ={}), settings, tmp_path)
    assert report.figures["kills"] >= settings.chaos_seconds / 0.3 * 0.5, report.text()
    assert report.figures["reloads"] >= 2, report.text()
    assert_report(report)


@pytest.mark.soak
def test_partitioned_supervisor_jobs_are_recovered_and_it_recovers_itself(throwaway_mariadb,
                                                                          tmp_path):
    server = throwaway_mariadb
    settings = PartitionSettings.full() if FULL else PartitionSettings()
    report = run_partition(Database(server.dsn, environ={}), settings, tmp_path)
    assert_report(report)


@pytest.mark.soak
def test_stalled_link_inside_the_completion_transaction_gives_the_job_back(throwaway_mariadb,
                                                                            tmp_path):
    server = throwaway_mariadb
    report = run_stall(Database(server.dsn, environ={}), StallSettings(), tmp_path)
    assert_report(report)


@pytest.mark.soak
def test_limits_hold_under_kills(throwaway_mariadb, tmp_path):
    """SIGKILLed children and a SIGKILLed supervisor holding limited jobs: every job
    done, no group ever over its limit, no slot left taken (tests/limits_chaos.py)."""
    from limits_chaos import LimitsSettings, run_limits
    settings = LimitsSettings.full() if FULL else LimitsSettings()
    report = run_limits(Database(throwaway_mariadb.dsn, environ={}), settings, tmp_path)
    assert report.figures["kills"] >= 5, report.text()
    assert_report(report)


@pytest.mark.soak
def test_workflow_callbacks_run_exactly_once_under_kills(throwaway_mariadb, tmp_path):
    """Groups, chains and nested ones under kills of children and of the supervisor,
    reloads and a database restart: every callback and chain step exactly once, none
    before the commits of the jobs before it, none missing, none stuck
    (tests/workflows_chaos.py)."""
    from workflows_chaos import FlowSettings, run_workflows
    server = throwaway_mariadb
    settings = FlowSettings.full() if FULL else FlowSettings()
    report = run_workflows(Database(server.dsn, server, environ={}), settings, tmp_path)
    assert report.figures["kills"] >= settings.chaos_seconds / 0.3 * 0.5, report.text()
    assert report.figures["supervisor_replaced"], report.text()
    assert_report(report)
