"""When each job's transaction committed, by the server's clock.

The producer's own reading (when its enqueue call returned) comes after the
commit by however long the producer waits for a CPU, and on a busy machine the
worker, woken by the NOTIFY, often runs first: commit -> handled came out
negative for a tenth of the jobs. So the harness adds one trigger to the
library's job table, a *deferred* constraint trigger, which PostgreSQL fires at
COMMIT (after the statement, just before the commit record): it writes the job's
id and ``clock_timestamp()`` to a table of its own. That is the commit instant,
on the machine's wall clock, which the worker reads too (``time.time()``). The
library's tables and triggers are otherwise untouched; the trigger adds one
small insert to each producer transaction, before its commit.
"""

from __future__ import annotations

TABLE = "fanoutsim_rq_commits"

_INSTALL = """
CREATE TABLE {table} (job_id bigint PRIMARY KEY, at double precision NOT NULL);
CREATE FUNCTION fanoutsim_rq_commit_clock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {table} (job_id, at) VALUES (NEW.id, extract(epoch FROM clock_timestamp()));
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER fanoutsim_rq_commit_clock AFTER INSERT ON {jobs}
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fanoutsim_rq_commit_clock();
"""


def install(dsn: str, jobs_table: str) -> None:
    """Add the commit clock to ``jobs_table`` (its rows have an ``id``)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(_INSTALL.format(table=TABLE, jobs=jobs_table))


def read(dsn: str) -> dict[int, float]:
    """Each committed job's id -> its commit time (seconds since the epoch, server clock)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        return {int(job_id): float(at) for job_id, at in con.execute(f"SELECT job_id, at FROM {TABLE}")}
