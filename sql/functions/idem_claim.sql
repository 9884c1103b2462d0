-- idem_claim.sql: flight 1 of a request: resolves the tenant, looks the key
-- up and decides whether this request may write the record: no record, or a
-- free one (idem_free).  On phased routes a record in progress whose lease
-- lapsed (its owner is gone) may also be taken over by the same request
-- (method, path and fingerprint): it resumes at the stored recovery point.
-- Only then is the per-(tenant, key) advisory lock tried (a replay, a 409
-- or a 422 takes none).  Once it is held the key is looked up again: each
-- statement of a volatile function takes a fresh snapshot, so an owner that
-- committed between the first lookup and the lock is seen.
--
-- claimed: the lock is held and the record is free; the request executes.
-- With p_phased the record is inserted (or a free one replaced) in
-- progress, and inserted is its id.  Atomic routes write it once,
-- completed, with idem_complete() in flight 2. taken: a lapsed lease was
-- taken over (id). token: the lease token of an insert or a takeover.
-- expires: the record's expires_at (Unix seconds, rounded down), for a
-- replay's Idempotency-Key-Expires.
--
-- p_remember_ms is the route's remember window (NULL: the route remembers
-- nothing, and nothing is looked up).  When the key has no record this
-- request could not write anyway, and the same request (method, path,
-- fingerprint) under this key is remembered, the request is answered
-- without the lock and without writing anything: remembered is when its
-- record expired (Unix seconds).  Remembered: a trace in idem_remembered
-- that is not yet forgotten, or the expired record itself while it waits
-- for eviction (a record of a remembering route, completed, whose window
-- has not passed), so that the answer does not depend on when the janitor
-- ran.  A record of another request that is replaced here leaves its trace
-- first, as eviction would have.
--
-- PL/pgSQL keeps the plans of its statements for the session, so they are
-- planned once per connection instead of on every request, while the client
-- still sends only unnamed statements (which pgbouncer in transaction mode
-- requires).
CREATE OR REPLACE FUNCTION idem_claim(p_secret bytea, p_key text,
    p_method text, p_path text, p_fpr bytea, p_ttl_ms bigint, p_lock bigint,
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
