-- idem_put.sql: the one statement that writes a new record, in progress
-- (leased by p_token for p_lease_ms, at 'started') or completed (with its
-- response), or replaces a free one (idem_free) of the same key under a new
-- id. p_remember_ms, the route's remember window (NULL: none), is written
-- on the record.  Returns the id, or NULL when a record that is not free is
-- in the way.  Only for callers that hold the key's advisory lock.
CREATE OR REPLACE FUNCTION idem_put(p_tenant bigint, p_key text,
    p_method text, p_path text, p_fpr bytea, p_ttl_ms bigint, p_state text,
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
