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

CREATE TABLE idem_evict_horizon (
	one		boolean PRIMARY KEY DEFAULT true CHECK (one),
	expires_lo	timestamptz NOT NULL,
	created_lo	timestamptz NOT NULL
);
INSERT INTO idem_evict_horizon VALUES (true, '-infinity', '-infinity');

-- Lowers the horizon to a past-dated record; the lock first, so that it
-- waits for an eviction batch that is moving it (and then sees its value).
-- Once lowered, the horizon stays locked by this transaction until it
-- ends: what it was lowered to is remembered for the transaction (a local
-- setting, undone with a rolled back savepoint as the update is), and a
-- record at or above it costs no statement (a bulk load of past-dated
-- records: about 12 us a record instead of 95).
CREATE FUNCTION idem_evict_horizon_lower()
RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	v_lo text := current_setting('idem.evict_horizon_lowered', true);
BEGIN
	IF v_lo <> '' AND NEW.created_at >=
	    to_timestamp(split_part(v_lo, ' ', 1)::float8) AND
	    (NEW.state <> 'completed' OR NEW.expires_at >=
	    to_timestamp(split_part(v_lo, ' ', 2)::float8)) THEN
		RETURN NULL;
	END IF;
	PERFORM 1 FROM idem_evict_horizon FOR UPDATE;
	UPDATE idem_evict_horizon SET
	    created_lo = least(created_lo, NEW.created_at - interval '1 day'),
	    expires_lo = CASE WHEN NEW.state = 'completed' THEN
	      least(expires_lo, NEW.expires_at - interval '1 day')
	      ELSE expires_lo END
	  WHERE created_lo > NEW.created_at OR
	    (NEW.state = 'completed' AND expires_lo > NEW.expires_at);
	PERFORM set_config('idem.evict_horizon_lowered',
	    coalesce((SELECT extract(epoch FROM h.created_lo) || ' ' ||
	      extract(epoch FROM h.expires_lo) FROM idem_evict_horizon h), ''),
	    true);
	RETURN NULL;
END
$$;

-- The condition costs the library's writes nothing more: they write
-- created_at = now() and an expiry in the future.
CREATE TRIGGER idem_evict_horizon_lower
	AFTER INSERT OR UPDATE OF created_at, expires_at, state
	ON idempotency_keys FOR EACH ROW
	WHEN (NEW.created_at < now() OR (NEW.state = 'completed' AND
	    NEW.expires_at <= clock_timestamp()))
	EXECUTE FUNCTION idem_evict_horizon_lower();

