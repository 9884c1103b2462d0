-- 004_idem_claim.sql: the middleware's first statement as a function.
--
-- PL/pgSQL keeps the plan of its statements for the session, so the
-- lookup/lock/insert below is planned once per connection instead of on
-- every request, while the client still sends only unnamed statements
-- (which pgbouncer in transaction mode requires).
--
-- Arguments: secret hash, key, method, path, fingerprint, ttl (ms), advisory
-- lock id, lock timeout (ms).  The advisory lock is tried only when this
-- request may write the record: no live record, or a live in-progress one
-- whose lease expired; a replay or a 422 takes no lock.  The statement's
-- snapshot predates the lock, so an owner that committed in between shows
-- up as a conflict with nothing inserted.

CREATE FUNCTION idem_claim(p_secret bytea, p_key text, p_method text,
    p_path text, p_fpr bytea, p_ttl_ms bigint, p_lock bigint,
    p_lock_timeout_ms bigint)
RETURNS TABLE (tenant bigint, inserted bigint, id bigint,
    request_method text, request_path text, request_fingerprint bytea,
    state text, response_status integer, response_headers text,
    response_body bytea, live boolean, recovery_point text, stale boolean,
    secret_hash bytea, got boolean)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	WITH t AS (SELECT a.id, a.secret_hash FROM api_keys a
	    WHERE a.secret_hash = p_secret AND a.revoked_at IS NULL),
	cur AS MATERIALIZED (SELECT k.id, k.request_method, k.request_path,
	    k.request_fingerprint, k.state, k.response_status,
	    k.response_headers::text AS response_headers, k.response_body,
	    k.expires_at > now() AS live, k.recovery_point,
	    coalesce(k.locked_at < now() - p_lock_timeout_ms *
	      interval '1 millisecond', true) AS stale
	  FROM idempotency_keys k, t
	  WHERE k.api_key_id = t.id AND k.key = p_key),
	lk AS MATERIALIZED (SELECT CASE
	    WHEN NOT EXISTS (SELECT 1 FROM t) THEN NULL
	    WHEN EXISTS (SELECT 1 FROM cur WHERE cur.live AND
	      NOT (cur.state = 'in_progress' AND cur.stale)) THEN NULL
	    ELSE pg_try_advisory_xact_lock(p_lock) END AS got),
	ins AS (INSERT INTO idempotency_keys AS k (api_key_id, key,
	    request_method, request_path, request_fingerprint, state,
	    recovery_point, locked_at, created_at, expires_at)
	  SELECT t.id, p_key, p_method, p_path, p_fpr, 'in_progress', 'started',
	    now(), now(), now() + p_ttl_ms * interval '1 millisecond'
	  FROM t, lk WHERE lk.got
	    AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.live)
	  ON CONFLICT (api_key_id, key) DO UPDATE SET
	    id = nextval(pg_get_serial_sequence('idempotency_keys', 'id')),
	    request_method = EXCLUDED.request_method,
	    request_path = EXCLUDED.request_path,
	    request_fingerprint = EXCLUDED.request_fingerprint,
	    state = 'in_progress', recovery_point = 'started',
	    response_status = NULL, response_headers = NULL,
	    response_body = NULL, locked_at = now(), created_at = now(),
	    expires_at = EXCLUDED.expires_at
	  WHERE k.expires_at <= now()
	  RETURNING k.id)
	SELECT (SELECT t.id FROM t), (SELECT ins.id FROM ins), cur.id,
	  cur.request_method, cur.request_path, cur.request_fingerprint,
	  cur.state, cur.response_status, cur.response_headers,
	  cur.response_body, cur.live, cur.recovery_point, cur.stale,
	  (SELECT t.secret_hash FROM t), (SELECT lk.got FROM lk)
	FROM (SELECT 1) AS one LEFT JOIN cur ON true;
END
$$;
