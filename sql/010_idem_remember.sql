-- 010_idem_remember.sql: late retries recognised ([route] remember).
--
-- A route with remember = WINDOW keeps a small trace of each of its
-- completed records for WINDOW after the record expired: 64 bits of the
-- key's digest (the advisory lock id: SHA-256 of the tenant's secret hash
-- and the key), 64 bits of the request's fingerprint, when the record
-- expired and when the trace is forgotten.  A retry of the same key with
-- the same request inside the window is answered 410
-- idempotency-key-expired instead of executing a second time; another
-- request under the key, or a key never seen, executes as before.
--
-- The window is written on the record when it is created (remember_ms),
-- so that eviction needs no configuration: idemctl evict and the janitor
-- of any process keep the trace of whatever they delete.  A false 410
-- needs both 64-bit digests to collide at once (2^-128 per pair).
--
-- Size: a row is 4 int8-wide columns (60 bytes with its tuple header and
-- line pointer), the btree on key_digest ~28 bytes (random inserts leave
-- leaves ~70 % full), the btree on forget_at a few bytes: forget_at is
-- rounded up to the whole minute, so equal values are deduplicated into
-- posting lists.  A BRIN index would be smaller still, but its ranges only
-- ever widen when vacuumed space is refilled by newer rows, so after one
-- window every range would match and each batch would scan the table.

ALTER TABLE idempotency_keys
	-- [route] remember in milliseconds when the record was created;
	-- NULL: nothing is kept once it is evicted
	ADD COLUMN remember_ms bigint;

CREATE TABLE idem_remembered (
	key_digest	bigint NOT NULL,	-- idem_key_digest64(tenant, key)
	request_digest	bigint NOT NULL,	-- idem_digest64(fingerprint)
	expired_at	timestamptz NOT NULL,	-- the record's expires_at
	forget_at	timestamptz NOT NULL	-- + remember, up to a minute
);

-- The claim looks a key up here; the janitor evicts from the forget_at end.
CREATE INDEX idem_remembered_key ON idem_remembered (key_digest);
CREATE INDEX idem_remembered_forget_at ON idem_remembered (forget_at);

-- Evicted from the head of forget_at, like the keys' expires_at: vacuum
-- early so that the next batch does not step over dead entries.
ALTER TABLE idem_remembered SET (autovacuum_vacuum_scale_factor = 0.01);

-- The first 64 bits of a SHA-256 digest, big-endian, signed: what
-- lib/idempotency.c computes for the advisory lock id.
CREATE FUNCTION idem_digest64(p_digest bytea)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT ('x' || encode(substr(p_digest, 1, 8), 'hex'))::bit(64)::bigint
$$;

-- The key's digest as idem_key_digest() (lib/crypto.c) computes it:
-- SHA-256 of the tenant's secret hash and the key's bytes; 64 bits of it.
CREATE FUNCTION idem_key_digest64(p_secret_hash bytea, p_key text)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT idem_digest64(sha256(p_secret_hash || convert_to(p_key, 'UTF8')))
$$;

-- When a trace of a record that expired at p_expired is forgotten: the
-- window later, rounded up to the whole minute (equal values share one
-- index entry).
CREATE FUNCTION idem_forget_at(p_expired timestamptz, p_remember_ms bigint)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT to_timestamp(ceil(extract(epoch FROM p_expired +
	    p_remember_ms * interval '1 millisecond') / 60) * 60)
$$;

DROP FUNCTION idem_claim(bytea, text, text, text, bytea, bigint, bigint,
    bigint, boolean, bytea);
DROP FUNCTION idem_complete(bigint, text, text, text, bytea, bigint,
    integer, jsonb, bytea);
DROP FUNCTION idem_put(bigint, text, text, text, bytea, bigint, text,
    integer, jsonb, bytea, bigint, bytea, uuid);