-- idem_evict_batch: as in 010, from the horizon.  Candidates are taken
-- without a lock (the expired records idem_free() lets go from expires_lo,
-- and those in progress below it, oldest expiry first), then locked with
-- SKIP LOCKED as before: a candidate that could not be locked is one the
-- horizon must not pass.  ((k.expires_at < lo) IS TRUE keeps the planner
-- on the in-progress partial index instead of a range of dead entries.)
CREATE OR REPLACE FUNCTION idem_evict_batch(p_limit bigint,
    OUT evicted bigint, OUT remembered bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_exp	timestamptz;
	v_cre	timestamptz;
	v_next	timestamptz;
BEGIN
	SELECT h.expires_lo, h.created_lo INTO v_exp, v_cre
	  FROM idem_evict_horizon h FOR UPDATE;
	v_exp := coalesce(v_exp, '-infinity');	-- the row deleted by hand
	v_cre := coalesce(v_cre, '-infinity');
	WITH cand AS MATERIALIZED (
		SELECT c.tid, c.id, c.state, c.expires_at FROM (
		    (SELECT k.ctid AS tid, k.id, k.state, k.expires_at
		      FROM idempotency_keys k
		      WHERE k.expires_at >= v_exp AND k.expires_at <= now()
		        AND idem_free(k)
		      ORDER BY k.expires_at LIMIT p_limit)
		    UNION ALL
		    (SELECT k.ctid, k.id, k.state, k.expires_at
		      FROM idempotency_keys k
		      WHERE k.state = 'in_progress' AND
		        (k.expires_at < v_exp) IS TRUE AND idem_free(k))) c
		  ORDER BY c.expires_at LIMIT p_limit),
	gone AS (
		DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
		    SELECT k.ctid FROM idempotency_keys k
		      WHERE k.ctid = ANY (ARRAY(SELECT tid FROM cand))
		        AND k.expires_at <= now() AND idem_free(k)
		      FOR UPDATE SKIP LOCKED))
		  RETURNING id, api_key_id, key, request_fingerprint, state,
		    expires_at, remember_ms),
	kept AS (
		INSERT INTO idem_remembered (key_digest, request_digest,
		    expired_at, forget_at)
		  SELECT idem_key_digest64(a.secret_hash, g.key),
		    idem_digest64(g.request_fingerprint), g.expires_at,
		    idem_forget_at(g.expires_at, g.remember_ms)
		  FROM gone g JOIN api_keys a ON a.id = g.api_key_id
		  WHERE g.state = 'completed' AND g.remember_ms IS NOT NULL
		    AND idem_forget_at(g.expires_at, g.remember_ms) > now()
		  RETURNING 1)
	SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM kept),
	    coalesce(
	      (SELECT min(c.expires_at) FROM cand c WHERE c.state =
	        'completed' AND c.id NOT IN (SELECT g.id FROM gone g)),
	      (SELECT max(c.expires_at) FROM cand c WHERE c.state =
	        'completed'), v_exp)
	  INTO evicted, remembered, v_next;
	IF evicted = 0 AND v_next = v_exp THEN
		RETURN;		-- nothing moved: no write
	END IF;
	-- A statement of its own: its snapshot no longer sees what was
	-- deleted above.  Not past the start of a transaction still running:
	-- the library's records are created at now(), their transaction's
	-- start, and are not visible here until it commits (the sessions of
	-- other roles show no start to a role without pg_read_all_stats).
	SELECT least(coalesce(min(k.created_at), v_cre),
	    (SELECT min(a.xact_start) FROM pg_stat_activity a
	      WHERE a.backend_type = 'client backend')) INTO v_cre
	  FROM (SELECT k.created_at FROM idempotency_keys k
	    WHERE k.created_at >= v_cre ORDER BY k.created_at LIMIT 1) k;
	UPDATE idem_evict_horizon SET expires_lo = v_next, created_lo = v_cre;
END
$$;

-- idem_store_gauges: as in 006, the same figures from the same rows, with
-- the scans from the horizon: the oldest-live scan from created_lo, the
-- lag scan from expires_lo (and the records in progress below it, on
-- their partial index).
CREATE OR REPLACE FUNCTION idem_store_gauges(
    OUT oldest_live_age double precision,
    OUT eviction_lag double precision, OUT in_progress bigint,
    OUT unfinished bigint)
LANGUAGE sql STABLE AS $$
	SELECT
	  coalesce((SELECT extract(epoch FROM now() - min(o.created_at)
	      FILTER (WHERE o.expires_at > now() OR o.n = 1000))
	    FROM (SELECT k.created_at, k.expires_at,
	        row_number() OVER (ORDER BY k.created_at) AS n
	      FROM idempotency_keys k
	      WHERE k.created_at >= coalesce((SELECT h.created_lo
	        FROM idem_evict_horizon h), '-infinity')
	      ORDER BY k.created_at LIMIT 1000) o),
	    0)::float8,
	  coalesce((SELECT extract(epoch FROM now() - min(e.expires_at))
	    FROM ((SELECT k.expires_at FROM idempotency_keys k
	        WHERE k.expires_at >= coalesce((SELECT h.expires_lo
	          FROM idem_evict_horizon h), '-infinity')
	          AND k.expires_at <= now() AND idem_free(k)
	        ORDER BY k.expires_at LIMIT 1)
	      UNION ALL
	      (SELECT min(k.expires_at) FROM idempotency_keys k
	        WHERE k.state = 'in_progress' AND (k.expires_at <
	          (SELECT h.expires_lo FROM idem_evict_horizon h)) IS NOT FALSE
	          AND idem_free(k))) e), 0)::float8,
	  (SELECT count(*) FROM idempotency_keys k
	    WHERE k.state = 'in_progress'),
	  (SELECT count(*) FROM idempotency_keys k
	    WHERE k.state = 'in_progress' AND k.recovery_point <> 'started'
	    AND k.expires_at <= now())
$$;
