-- 005_idem_fencing.sql: leases with fencing tokens for phased records.
--
-- A phased record in progress is owned by the request that holds its lease:
-- lease_token names the owner, lease_until is when the lease lapses.  Every
-- write by an owner (phase commit, renewal, final store) names its token, in
-- the same statement as the check, and raises when the record is no longer
-- its own, so that the owner's whole transaction, effects included, rolls
-- back.  A record in progress whose lease is live is never replaced, deleted
-- or taken over, whether its expires_at has passed or not.

ALTER TABLE idempotency_keys
	ADD COLUMN lease_token uuid,
	ADD COLUMN lease_until timestamptz,
	-- phased: the canonical request body the fingerprint covers, so that
	-- the completer can run an abandoned record's handler again
	ADD COLUMN request_body bytea;

-- Records leased before this migration keep a lease of the default
-- lock_timeout (5 minutes) from their last renewal.
UPDATE idempotency_keys SET lease_token = gen_random_uuid(),
    lease_until = locked_at + interval '5 minutes'
  WHERE state = 'in_progress' AND locked_at IS NOT NULL;

-- The completer and the unfinished-keys report walk this.
CREATE INDEX idempotency_keys_lease_until ON idempotency_keys (lease_until)
	WHERE state = 'in_progress';

-- idem_free: may a new request write this key's record in place of k?
-- Only when it is expired and nothing of it can still be running or have
-- effects: completed, or never past 'started' with its lease lapsed.
CREATE FUNCTION idem_free(k idempotency_keys)
RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT k.expires_at <= now() AND (k.state = 'completed' OR
	    (k.recovery_point = 'started' AND
	     coalesce(k.lease_until <= now(), true)))
$$;

DROP FUNCTION idem_claim(bytea, text, text, text, bytea, bigint, bigint,
    bigint, boolean);
DROP FUNCTION idem_put(bigint, text, text, text, bytea, bigint, text,
    integer, jsonb, bytea);

