-- Herald 0024: open circuits recorded for the workers that start.
--
-- Each worker's circuit breaker opens after its own run of provider-level failures, and each of
-- those failures spends a job's attempt. A worker that starts while a provider is down (a
-- restart, or a replica added because the backlog grows during the outage) began with its
-- circuit closed and spent up to the failure threshold of attempts again, mostly on the jobs
-- due first: those the other workers had already failed and handed back. A worker whose
-- circuit opens on its own failures now records until when here; a worker that starts reads
-- this table before its first claim and opens a closed circuit for the time left
-- (`CircuitExchange`, Sources/Delivery/CircuitExchange.swift). A circuit that closes after a
-- good probe ends the row's period, so a worker that adopted it probes at once. Running workers
-- never adopt: each counts its own failures (docs/faults.md says why).
CREATE TABLE IF NOT EXISTS herald.provider_circuits (
    provider text PRIMARY KEY,                -- the provider kind: apns, fcm, expo, webpush
    open_until timestamptz NOT NULL,          -- open while now() < open_until
    worker text NOT NULL,                     -- the worker that last opened or closed it
    updated_at timestamptz NOT NULL DEFAULT now()
);
