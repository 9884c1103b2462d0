-- idem_outbox_enqueue.sql: the event (unless one with this id exists: the
-- same operation enqueued it already, e.g. run again after its key was
-- evicted) and a delivery to each live endpoint of the tenant subscribed to
-- its type (a disabled one gets none, sql/015), p_traceparent the W3C
-- trace context its deliveries send (NULL: none; sql/030).  Returns the
-- number of deliveries made.  PL/pgSQL: its statements are planned once
-- per connection (sql/013).
CREATE OR REPLACE FUNCTION idem_outbox_enqueue(p_event_id text,
    p_tenant bigint, p_type text, p_body text,
    p_traceparent text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_event	bigint;
	v_n	bigint;
BEGIN
	INSERT INTO idem_events (event_id, api_key_id, type, body, traceparent)
	VALUES (p_event_id, p_tenant, p_type, p_body, p_traceparent)
	ON CONFLICT (event_id) DO NOTHING
	RETURNING id INTO v_event;
	IF v_event IS NULL THEN
		RETURN 0;
	END IF;
	INSERT INTO idem_deliveries (event, endpoint)
	SELECT v_event, w.id FROM idem_webhook_endpoints w
	  WHERE w.api_key_id = p_tenant AND w.deleted_at IS NULL
	    AND w.disabled_at IS NULL AND p_type = ANY (w.types);
	GET DIAGNOSTICS v_n = ROW_COUNT;
	RETURN v_n;
END
$$;
