#!/usr/bin/env python3
"""PgQueuer's side of `make bench-peers`: drain N no-op jobs, print one JSON line.

Run by scripts/bench-peers.sh with the venv's python (pgqueuer==1.6.0, asyncpg):

    python pgqueuer_drain.py DATABASE_URL [--jobs 50000] [--procs 2] [--batch 100]

DATABASE_URL must name an empty database (the caller drops and recreates it). Steps:
install PgQueuer's schema, enqueue the jobs in bulk, ANALYZE, start PROCS worker
processes (each one PgQueuer QueueManager with a no-op entrypoint, batch size BATCH,
drain mode), release them together and time until the queue table is empty.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time
from importlib.metadata import version

ENQUEUE_CHUNK = 10_000
POLL_S = 0.02
SETUP_TIMEOUT_S = 60


async def prepare(url: str, jobs: int) -> float:
    """Schema, bulk enqueue, ANALYZE; returns the enqueue time in seconds."""
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(conn))
        await queries.install()
        start = time.perf_counter()
        for offset in range(0, jobs, ENQUEUE_CHUNK):
            n = min(ENQUEUE_CHUNK, jobs - offset)
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
        enqueue_s = time.perf_counter() - start
        await conn.execute("ANALYZE")
        return enqueue_s
    finally:
        await conn.close()


def worker(url: str, batch: int, start) -> None:
    """One worker process: a PgQueuer consumer that drains the queue, then exits."""
    from pgqueuer import QueueManager
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    async def run() -> None:
        import asyncpg

        conn = await asyncpg.connect(url)
        qm = QueueManager(Queries(AsyncpgDriver(conn)))

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            return None

        # Connected and registered: wait for the others and the driver's clock.
        await asyncio.get_running_loop().run_in_executor(None, start.wait, SETUP_TIMEOUT_S)
        await qm.run(batch_size=batch, mode=QueueExecutionMode.drain)
        await conn.close()

    asyncio.run(run())


def wait_until_empty(url: str, timeout: float) -> float:
    """Polls the queue table on its own connection; returns the time it was first empty."""
    import asyncpg

    async def poll() -> float:
        conn = await asyncpg.connect(url)
        try:
            # Keep the probe on the primary key whatever the planner thinks of the table.
            await conn.execute("SET enable_seqscan = off")
            deadline = time.perf_counter() + timeout
            while time.perf_counter() < deadline:
                if await conn.fetchval("SELECT NOT EXISTS (SELECT 1 FROM pgqueuer)"):
                    return time.perf_counter()
                await asyncio.sleep(POLL_S)
            raise TimeoutError(f"pgqueuer: queue not empty after {timeout:.0f} s")
        finally:
            await conn.close()

    return asyncio.run(poll())


def count_successful(url: str) -> int:
    import asyncpg

    async def count() -> int:
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")
        finally:
            await conn.close()

    return asyncio.run(count())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", help="postgresql:// URL of an empty database")
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("PEER_DRAIN_TIMEOUT_S", "900")))
    args = ap.parse_args()

    enqueue_s = asyncio.run(prepare(args.url, args.jobs))

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(args.procs + 1)
    procs = [ctx.Process(target=worker, args=(args.url, args.batch, start)) for _ in range(args.procs)]
    for p in procs:
        p.start()
    try:
        start.wait(SETUP_TIMEOUT_S)
        t0 = time.perf_counter()
        t1 = wait_until_empty(args.url, args.timeout)
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():  # our own child, by its handle
                p.terminate()
                p.join(10)
    drain_s = t1 - t0
    completed = count_successful(args.url)
    print(json.dumps({
        "who": "pgqueuer",
        "version": version("pgqueuer"),
        "jobs": args.jobs,
        "procs": args.procs,
        "batch_size": args.batch,
        "enqueue_jobs_per_s": round(args.jobs / enqueue_s),
        "drain_seconds": round(drain_s, 2),
        "jobs_per_s": round(args.jobs / drain_s),
        "completed": completed,
        "worker_exit_codes": [p.exitcode for p in procs],
    }), flush=True)
    return 0 if completed == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
