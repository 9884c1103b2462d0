-- 040_idem_outbox_fair.sql: fair, concurrent delivery, and the receivers'
-- signals (issue 36).
--
-- A dispatcher now has up to [webhooks] concurrency calls in flight, at
-- most one per endpoint, and takes work round-robin across tenants.  It
-- asks for candidates first (idem_outbox_candidates: each endpoint's
-- next due delivery, with its tenant and its rank among the tenant's,
-- found by a skip scan over the endpoints that have pending deliveries,
-- so that a tenant's backlog does not hide another tenant's work),
-- chooses among them itself (lib/pure/delivery.c: a tenant's share), and
-- takes the ones chosen by id (idem_outbox_take), each with up to
-- [webhooks] batch - 1 more of its endpoint's due deliveries (unordered),
-- called one after the other.  Without ordered, an
-- endpoint's next due delivery is its earliest next_attempt_at: the index
-- below gives it in one descent per endpoint.
--
-- The dispatcher keeps an endpoint's health columns (sql/015): a 2xx sets
-- last_success_at and clears failing_since (idem_outbox_delivered), a
-- failure sets failing_since if unset and says for how long the endpoint
-- has been failing (idem_outbox_failed), and idem_outbox_disable turns
-- one off (a 410 answer, or failing for [webhooks] disable_after): its
-- pending deliveries die, and the tenant's other endpoints subscribed to
-- webhook_endpoint.disabled get that event.  idem_outbox_enqueue gives a
-- disabled endpoint no new deliveries.
--
-- idem_outbox_take and idem_outbox_failed changed their signature or
-- result: the old ones are dropped here, the new ones defined in
-- sql/functions/, applied by idemctl migrate after the migrations.
CREATE INDEX idem_deliveries_endpoint_due ON idem_deliveries
	(endpoint, next_attempt_at, id) WHERE state = 'pending' AND endpoint IS NOT NULL;

DROP FUNCTION IF EXISTS idem_outbox_take(bigint, bigint, boolean);
DROP FUNCTION IF EXISTS idem_outbox_failed(bigint, integer, integer, text,
    bigint, boolean);
