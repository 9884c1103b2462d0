-- idem_key_record.sql: the record of (tenant, key) for an operator; tenant
-- is the API key's name or its id.
CREATE OR REPLACE FUNCTION idem_key_record(p_tenant text, p_key text)
RETURNS SETOF idempotency_keys
LANGUAGE sql STABLE AS $$
	SELECT k.* FROM idempotency_keys k JOIN api_keys a
	    ON a.id = k.api_key_id
	  WHERE (a.name = p_tenant OR a.id::text = p_tenant) AND k.key = p_key
$$;
