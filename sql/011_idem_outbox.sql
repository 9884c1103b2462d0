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
--
-- The functions it defined, as they are now: sql/functions/
-- (idem_outbox_enqueue.sql, idem_outbox_take.sql,
-- idem_outbox_delivered.sql, idem_outbox_failed.sql,
-- idem_outbox_release.sql, idem_outbox_evict.sql, idem_outbox_pending.sql),
-- applied by idemctl migrate after the migrations.

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
