-- idem_finish.sql: the last phase of a phased route, by the owner of the
-- lease: the record completed with its response, the lease ended.  The
-- response is replayed for at least p_ttl_ms from now, even when the
-- record's own expiry passed while its request ran (resumed late, or by the
-- completer): an answer that exists is kept for the whole window.  Returns
-- the record's expires_at as stored (Unix seconds, rounded down).
CREATE OR REPLACE FUNCTION idem_finish(p_id bigint, p_token uuid,
    p_status integer, p_headers jsonb, p_body bytea, p_ttl_ms bigint)
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
