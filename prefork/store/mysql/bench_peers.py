"""The scratch database of the bench's peers (prefork/bench/peers.py): the Python
queues the `enqueue_one` row measures ours against keep their tables there, on
the queue's server, never in the queue's database. Its name is fixed (a name
is no bound parameter): the bench creates it for the row and drops it after."""
from .store import MySQLStore

PEERS_DATABASE = "prefork_bench_peers"
BENCH_CREATE_PEERS_DATABASE = f"CREATE DATABASE IF NOT EXISTS {PEERS_DATABASE}"
BENCH_DROP_PEERS_DATABASE = f"DROP DATABASE IF EXISTS {PEERS_DATABASE}"


def bench_peers_database(store: MySQLStore, present: bool) -> None:
    """Create (present) or drop the peers' scratch database."""
    store._rowcount(BENCH_CREATE_PEERS_DATABASE if present else BENCH_DROP_PEERS_DATABASE, ())
