-- idem_outbox_take.sql: the deliveries p_ids (chosen among
-- idem_outbox_candidates' by the dispatcher, one per endpoint) and, with
-- p_per_endpoint > 1, up to p_per_endpoint - 1 more due deliveries of
-- each one's endpoint (its dispatcher calls them one after the other:
-- still one call in flight per endpoint), taken for one attempt each if
-- still pending and due: attempts counted now and next_attempt_at moved
-- p_hold_ms ahead, so that no other dispatcher takes them meanwhile.  One
-- another dispatcher has locked is skipped (SKIP LOCKED), and one it has
-- taken and committed is seen with its new next_attempt_at and left; so
-- with [webhooks] ordered (p_per_endpoint 1) an endpoint's later delivery
-- is never taken while its head is in flight.  The rows are looked up by
-- id (sql/013), each endpoint's in schedule order.  endpoint_disabled:
-- the endpoint's disabled_reason (NULL: enabled).
-- A delivery is found by its id with "state <> ALL ('{delivered,dead}')"
-- rather than "state = 'pending'" (the same rows), so that the planner
-- cannot read it through a partial index on pending deliveries that
-- statistics taken while the outbox was drained show empty (sql/021).
CREATE OR REPLACE FUNCTION idem_outbox_take(p_ids bigint[],
    p_hold_ms bigint, p_per_endpoint integer)
RETURNS TABLE (id bigint, event_id text, type text, body text, url text,
    secret text, endpoint_deleted boolean, attempts integer, age_ms bigint,
    endpoint bigint, tenant bigint, endpoint_disabled text,
    traceparent text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
	v_due	bigint[];
	v_more	bigint[];
BEGIN
	SELECT array_agg(t.id) INTO v_due FROM (
		SELECT d.id FROM idem_deliveries d
		WHERE d.id = ANY (p_ids) AND d.state <> ALL ('{delivered,dead}')
		  AND d.next_attempt_at <= now()
		FOR UPDATE OF d SKIP LOCKED) t;
	IF v_due IS NULL THEN
		RETURN;
	END IF;
	IF p_per_endpoint > 1 THEN
		SELECT array_agg(x.id) INTO v_more FROM idem_deliveries c,
		  LATERAL (SELECT d.id FROM idem_deliveries d
		    WHERE d.endpoint = c.endpoint AND d.state = 'pending'
		      AND d.next_attempt_at <= now() AND d.id <> c.id
		    ORDER BY d.next_attempt_at, d.id
		    LIMIT p_per_endpoint - 1
		    FOR UPDATE OF d SKIP LOCKED) x
		  WHERE c.id = ANY (v_due);
		v_due := v_due || coalesce(v_more, '{}');
	END IF;
	RETURN QUERY
	UPDATE idem_deliveries d SET attempts = d.attempts + 1,
	    next_attempt_at = now() + p_hold_ms * interval '1 millisecond'
	  FROM idem_events e, idem_webhook_endpoints w
	  WHERE d.id = ANY (v_due) AND e.id = d.event AND w.id = d.endpoint
	  RETURNING d.id, e.event_id, e.type, e.body, w.url, w.secret,
	    w.deleted_at IS NOT NULL, d.attempts,
	    (extract(epoch FROM clock_timestamp() - e.created_at) * 1000)::bigint,
	    w.id, w.api_key_id, w.disabled_reason, e.traceparent;
END
$$;
