-- 004_payments_disputes.sql: what the acquirer's events change
-- (POST /v1/acquirer/events, apps/payments/disputes.c).

-- A succeeded payment the cardholder disputed.
ALTER TABLE payments DROP CONSTRAINT payments_status_check,
	ADD CONSTRAINT payments_status_check
	    CHECK (status IN ('pending', 'succeeded', 'failed', 'disputed'));

-- Each message that changed nothing (an unknown payment or type): the
-- sender got its 200 and stops; this is how many there were and why.
-- Written in the message's transaction, so once per message.
CREATE TABLE acquirer_events_ignored (
	event_id	text PRIMARY KEY,
	type		text NOT NULL,
	payment		text,
	reason		text NOT NULL,
	received_at	timestamptz NOT NULL DEFAULT now()
);
