-- idem_evict_batch.sql: one batch of eviction (the caller holds the
-- fleet-wide eviction lock): up to p_limit expired records that idem_free()
-- lets go, oldest expiry first, deleted; in the same statement, the trace
-- of each completed one whose route remembers, unless its window has passed
-- already.  Returns the records deleted and the traces written.
--
-- It starts from the horizon (idem_evict_horizon, sql/012): candidates are
-- taken without a lock (the expired records idem_free() lets go from
-- expires_lo, and those in progress below it, oldest expiry first), then
-- locked with SKIP LOCKED: a candidate that could not be locked is one the
-- horizon must not pass.  ((k.expires_at < lo) IS TRUE keeps the planner on
-- the in-progress partial index instead of a range of dead entries.)
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
