-- 013_idem_outbox_plans.sql: the outbox's two hot functions with plans
-- that neither are made again on every call nor grow with the tables
-- (measured by tests/bench/run BENCH_TESTS=outbox, docs/benchmark.md "The
-- outbox").
--
-- A LANGUAGE sql function that is not inlined is planned on every call,
-- its parameters unknown.  idem_outbox_take's LIMIT p_limit was estimated
-- at a tenth of the pending deliveries, and its UPDATE joined that many by
-- hashing the whole of idem_deliveries (the delivered ones included, kept
-- [webhooks] retention): a sequential scan per batch, 24 ms at 30,000
-- deliveries, 0.5 ms with the plan of the actual limit.  Both are PL/pgSQL
-- now (a statement planned once per connection), the take's rows looked
-- up by id (= ANY of the ids taken: an index scan, whatever the
-- estimate).  Same signatures, same results.

CREATE OR REPLACE FUNCTION idem_outbox_enqueue(p_event_id text,
    p_tenant bigint, p_type text, p_body text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_event	bigint;
	v_n	bigint;
BEGIN
	INSERT INTO idem_events (event_id, api_key_id, type, body)
	VALUES (p_event_id, p_tenant, p_type, p_body)
	ON CONFLICT (event_id) DO NOTHING
	RETURNING id INTO v_event;
	IF v_event IS NULL THEN
		RETURN 0;
	END IF;
	INSERT INTO idem_deliveries (event, endpoint)
	SELECT v_event, w.id FROM idem_webhook_endpoints w
	  WHERE w.api_key_id = p_tenant AND w.deleted_at IS NULL
	    AND p_type = ANY (w.types);
	GET DIAGNOSTICS v_n = ROW_COUNT;
	RETURN v_n;
END
$$;

CREATE OR REPLACE FUNCTION idem_outbox_take(p_limit bigint, p_hold_ms bigint,
    p_ordered boolean)
RETURNS TABLE (id bigint, event_id text, type text, body text, url text,
    secret text, endpoint_deleted boolean, attempts integer, age_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	WITH due AS (
		SELECT d.id FROM idem_deliveries d
		WHERE d.state = 'pending' AND d.next_attempt_at <= now()
		  AND (NOT p_ordered OR NOT EXISTS (
		    SELECT 1 FROM idem_deliveries o
		    WHERE o.endpoint = d.endpoint AND o.state = 'pending'
		      AND o.id < d.id))
		ORDER BY d.next_attempt_at, d.id
		LIMIT p_limit
		FOR UPDATE OF d SKIP LOCKED)
	UPDATE idem_deliveries d SET attempts = d.attempts + 1,
	    next_attempt_at = now() + p_hold_ms * interval '1 millisecond'
	  FROM idem_events e, idem_webhook_endpoints w
	  WHERE d.id = ANY (ARRAY(SELECT due.id FROM due))
	    AND e.id = d.event AND w.id = d.endpoint
	  RETURNING d.id, e.event_id, e.type, e.body, w.url, w.secret,
	    w.deleted_at IS NOT NULL, d.attempts,
	    (extract(epoch FROM clock_timestamp() - e.created_at) * 1000)::bigint;
END
$$;
