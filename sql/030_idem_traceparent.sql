-- 030_idem_traceparent.sql: an event keeps the W3C trace context of the
-- request that enqueued it, and its deliveries send it.
--
-- idem_events.traceparent: a version 00 traceparent header value
-- ("00-" trace-id "-" span-id "-" flags: the request's trace id, a span id
-- of the event's own), NULL for an event enqueued before this migration
-- or without a trace.  The dispatcher sends it as the delivery's
-- traceparent header, so that a webhook is joined to the request that
-- caused it.
--
-- idem_outbox_enqueue() takes it as a fifth argument and idem_outbox_take()
-- returns it as its last column: their old signatures are dropped here,
-- (when they exist: a new database gets them from the files after its
-- migrations), their files in sql/functions/ create the new ones in the same
-- transaction (idem_migrate(3)).
ALTER TABLE idem_events ADD COLUMN traceparent text
	CHECK (traceparent IS NULL OR traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
DROP FUNCTION IF EXISTS idem_outbox_enqueue(text, bigint, text, text);
DROP FUNCTION IF EXISTS idem_outbox_take(bigint, bigint, boolean);
