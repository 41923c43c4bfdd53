"""The queue on a 3-node MariaDB Galera cluster with writers on every node
(tests/galera_cluster.py starts the cluster once for the module, about 13 s).

- the store contract's model check (tests/store_model.py) with its stores on
  two different nodes;
- the chaos ledger run (tests/galera_soak.py) with a supervisor on each node:
  no fault (no re-run, no worker crash, every job done, exactly one effect per
  ledger job), then one node killed (SIGKILL) mid-run and restarted (nothing
  lost or stuck, no dead job with a committed effect, re-runs only of jobs the
  kill cut).

Reduced size here (the file takes 2-3 minutes); PREFORK_SOAK_FULL=1 runs the
ledger runs at full size (2,500 ledger + 2,500 plain jobs each).
"""
import os
from contextlib import ExitStack

import pytest
from galera_cluster import galera_cluster  # noqa: F401  (pytest fixture)
from galera_soak import MultiWriterSettings, run_multi_writer
from store_model import run
from store_model_state import Tally
from test_chaos import assert_report

from prefork import config as config_module
from prefork.store import open_store

FULL = os.environ.get("PREFORK_SOAK_FULL") == "1"
SEQUENCES, STEPS = 30, 40


@pytest.fixture
def cluster(galera_cluster):  # noqa: F811  (the imported fixture)
    """The module's cluster with every node Synced (a test may have killed one)."""
    for index, node in enumerate(galera_cluster.nodes):
        if not node.running:
            galera_cluster.restart(index)
        galera_cluster.wait_synced(index)
    return galera_cluster


def _settings(**changes):
    return MultiWriterSettings.full(**changes) if FULL else MultiWriterSettings(**changes)


def test_store_contract_holds_with_stores_on_different_nodes(cluster):
    config_on = [config_module.load({"dsn": cluster.dsn(index)}, environ={})
                 for index in (0, 1)]
    with ExitStack() as stack:
        stores = []
        for config in config_on:
            stores.append(open_store(config))
            stack.callback(stores[-1].close)
        stores[0].migrate()
        tally = Tally()
        run(stores, SEQUENCES, STEPS, tally)
    assert tally["claimed"] and tally["complete (one) ok"], tally


def test_writers_on_every_node_run_each_job_once(cluster, tmp_path):
    report = run_multi_writer(cluster, _settings(), tmp_path)
    assert report.figures["worker_fatal"] == 0, report.text()
    assert_report(report)


def test_a_node_killed_mid_run_loses_nothing(cluster, tmp_path):
    report = run_multi_writer(cluster, _settings(kill_node=1), tmp_path)
    assert cluster.cluster_size() == 3, report.text()
    assert_report(report)
