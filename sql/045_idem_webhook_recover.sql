-- 045_idem_webhook_recover.sql: an endpoint's failed and dead deliveries
-- by their creation, for recovery (POST /v1/webhook_endpoints/:id/recover,
-- idemctl events recover): one index range per endpoint instead of a scan
-- of every delivery.  Delivered ones are never recovered, so not indexed.
CREATE INDEX idem_deliveries_recover ON idem_deliveries (endpoint, created_at)
	WHERE state <> 'delivered';
