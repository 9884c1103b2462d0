-- 011_idem_outbox.sql: the transactional outbox and its webhook deliveries.
--
-- A handler's idem_req_enqueue() writes an event and one delivery per
-- subscribed endpoint in the transaction of its key (or of its phase), so
-- they exist if and only if that transaction committed.  Dispatchers (a
-- thread of every application process, or `PROGRAM deliver`) take due
-- deliveries with FOR UPDATE SKIP LOCKED in bounded batches and commit
-- before calling the endpoint: no transaction is held across the network,
-- no session state is kept (pgbouncer in transaction mode), and any number
-- of dispatchers take different deliveries.
--
-- idem_webhook_endpoints: a tenant's webhook destinations.
--   id, api_key_id (the tenant), url (checked at create: http(s), a host,
--   no userinfo, no fragment, at most 2048 bytes), types (the event types
--   it receives), secret ("whsec_" + base64, for the signature),
--   created_at, deleted_at (set: deleted; its pending deliveries die).
-- idem_events: what happened, once.
--   id (internal), event_id ("evt_" + a key derived from the request's
--   Idempotency-Key: the same operation gives the same id; the receivers'
--   deduplication key, sent as webhook-id), api_key_id, type, body (the
--   JSON text sent: {"id","type","created","data"}), created_at.
-- idem_deliveries: one event for one endpoint.
--   id, event (idem_events.id), endpoint (idem_webhook_endpoints.id),
--   state: 'pending' (to deliver; next_attempt_at says when), 'delivered'
--   (a 2xx answer) or 'dead' (given up: max_attempts, max_age, the endpoint
--   deleted); attempts (made, counted when taken), next_attempt_at,
--   last_status (the HTTP status of the last answer, NULL: none),
--   last_error (why the last attempt failed), created_at, delivered_at,
--   ended_at (delivered or dead: when; retention counts from it).
-- An event is evicted, with its deliveries, once none is pending and the
-- last ended [webhooks] retention ago (an event without endpoints:
-- retention after its creation).

CREATE TABLE idem_webhook_endpoints (
	id		bigserial PRIMARY KEY,
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	url		text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
	types		text[] NOT NULL CHECK (cardinality(types) >= 1),
	secret		text NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT now(),
	deleted_at	timestamptz
);

-- Fan-out at enqueue and the tenant's list: its live endpoints.
CREATE INDEX idem_webhook_endpoints_live ON idem_webhook_endpoints
	(api_key_id, id) WHERE deleted_at IS NULL;

CREATE TABLE idem_events (
	id		bigserial PRIMARY KEY,
	event_id	text NOT NULL UNIQUE,
	api_key_id	bigint NOT NULL REFERENCES api_keys (id),
	type		text NOT NULL,
	body		text NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT now()
);

-- Eviction walks events oldest first.
CREATE INDEX idem_events_created_at ON idem_events (created_at);

CREATE TABLE idem_deliveries (
	id		bigserial PRIMARY KEY,
	event		bigint NOT NULL REFERENCES idem_events (id)
			    ON DELETE CASCADE,
	endpoint	bigint NOT NULL REFERENCES idem_webhook_endpoints (id),
	state		text NOT NULL DEFAULT 'pending'
			    CHECK (state IN ('pending', 'delivered', 'dead')),
	attempts	integer NOT NULL DEFAULT 0,
	next_attempt_at	timestamptz NOT NULL DEFAULT now(),
	last_status	integer,
	last_error	text,
	created_at	timestamptz NOT NULL DEFAULT now(),
	delivered_at	timestamptz,
	ended_at	timestamptz,
	CHECK ((state = 'pending') = (ended_at IS NULL))
);

-- What a dispatcher takes: pending deliveries in their schedule's order.
CREATE INDEX idem_deliveries_due ON idem_deliveries (next_attempt_at, id)
	WHERE state = 'pending';
-- Per-endpoint order: is an earlier one of the same endpoint pending?
CREATE INDEX idem_deliveries_endpoint ON idem_deliveries (endpoint, id)
	WHERE state = 'pending';
-- The oldest pending one, for the gauge.
CREATE INDEX idem_deliveries_pending_age ON idem_deliveries (created_at)
	WHERE state = 'pending';
-- An event's deliveries (the cascade, eviction, idemctl).
CREATE INDEX idem_deliveries_event ON idem_deliveries (event);

-- idem_outbox_enqueue: the event (unless one with this id exists: the same
-- operation enqueued it already, e.g. run again after its key was
-- evicted) and a delivery to each live endpoint of the tenant subscribed
-- to its type.  Returns the number of deliveries made.
CREATE FUNCTION idem_outbox_enqueue(p_event_id text, p_tenant bigint,
    p_type text, p_body text)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH e AS (
		INSERT INTO idem_events (event_id, api_key_id, type, body)
		VALUES (p_event_id, p_tenant, p_type, p_body)
		ON CONFLICT (event_id) DO NOTHING
		RETURNING id),
	d AS (
		INSERT INTO idem_deliveries (event, endpoint)
		SELECT e.id, w.id FROM e, idem_webhook_endpoints w
		  WHERE w.api_key_id = p_tenant AND w.deleted_at IS NULL
		    AND p_type = ANY (w.types)
		RETURNING 1)
	SELECT count(*) FROM d
