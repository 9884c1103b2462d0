-- 004_idem_claim.sql: the middleware's statements as functions.
--
-- PL/pgSQL keeps the plans of its statements for the session, so they are
-- planned once per connection instead of on every request, while the
-- client still sends only unnamed statements (which pgbouncer in
-- transaction mode requires).

-- idem_put: the one statement that writes a new record, in progress
-- (leased, at 'started') or completed (with its response), or replaces an
-- expired one of the same key under a new id.  Returns the id, or NULL
-- when a live record is in the way.  Only for callers that hold the key's
-- advisory lock.
CREATE FUNCTION idem_put(p_tenant bigint, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_state text,
    p_status integer, p_headers jsonb, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_id bigint;
BEGIN
	INSERT INTO idempotency_keys AS k (api_key_id, key, request_method,
	    request_path, request_fingerprint, state, recovery_point,
	    response_status, response_headers, response_body, locked_at,
	    created_at, expires_at)
	  VALUES (p_tenant, p_key, p_method, p_path, p_fpr, p_state,
	    CASE p_state WHEN 'completed' THEN 'finished' ELSE 'started' END,
	    p_status, p_headers, p_body,
	    CASE p_state WHEN 'in_progress' THEN now() END, now(),
	    now() + p_ttl_ms * interval '1 millisecond')
	  ON CONFLICT (api_key_id, key) DO UPDATE SET
	    id = nextval(pg_get_serial_sequence('idempotency_keys', 'id')),
	    request_method = EXCLUDED.request_method,
	    request_path = EXCLUDED.request_path,
	    request_fingerprint = EXCLUDED.request_fingerprint,
	    state = EXCLUDED.state, recovery_point = EXCLUDED.recovery_point,
	    response_status = EXCLUDED.response_status,
	    response_headers = EXCLUDED.response_headers,
	    response_body = EXCLUDED.response_body,
	    locked_at = EXCLUDED.locked_at, created_at = now(),
	    expires_at = EXCLUDED.expires_at
	  WHERE k.expires_at <= now()
	  RETURNING k.id INTO v_id;
	RETURN v_id;
END
$$;

-- idem_claim: flight 1.  Resolves the tenant, looks the key up and decides
-- whether this request may write the record: no live record, or a live
-- in-progress one whose lease (older than p_lock_timeout_ms) expired.  Only
-- then is the per-(tenant, key) advisory lock tried (a replay or a 422
-- takes none).  Once it is held the key is looked up again: each statement
-- of a volatile function takes a fresh snapshot, so an owner that
-- committed between the first lookup and the lock is seen, and this
-- request replays its answer instead of executing a second time.
--
-- claimed: the lock is held and there is no live record; the request
-- executes.  With p_insert (phased routes) the record is inserted (or an
-- expired one replaced) in progress, and inserted is its id; atomic routes
-- write it once, completed, with idem_complete() in flight 2.
CREATE FUNCTION idem_claim(p_secret bytea, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_lock bigint,
    p_lock_timeout_ms bigint, p_insert boolean)
RETURNS TABLE (tenant bigint, secret_hash bytea, got boolean,
    claimed boolean, inserted bigint, id bigint, request_method text,
    request_path text, request_fingerprint bytea, state text,
    response_status integer, response_headers text, response_body bytea,
    live boolean, recovery_point text, stale boolean)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
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
		    coalesce(k.locked_at < now() - p_lock_timeout_ms *
		      interval '1 millisecond', true)
		  INTO id, request_method, request_path, request_fingerprint,
		    state, response_status, response_headers, response_body,
		    live, recovery_point, stale
		  FROM idempotency_keys k
		  WHERE k.api_key_id = tenant AND k.key = p_key;
		-- A live record this request may not write: replay, 422 or 409.
		IF live AND NOT (state = 'in_progress' AND stale) THEN
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
	claimed := live IS NOT TRUE;
	IF claimed AND p_insert THEN
		inserted := idem_put(tenant, p_key, p_method, p_path, p_fpr,
		    p_ttl_ms, 'in_progress', NULL, NULL, NULL);
	END IF;
	RETURN NEXT;
END
$$;

-- idem_complete: flight 2 of an atomic route, after the handler's own
-- statements and before COMMIT.  Writes the record once, completed with
-- the response (or replaces an expired one), and returns its id.  The
-- caller holds the key's advisory lock and idem_claim() saw no live
-- record, so anything else is raised as a serialisation failure: the
-- transaction, the handler's effect included, rolls back and the client
-- is told to retry (which then replays).
CREATE FUNCTION idem_complete(p_tenant bigint, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_status integer,
    p_headers jsonb, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_id bigint;
BEGIN
	v_id := idem_put(p_tenant, p_key, p_method, p_path, p_fpr, p_ttl_ms,
	    'completed', p_status, p_headers, p_body);
	IF v_id IS NULL THEN
		RAISE EXCEPTION 'idempotency key record changed under its lock'
		    USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN v_id;
END
$$;
