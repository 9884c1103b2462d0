-- 006_idem_retention.sql: the retention window, visible and cheap to watch.
--
-- A client is told how long its key is remembered (Idempotency-Key-Expires):
-- idem_claim(), idem_complete() and idem_finish() return the record's
-- expires_at (Unix seconds, rounded down, so never later than the row's).
-- The store's gauges come from index-backed queries whose cost does not
-- grow with the table (idem_store_gauges), for /metrics and idemctl stats.

-- The oldest live key is found from the oldest row forwards, in the index
-- alone (expires_at is in it); created_at only grows, so the index is
-- appended to at its right edge.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys
	(created_at, expires_at);

-- Eviction deletes from the head of the expires_at and created_at indexes,
-- and every index scan from there (the gauges below, the next batch) steps
-- over the dead entries until VACUUM removes them: 300,000 of them cost a
-- scrape 12-16 ms, after VACUUM 3 ms (tests/bench/store-scale).  Vacuum
-- once 1 % of the rows are dead instead of 20 %, so the head stays short.
ALTER TABLE idempotency_keys SET (autovacuum_vacuum_scale_factor = 0.01);

DROP FUNCTION idem_claim(bytea, text, text, text, bytea, bigint, bigint,
    bigint, boolean, bytea);

-- idem_claim: as in 005, plus expires (the record's expires_at, for a
-- replay's Idempotency-Key-Expires).
CREATE FUNCTION idem_claim(p_secret bytea, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_lock bigint,
    p_lease_ms bigint, p_phased boolean, p_request bytea DEFAULT NULL)
RETURNS TABLE (tenant bigint, secret_hash bytea, got boolean,
    claimed boolean, inserted bigint, id bigint, request_method text,
    request_path text, request_fingerprint bytea, state text,
    response_status integer, response_headers text, response_body bytea,
    live boolean, recovery_point text, stale boolean, taken boolean,
    token uuid, expires bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
	v_free boolean;
	v_same boolean;
BEGIN
	SELECT a.id, a.secret_hash INTO tenant, secret_hash FROM api_keys a
	    WHERE a.secret_hash = p_secret AND a.revoked_at IS NULL;
	IF tenant IS NULL THEN
		RETURN NEXT;
		RETURN;
	END IF;
	FOR pass IN 1..2 LOOP
		SELECT k.id, k.request_method, k.request_path,
		    k.request_fingerprint, k.state, k.response_status,
		    k.response_headers::text, k.response_body,
		    k.expires_at > now(), k.recovery_point,
		    coalesce(k.lease_until <= now(), true), idem_free(k),
		    floor(extract(epoch FROM k.expires_at))::bigint
		  INTO id, request_method, request_path, request_fingerprint,
		    state, response_status, response_headers, response_body,
		    live, recovery_point, stale, v_free, expires
		  FROM idempotency_keys k
		  WHERE k.api_key_id = tenant AND k.key = p_key;
		v_free := coalesce(v_free, true);
		v_same := request_method = p_method AND request_path = p_path
		    AND request_fingerprint = p_fpr;
		-- A record this request may neither write nor take over:
		-- replay, 422 or 409.
		IF NOT v_free AND NOT (p_phased AND state = 'in_progress' AND
		    stale AND v_same) THEN
			RETURN NEXT;
			RETURN;
		END IF;
		EXIT WHEN pass = 2;
		got := pg_try_advisory_xact_lock(p_lock);
		IF NOT got THEN
			RETURN NEXT;
			RETURN;
		END IF;
	END LOOP;
	claimed := v_free;
	IF claimed AND p_phased THEN
		token := gen_random_uuid();
		inserted := idem_put(tenant, p_key, p_method, p_path, p_fpr,
		    p_ttl_ms, 'in_progress', NULL, NULL, NULL, p_lease_ms,
		    p_request, token);
		IF inserted IS NULL THEN
			token := NULL;
		END IF;
	ELSIF NOT claimed THEN
		-- The takeover: a new owner, fenced against the old one.
		UPDATE idempotency_keys k SET lease_token = gen_random_uuid(),
		    locked_at = now(),
		    lease_until = now() + p_lease_ms * interval '1 millisecond'
		  WHERE k.id = idem_claim.id AND k.state = 'in_progress'
		    AND coalesce(k.lease_until <= now(), true)
		  RETURNING k.lease_token INTO token;
		taken := token IS NOT NULL;
	END IF;
	RETURN NEXT;
END
$$;

DROP FUNCTION idem_complete(bigint, text, text, text, bytea, bigint,
    integer, jsonb, bytea);

-- idem_complete: as in 004, but returns the expires_at idem_put() wrote
-- (now() + the TTL: now() is the transaction's, the same in both).
CREATE FUNCTION idem_complete(p_tenant bigint, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_status integer,
    p_headers jsonb, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF idem_put(p_tenant, p_key, p_method, p_path, p_fpr, p_ttl_ms,
	    'completed', p_status, p_headers, p_body) IS NULL THEN
		RAISE EXCEPTION 'idempotency key record changed under its lock'
		    USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN floor(extract(epoch FROM now() + p_ttl_ms *
	    interval '1 millisecond'))::bigint;
END
$$;

DROP FUNCTION idem_finish(bigint, uuid, integer, jsonb, bytea, bigint);

-- idem_finish: as in 005, but returns the record's expires_at as stored
-- (extended to now() + the TTL when the request completed late).
CREATE FUNCTION idem_finish(p_id bigint, p_token uuid, p_status integer,
    p_headers jsonb, p_body bytea, p_ttl_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_expires timestamptz;
BEGIN
	UPDATE idempotency_keys SET state = 'completed',
	    response_status = p_status, response_headers = p_headers,
	    response_body = p_body, locked_at = NULL, lease_token = NULL,
	    lease_until = NULL, recovery_point = 'finished',
	    expires_at = greatest(expires_at,
	      now() + p_ttl_ms * interval '1 millisecond')
	  WHERE id = p_id AND lease_token = p_token AND state = 'in_progress'
	  RETURNING expires_at INTO v_expires;
	IF NOT FOUND THEN
		PERFORM idem_fenced_fail(p_id);
	END IF;
	RETURN floor(extract(epoch FROM v_expires))::bigint;
END
$$;

-- idem_store_gauges: the store's figures for /metrics, each from an index:
--  oldest_live_age  now() - the oldest created_at of an unexpired key,
--                   looked for among the 1000 oldest rows (an index-only
--                   scan of at most 1000 entries): expired rows not yet
--                   evicted come first, so when more than 1000 of them
--                   wait (eviction lags, and the lag gauge says so) it is
--                   the age of the 1000th oldest row, an upper bound;
--  eviction_lag     now() - the oldest expires_at of a row eviction would
--                   delete: the very predicate of the eviction DELETE
--                   (expires_at <= now() AND idem_free(k)), on the
--                   expires_at index; it steps over the rows that may not
--                   be evicted (unfinished, leased), which are counted;
--  in_progress, unfinished   counted on the partial index of in-progress
--                   rows (idempotency_keys_lease_until), so they cost what
--                   is in progress.
CREATE FUNCTION idem_store_gauges(OUT oldest_live_age double precision,
    OUT eviction_lag double precision, OUT in_progress bigint,
    OUT unfinished bigint)
LANGUAGE sql STABLE AS $$
	SELECT
	  coalesce((SELECT extract(epoch FROM now() - min(o.created_at)
	      FILTER (WHERE o.expires_at > now() OR o.n = 1000))
	    FROM (SELECT k.created_at, k.expires_at,
	        row_number() OVER (ORDER BY k.created_at) AS n
	      FROM idempotency_keys k ORDER BY k.created_at LIMIT 1000) o),
	    0)::float8,
	  coalesce((SELECT extract(epoch FROM now() - k.expires_at)
	    FROM idempotency_keys k WHERE k.expires_at <= now() AND idem_free(k)
	    ORDER BY k.expires_at LIMIT 1), 0)::float8,
	  (SELECT count(*) FROM idempotency_keys k
	    WHERE k.state = 'in_progress'),
	  (SELECT count(*) FROM idempotency_keys k
	    WHERE k.state = 'in_progress' AND k.recovery_point <> 'started'
	    AND k.expires_at <= now())
$$;