$$;

-- idem_outbox_take: up to p_limit due deliveries, taken for one attempt
-- each: attempts counted now (a dispatcher that dies in the attempt has
-- made it) and next_attempt_at moved p_hold_ms ahead (longer than the
-- call may take), so that no other dispatcher takes them meanwhile; the
-- caller commits before it calls anyone.  With p_ordered, a delivery is
-- due only when no earlier one of its endpoint is pending (one in flight
-- is pending: the next waits for it).  age_ms: since the event was made.
CREATE FUNCTION idem_outbox_take(p_limit bigint, p_hold_ms bigint,
    p_ordered boolean)
RETURNS TABLE (id bigint, event_id text, type text, body text, url text,
    secret text, endpoint_deleted boolean, attempts integer, age_ms bigint)
LANGUAGE sql VOLATILE AS $$
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
	  FROM due, idem_events e, idem_webhook_endpoints w
	  WHERE d.id = due.id AND e.id = d.event AND w.id = d.endpoint
	  RETURNING d.id, e.event_id, e.type, e.body, w.url, w.secret,
	    w.deleted_at IS NOT NULL, d.attempts,
	    (extract(epoch FROM clock_timestamp() - e.created_at) * 1000)::bigint
$$;

-- idem_outbox_delivered: a 2xx answer to delivery p_id.  Recorded even if
-- another dispatcher took it again meanwhile (it was delivered).  Returns
-- the milliseconds from the event's commit (its creation) to now, or NULL
-- when it was recorded already.
CREATE FUNCTION idem_outbox_delivered(p_id bigint, p_status integer)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET state = 'delivered', last_status = p_status,
	    last_error = NULL, delivered_at = clock_timestamp(),
	    ended_at = clock_timestamp()
	  FROM idem_events e
	  WHERE d.id = p_id AND d.state = 'pending' AND e.id = d.event
	  RETURNING (extract(epoch FROM clock_timestamp() - e.created_at)
	    * 1000)::bigint
$$;

-- idem_outbox_failed: attempt p_attempts of delivery p_id failed (status:
-- NULL when there was no answer): the next one p_delay_ms from now, or
-- with p_dead the delivery given up.  Only while it is pending and still
-- this attempt's (a dispatcher whose hold lapsed does not overwrite the
-- next attempt's outcome).  Returns whether it is dead.
CREATE FUNCTION idem_outbox_failed(p_id bigint, p_attempts integer,
    p_status integer, p_error text, p_delay_ms bigint, p_dead boolean)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET last_status = p_status,
	    last_error = left(p_error, 500),
	    next_attempt_at = now() + p_delay_ms * interval '1 millisecond',
	    state = CASE WHEN p_dead THEN 'dead' ELSE 'pending' END,
	    ended_at = CASE WHEN p_dead THEN clock_timestamp() END
	  WHERE d.id = p_id AND d.state = 'pending'
	    AND d.attempts = p_attempts
	  RETURNING d.state = 'dead'
$$;

-- idem_outbox_release: a dispatcher that stops gives back delivery p_id,
-- taken for attempt p_attempts and not attempted: due at once, the
-- attempt not counted.
CREATE FUNCTION idem_outbox_release(p_id bigint, p_attempts integer)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET attempts = d.attempts - 1,
	    next_attempt_at = now()
	  WHERE d.id = p_id AND d.state = 'pending'
	    AND d.attempts = p_attempts
	  RETURNING true
$$;

-- idem_outbox_evict: up to p_limit events of which no delivery is pending
-- and none ended within p_retention_ms (without deliveries: made that
-- long ago), deleted with their deliveries.  Several processes may evict
-- at once (SKIP LOCKED).  Returns the number of events deleted.
CREATE FUNCTION idem_outbox_evict(p_retention_ms bigint, p_limit bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH old AS (
		SELECT e.id FROM idem_events e
		WHERE e.created_at < now() - p_retention_ms * interval '1 millisecond'
		  AND NOT EXISTS (
		    SELECT 1 FROM idem_deliveries d
		    WHERE d.event = e.id AND (d.state = 'pending' OR d.ended_at >=
		      now() - p_retention_ms * interval '1 millisecond'))
		ORDER BY e.created_at
		LIMIT p_limit
		FOR UPDATE OF e SKIP LOCKED),
	gone AS (
		DELETE FROM idem_events e USING old WHERE e.id = old.id
		RETURNING 1)
	SELECT count(*) FROM gone
$$;

-- The gauges of /metrics: pending deliveries and the age of the oldest
-- (seconds; 0 when none), from the partial indexes.
CREATE FUNCTION idem_outbox_pending(OUT pending bigint, OUT oldest_s double precision)
LANGUAGE sql STABLE AS $$
	SELECT (SELECT count(*) FROM idem_deliveries WHERE state = 'pending'),
	    coalesce((SELECT extract(epoch FROM now() - min(created_at))
	      FROM idem_deliveries WHERE state = 'pending'), 0)::double precision
$$;
