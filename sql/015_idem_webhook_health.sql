-- 015_idem_webhook_health.sql: what a webhook endpoint's health is made of.
--
-- An endpoint is enabled while disabled_at is NULL.  The dispatcher
-- disables one that answered 410 Gone, or whose every attempt failed for
-- [webhooks] disable_after (failing_since is the first failure after the
-- last success, cleared by a success); the tenant turns one back on.
-- last_success_at and failing_since are what the endpoint's JSON shows.
ALTER TABLE idem_webhook_endpoints
	ADD COLUMN disabled_at timestamptz,
	ADD COLUMN disabled_reason text
	    CHECK (disabled_reason IS NULL OR length(disabled_reason) <= 64),
	ADD COLUMN last_success_at timestamptz,
	ADD COLUMN failing_since timestamptz,
	ADD CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL));
