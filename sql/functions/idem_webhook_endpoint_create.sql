-- idem_webhook_endpoint_create.sql: a webhook endpoint of the tenant,
-- unless it has p_max live ones already ([webhooks] max_endpoints): then
-- no row.  The tenant's row is locked first (FOR NO KEY UPDATE: the
-- foreign keys' KEY SHARE of other inserts does not wait for it) until the
-- caller's transaction ends, and the count is taken after the lock (READ
-- COMMITTED: a statement of its own, a snapshot of its own), so that two
-- creates at the limit cannot both pass.  Returns the id and the creation
-- time in Unix seconds.
CREATE OR REPLACE FUNCTION idem_webhook_endpoint_create(p_tenant bigint,
    p_url text, p_types text[], p_secret text, p_max bigint)
RETURNS TABLE (id bigint, created bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
	PERFORM 1 FROM api_keys k WHERE k.id = p_tenant FOR NO KEY UPDATE;
	IF (SELECT count(*) FROM idem_webhook_endpoints w
	    WHERE w.api_key_id = p_tenant AND w.deleted_at IS NULL) >= p_max
	THEN
		RETURN;
	END IF;
	RETURN QUERY
	WITH i AS (INSERT INTO idem_webhook_endpoints AS w (api_key_id, url,
	    types, secret)
	  VALUES (p_tenant, p_url, p_types, p_secret)
	  RETURNING w.id, extract(epoch FROM w.created_at)::bigint AS created)
	SELECT i.id, i.created FROM i;
END
$$;