-- idem_put: the one statement that writes a new record, in progress
-- (leased by p_token for p_lease_ms, at 'started') or completed (with its
-- response), or replaces a free one (idem_free) of the same key under a
-- new id.  Returns the id, or NULL when a record that is not free is in the
-- way.  Only for callers that hold the key's advisory lock.  (The new
-- parameters have defaults, so idem_complete() calls it unchanged.)
CREATE FUNCTION idem_put(p_tenant bigint, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_state text,
    p_status integer, p_headers jsonb, p_body bytea,
    p_lease_ms bigint DEFAULT NULL, p_request bytea DEFAULT NULL,
    p_token uuid DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_id bigint;
BEGIN
	INSERT INTO idempotency_keys AS k (api_key_id, key, request_method,
	    request_path, request_fingerprint, state, recovery_point,
	    response_status, response_headers, response_body, locked_at,
	    lease_token, lease_until, request_body, created_at, expires_at)
	  VALUES (p_tenant, p_key, p_method, p_path, p_fpr, p_state,
	    CASE p_state WHEN 'completed' THEN 'finished' ELSE 'started' END,
	    p_status, p_headers, p_body,
	    CASE p_state WHEN 'in_progress' THEN now() END, p_token,
	    CASE p_state WHEN 'in_progress' THEN
	      now() + p_lease_ms * interval '1 millisecond' END,
	    p_request, now(), now() + p_ttl_ms * interval '1 millisecond')
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
	    expires_at = EXCLUDED.expires_at
	  WHERE idem_free(k)
	  RETURNING k.id INTO v_id;
	RETURN v_id;
END
$$;

-- idem_claim: flight 1.  Resolves the tenant, looks the key up and decides
-- whether this request may write the record: no record, or a free one
-- (idem_free).  On phased routes a record in progress whose lease lapsed
-- (its owner is gone) may also be taken over by the same request (method,
-- path and fingerprint): it resumes at the stored recovery point.  Only
-- then is the per-(tenant, key) advisory lock tried (a replay, a 409 or a
-- 422 takes none).  Once it is held the key is looked up again: each
-- statement of a volatile function takes a fresh snapshot, so an owner
-- that committed between the first lookup and the lock is seen.
--
-- claimed: the lock is held and the record is free; the request executes.
-- With p_phased the record is inserted (or a free one replaced) in
-- progress, and inserted is its id.  Atomic routes write it once,
-- completed, with idem_complete() in flight 2.  taken: a lapsed lease was
-- taken over (id).  token: the lease token of an insert or a takeover.
CREATE FUNCTION idem_claim(p_secret bytea, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_lock bigint,
    p_lease_ms bigint, p_phased boolean, p_request bytea DEFAULT NULL)
RETURNS TABLE (tenant bigint, secret_hash bytea, got boolean,
    claimed boolean, inserted bigint, id bigint, request_method text,
    request_path text, request_fingerprint bytea, state text,
    response_status integer, response_headers text, response_body bytea,
    live boolean, recovery_point text, stale boolean, taken boolean,
    token uuid)
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
		    coalesce(k.lease_until <= now(), true), idem_free(k)
		  INTO id, request_method, request_path, request_fingerprint,
		    state, response_status, response_headers, response_body,
		    live, recovery_point, stale, v_free
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

-- idem_fenced_fail: what every fenced write raises when the record is no
-- longer leased by the caller (taken over, released, completed, gone).
CREATE FUNCTION idem_fenced_fail(p_id bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'idempotency key record % is no longer leased by this '
	    'request', p_id USING ERRCODE = 'serialization_failure';
END
$$;

-- idem_advance: a phase commit by the owner of the lease p_token: the next
-- recovery point (NULL: only renew) and a lease of p_lease_ms from now.
-- Returns p_id.
CREATE FUNCTION idem_advance(p_id bigint, p_token uuid, p_point text,
    p_lease_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	UPDATE idempotency_keys SET
	    recovery_point = coalesce(p_point, recovery_point),
	    locked_at = now(),
	    lease_until = now() + p_lease_ms * interval '1 millisecond'
	  WHERE id = p_id AND lease_token = p_token AND state = 'in_progress';
	IF NOT FOUND THEN
		PERFORM idem_fenced_fail(p_id);
	END IF;
	RETURN p_id;
END
$$;

-- idem_finish: the last phase of a phased route, by the owner of the
-- lease: the record completed with its response, the lease ended.  The
-- response is replayed for at least p_ttl_ms from now, even when the
-- record's own expiry passed while its request ran (resumed late, or by the
-- completer): an answer that exists is kept for the whole window.
-- Returns p_id.
CREATE FUNCTION idem_finish(p_id bigint, p_token uuid, p_status integer,
    p_headers jsonb, p_body bytea, p_ttl_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	UPDATE idempotency_keys SET state = 'completed',
	    response_status = p_status, response_headers = p_headers,
	    response_body = p_body, locked_at = NULL, lease_token = NULL,
	    lease_until = NULL, recovery_point = 'finished',
	    expires_at = greatest(expires_at,
	      now() + p_ttl_ms * interval '1 millisecond')
	  WHERE id = p_id AND lease_token = p_token AND state = 'in_progress';
	IF NOT FOUND THEN
		PERFORM idem_fenced_fail(p_id);
	END IF;
	RETURN p_id;
END
$$;

-- idem_release: a phase failed; by the owner of the lease only.  A record
-- that never passed a recovery point is deleted (a retry executes afresh);
-- otherwise its lease ends, so that a retry or the completer resumes it.
-- Returns whether the caller still owned it.
CREATE FUNCTION idem_release(p_id bigint, p_token uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	DELETE FROM idempotency_keys WHERE id = p_id AND lease_token = p_token
	    AND state = 'in_progress' AND recovery_point = 'started';
	IF FOUND THEN
		RETURN true;
	END IF;
	UPDATE idempotency_keys SET locked_at = NULL, lease_token = NULL,
	    lease_until = NULL
	  WHERE id = p_id AND lease_token = p_token AND state = 'in_progress';
	RETURN FOUND;
END
$$;
