-- idem_inbox_tenant.sql: the secret hash standing for the tenant of the
-- signed source p_source (sql/050), made with p_hash when it has none yet
-- (the caller's hash of random bytes); NULL when an operator revoked it.
CREATE OR REPLACE FUNCTION idem_inbox_tenant(p_source text, p_hash bytea)
RETURNS bytea
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_hash bytea;
BEGIN
	INSERT INTO api_keys (name, secret_hash, inbox)
	VALUES ('inbox:' || p_source, p_hash, p_source)
	ON CONFLICT (inbox) DO NOTHING;
	SELECT a.secret_hash INTO v_hash FROM api_keys a
	  WHERE a.inbox = p_source AND a.revoked_at IS NULL;
	RETURN v_hash;
END
$$;