-- idem_put: as in 005, plus the route's remember window (NULL: none),
-- written on the record.
CREATE FUNCTION idem_put(p_tenant bigint, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_state text,
    p_status integer, p_headers jsonb, p_body bytea,
    p_lease_ms bigint DEFAULT NULL, p_request bytea DEFAULT NULL,
    p_token uuid DEFAULT NULL, p_remember_ms bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_id bigint;
BEGIN
	INSERT INTO idempotency_keys AS k (api_key_id, key, request_method,
	    request_path, request_fingerprint, state, recovery_point,
	    response_status, response_headers, response_body, locked_at,
	    lease_token, lease_until, request_body, created_at, expires_at,
	    remember_ms)
	  VALUES (p_tenant, p_key, p_method, p_path, p_fpr, p_state,
	    CASE p_state WHEN 'completed' THEN 'finished' ELSE 'started' END,
	    p_status, p_headers, p_body,
	    CASE p_state WHEN 'in_progress' THEN now() END, p_token,
	    CASE p_state WHEN 'in_progress' THEN
	      now() + p_lease_ms * interval '1 millisecond' END,
	    p_request, now(), now() + p_ttl_ms * interval '1 millisecond',
	    p_remember_ms)
	  ON CONFLICT (api_key_id, key) DO UPDATE SET
	    id = nextval(pg_get_serial_sequence('idempotency_keys', 'id')),
	    request_method = EXCLUDED.request_method,
	    request_path = EXCLUDED.request_path,
	    request_fingerprint = EXCLUDED.request_fingerprint,
	    state = EXCLUDED.state, recovery_point = EXCLUDED.recovery_point,
	    response_status = EXCLUDED.response_status,
	    response_headers = EXCLUDED.response_headers,
	    response_body = EXCLUDED.response_body,
	    locked_at = EXCLUDED.locked_at, lease_token = EXCLUDED.lease_token,
	    lease_until = EXCLUDED.lease_until,
	    request_body = EXCLUDED.request_body, created_at = now(),
	    expires_at = EXCLUDED.expires_at,
	    remember_ms = EXCLUDED.remember_ms
	  WHERE idem_free(k)
	  RETURNING k.id INTO v_id;
	RETURN v_id;
END
$$;

-- idem_claim: as in 006, plus p_remember_ms, the route's remember window
-- (NULL: the route remembers nothing, and nothing is looked up).  When
-- the key has no record this request could not write anyway, and the same
-- request (method, path, fingerprint) under this key is remembered, the
-- request is answered without the lock and without writing anything:
-- remembered is when its record expired (Unix seconds).  Remembered: a
-- trace in idem_remembered that is not yet forgotten, or the expired
-- record itself while it waits for eviction (a record of a remembering
-- route, completed, whose window has not passed), so that the answer does
-- not depend on when the janitor ran.  A record of another request that is
-- replaced here leaves its trace first, as eviction would have.
CREATE FUNCTION idem_claim(p_secret bytea, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_lock bigint,
    p_lease_ms bigint, p_phased boolean, p_request bytea DEFAULT NULL,
    p_remember_ms bigint DEFAULT NULL)
RETURNS TABLE (tenant bigint, secret_hash bytea, got boolean,
    claimed boolean, inserted bigint, id bigint, request_method text,
    request_path text, request_fingerprint bytea, state text,
    response_status integer, response_headers text, response_body bytea,
    live boolean, recovery_point text, stale boolean, taken boolean,
    token uuid, expires bigint, remembered bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
	v_free boolean;
	v_same boolean;
	v_expires timestamptz;
	v_remember bigint;
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
		    floor(extract(epoch FROM k.expires_at))::bigint,
		    k.expires_at, k.remember_ms
		  INTO id, request_method, request_path, request_fingerprint,
		    state, response_status, response_headers, response_body,
		    live, recovery_point, stale, v_free, expires, v_expires,
		    v_remember
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
		-- Free: is this very request remembered?  (Once: a record
		-- evicted between the two passes was seen by the first.)
		IF pass = 1 AND p_remember_ms IS NOT NULL THEN
			IF id IS NULL THEN
				SELECT floor(extract(epoch FROM
				    r.expired_at))::bigint INTO remembered
				  FROM idem_remembered r
				  WHERE r.key_digest = p_lock AND
				    r.request_digest = idem_digest64(p_fpr)
				    AND r.forget_at > now()
				  LIMIT 1;
			ELSIF v_same AND state = 'completed' AND
			    idem_forget_at(v_expires, v_remember) > now() THEN
				remembered := expires;
			END IF;
			IF remembered IS NOT NULL THEN
				RETURN NEXT;
				RETURN;
			END IF;
		END IF;
		EXIT WHEN pass = 2;
		got := pg_try_advisory_xact_lock(p_lock);
		IF NOT got THEN
			RETURN NEXT;
			RETURN;
		END IF;
	END LOOP;
	claimed := v_free;
	-- The record about to be replaced is another request's: keep its
	-- trace (rolled back with this transaction if nothing is written).
	IF claimed AND id IS NOT NULL AND state = 'completed' AND
	    v_remember IS NOT NULL AND
	    idem_forget_at(v_expires, v_remember) > now() THEN
		INSERT INTO idem_remembered (key_digest, request_digest,
		    expired_at, forget_at)
		  VALUES (p_lock, idem_digest64(request_fingerprint), v_expires,
		    idem_forget_at(v_expires, v_remember));
	END IF;
	IF claimed AND p_phased THEN
		token := gen_random_uuid();
		inserted := idem_put(tenant, p_key, p_method, p_path, p_fpr,
		    p_ttl_ms, 'in_progress', NULL, NULL, NULL, p_lease_ms,
		    p_request, token, p_remember_ms);
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

-- idem_complete: as in 006, plus the route's remember window.
CREATE FUNCTION idem_complete(p_tenant bigint, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_status integer,
    p_headers jsonb, p_body bytea, p_remember_ms bigint DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF idem_put(p_tenant, p_key, p_method, p_path, p_fpr, p_ttl_ms,
	    'completed', p_status, p_headers, p_body, NULL, NULL, NULL,
	    p_remember_ms) IS NULL THEN
		RAISE EXCEPTION 'idempotency key record changed under its lock'
		    USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN floor(extract(epoch FROM now() + p_ttl_ms *
	    interval '1 millisecond'))::bigint;
END
$$;

-- idem_evict_batch: one batch of eviction (the caller holds the
-- fleet-wide eviction lock): up to p_limit expired records that
-- idem_free() lets go, oldest expiry first, deleted; in the same
-- statement, the trace of each completed one whose route remembers, unless
-- its window has passed already.  Returns the records deleted and the
-- traces written.
CREATE FUNCTION idem_evict_batch(p_limit bigint, OUT evicted bigint,
    OUT remembered bigint)
LANGUAGE sql VOLATILE AS $$
	WITH gone AS (
		DELETE FROM idempotency_keys WHERE id IN
		    (SELECT k.id FROM idempotency_keys k
		      WHERE k.expires_at <= now() AND idem_free(k)
		      ORDER BY k.expires_at LIMIT p_limit
		      FOR UPDATE SKIP LOCKED)
		  RETURNING api_key_id, key, request_fingerprint, state,
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
	SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM kept)
$$;

-- idem_forget_batch: one batch of traces whose window has passed, oldest
-- first, deleted (under the same eviction lock).  Returns how many.
CREATE FUNCTION idem_forget_batch(p_limit bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH gone AS (
		DELETE FROM idem_remembered WHERE ctid = ANY (ARRAY(
		    SELECT r.ctid FROM idem_remembered r
		      WHERE r.forget_at <= now()
		      ORDER BY r.forget_at LIMIT p_limit))
		  RETURNING 1)
	SELECT count(*) FROM gone
$$;
