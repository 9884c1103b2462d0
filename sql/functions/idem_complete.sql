-- idem_complete.sql: flight 2 of an atomic route, after the handler's own
-- statements and before COMMIT.  Writes the record once, completed with the
-- response and the route's remember window (or replaces a free one), and
-- returns its expires_at (Unix seconds: now() + the TTL, now() being the
-- transaction's, the same as idem_put's).  The caller holds the key's
-- advisory lock and idem_claim() saw no live record, so anything else is
-- raised as a serialisation failure: the transaction, the handler's effect
-- included, rolls back and the client is told to retry (which then
-- replays).
CREATE OR REPLACE FUNCTION idem_complete(p_tenant bigint, p_key text,
    p_method text, p_path text, p_fpr bytea, p_ttl_ms bigint,
    p_status integer, p_headers jsonb, p_body bytea,
    p_remember_ms bigint DEFAULT NULL)
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
