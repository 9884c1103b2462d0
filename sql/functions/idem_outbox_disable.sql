-- idem_outbox_disable.sql: the dispatcher disables endpoint p_endpoint
-- for p_reason ("gone": it answered 410; "failing": every attempt failed
-- for [webhooks] disable_after), unless it is disabled or deleted
-- already.  Its pending deliveries die with that reason, and the tenant's
-- other endpoints subscribed to webhook_endpoint.disabled get that event
-- (idem_outbox_enqueue gives a disabled endpoint none), in the same
-- transaction.  The event's data is the endpoint (sql/015's health
-- fields in Unix seconds; its secret left out); its id is derived from
-- the endpoint and the instant it was disabled.  Returns the deliveries
-- that died, NULL when it was not disabled now.
CREATE OR REPLACE FUNCTION idem_outbox_disable(p_endpoint bigint,
    p_reason text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	w	idem_webhook_endpoints;
	v_dead	bigint;
	v_evid	text;
BEGIN
	UPDATE idem_webhook_endpoints e SET disabled_at = clock_timestamp(),
	    disabled_reason = p_reason
	  WHERE e.id = p_endpoint AND e.disabled_at IS NULL
	    AND e.deleted_at IS NULL
	  RETURNING e.* INTO w;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	UPDATE idem_deliveries d SET state = 'dead',
	    last_error = 'endpoint disabled (' || p_reason || ')',
	    ended_at = clock_timestamp()
	  WHERE d.endpoint = p_endpoint AND d.state = 'pending';
	GET DIAGNOSTICS v_dead = ROW_COUNT;
	v_evid := 'evt_' || left(encode(sha256(convert_to(
	    'webhook_endpoint.disabled:' || w.id || ':' ||
	    (extract(epoch FROM w.disabled_at) * 1000000)::bigint, 'UTF8')),
	    'hex'), 40);
	PERFORM idem_outbox_enqueue(v_evid, w.api_key_id,
	    'webhook_endpoint.disabled', json_build_object(
	    'id', v_evid, 'type', 'webhook_endpoint.disabled',
	    'created', extract(epoch FROM w.disabled_at)::bigint,
	    'data', json_build_object('id', w.id, 'url', w.url,
	      'events', to_json(w.types),
	      'created', extract(epoch FROM w.created_at)::bigint,
	      'enabled', false, 'disabled_reason', w.disabled_reason,
	      'last_success', extract(epoch FROM w.last_success_at)::bigint,
	      'failing_since', extract(epoch FROM w.failing_since)::bigint)
	    )::text);
	RETURN v_dead;
END
$$;
