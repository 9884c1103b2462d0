-- 006_idem_retention.sql: the retention window, visible and cheap to watch.
--
-- A client is told how long its key is remembered (Idempotency-Key-Expires):
-- idem_claim(), idem_complete() and idem_finish() return the record's
-- expires_at (Unix seconds, rounded down, so never later than the row's).
-- The store's gauges come from index-backed queries whose cost does not
-- grow with the table (idem_store_gauges), for /metrics and idemctl stats.
--
-- The functions it defined, as they are now: sql/functions/
-- (idem_claim.sql, idem_complete.sql, idem_finish.sql,
-- idem_store_gauges.sql), applied by idemctl migrate after the migrations.

-- The oldest live key is found from the oldest row forwards, in the index
-- alone (expires_at is in it); created_at only grows, so the index is
-- appended to at its right edge.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys
	(created_at, expires_at);

-- Eviction deletes from the head of the expires_at and created_at indexes,
-- and every index scan from there (the store gauges, the next batch) steps
-- over the dead entries until VACUUM removes them: 300,000 of them cost a
-- scrape 12-16 ms, after VACUUM 3 ms (tests/bench/store-scale).  Vacuum
-- once 1 % of the rows are dead instead of 20 %, so the head stays short.
ALTER TABLE idempotency_keys SET (autovacuum_vacuum_scale_factor = 0.01);
