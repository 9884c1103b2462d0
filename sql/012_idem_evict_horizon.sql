-- 012_idem_evict_horizon.sql: the gauges and eviction kept off the dead
-- index entries a large eviction leaves.
--
-- Eviction deletes the oldest rows, whose entries sit at the head of the
-- expires_at and created_at indexes; until VACUUM removes them, every scan
-- from the head steps over them: a scrape right after 1.1 M evictions took
-- 29.6 ms, and each batch of a long eviction stepped over all the batches
-- before it (tests/bench/store-scale).  Eviction now writes where the live
-- rows begin, and those scans start there:
--
--  expires_lo  no completed record expires before it.  Eviction raises it
--              to the highest expiry it deleted, or to the lowest one it
--              had to leave (a record locked by a request that may roll
--              back); the records in progress below it are looked for on
--              their own partial indexes, which hold only what is in
--              progress;
--  created_lo  no record was created before it: after each batch, the
--              oldest created_at left, looked for from the last value.
--
-- A record written with a created_at or an expiry already past (an
-- operator's or a test's INSERT or UPDATE; the library writes now() and
-- now() + a TTL of an hour or more) lowers them in the same transaction
-- (the trigger below; eviction waits for such a transaction to end), so
-- the gauges stay what they were: the same rows are found, from a later
-- start.  It lowers them a day further than
-- needed, so that a load of past-dated records in descending order writes
-- the row once a day of their span, not once per record; the next batch of
-- eviction sets them exactly again.  Not covered: a transaction that stays
-- open longer than the records it writes live (an hour at least; its
-- records are not visible to the eviction that moves expires_lo past
-- them).
--
-- The functions it defined, as they are now: sql/functions/
-- (idem_evict_horizon_lower.sql, idem_evict_batch.sql,
-- idem_store_gauges.sql), applied by idemctl migrate after the migrations.

CREATE TABLE idem_evict_horizon (
	one		boolean PRIMARY KEY DEFAULT true CHECK (one),
	expires_lo	timestamptz NOT NULL,
	created_lo	timestamptz NOT NULL
);
INSERT INTO idem_evict_horizon VALUES (true, '-infinity', '-infinity');

-- The trigger's function, a placeholder that the trigger can name: its
-- body is sql/functions/idem_evict_horizon_lower.sql, which idemctl
-- migrate applies in the same transaction, after the migrations.
CREATE FUNCTION idem_evict_horizon_lower()
RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;

-- The condition costs the library's writes nothing more: they write
-- created_at = now() and an expiry in the future.
CREATE TRIGGER idem_evict_horizon_lower
	AFTER INSERT OR UPDATE OF created_at, expires_at, state
	ON idempotency_keys FOR EACH ROW
	WHEN (NEW.created_at < now() OR (NEW.state = 'completed' AND
	    NEW.expires_at <= clock_timestamp()))
	EXECUTE FUNCTION idem_evict_horizon_lower();
