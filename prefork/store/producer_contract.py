"""The version of the job table's contract with producers in other languages
(docs/reference/job-table-contract.md: the statements a PHP, Go or Node program may
run to enqueue, and the wake-up it may send), and the schema it was last checked
against.

A release that changes what that page promises (a statement, a column's rule, the
wake-up's datagram or registry columns) raises CONTRACT_VERSION and says so in the
changelog. A new migration fails tests/store/test_producer_contract.py until
someone has checked it against the page and recorded its number in CHECKED_SCHEMA:
a new column a producer must set is a new contract version, one with a default
that a producer may leave alone is not.
"""

CONTRACT_VERSION = 1
# The oldest schema version the contract's statements run on (0006 added the
# concurrency_key and limited columns the INSERT names), on both backends.
FIRST_SCHEMA = 6
# The newest migration of each backend the contract was checked against.
CHECKED_SCHEMA = {"mysql": 11, "sqlite": 11}
