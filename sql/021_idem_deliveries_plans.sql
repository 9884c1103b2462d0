-- 021_idem_deliveries_plans.sql: a dispatcher's take finds the due
-- deliveries through idem_deliveries_due, whatever the statistics say.
--
-- The three partial indexes of pending deliveries (sql/011) had the one
-- predicate state = 'pending', so each could serve any query that says
-- so.  Statistics taken while the outbox is drained (a VACUUM then: the
-- benchmark's before every run, autovacuum's whenever it comes at such a
-- moment) show them empty, and an index believed empty is cheaper to read
-- whole and sort than idem_deliveries_due is to walk in order: the take of
-- idem_outbox_take() read every pending delivery through
-- idem_deliveries_pending_age and sorted them, 32 ms a take beside a
-- backlog of 17,000 (the batch-10 slice of docs/benchmark.md: ten times
-- the takes of batch 100 for as many deliveries).
--
-- Each of the two others now has a predicate of its own, the same rows
-- (created_at and endpoint are NOT NULL), which a query must state to use
-- it: the oldest-pending gauge's min(created_at) states it by itself
-- (PostgreSQL adds IS NOT NULL to a min()), a walk over the endpoints
-- (idem_outbox_take with ordered = on, the dispatcher's per-endpoint
-- check) by its condition on endpoint.  The take of due deliveries does
-- not, so idem_deliveries_due is its only index.
DROP INDEX idem_deliveries_pending_age;
CREATE INDEX idem_deliveries_pending_age ON idem_deliveries (created_at)
	WHERE state = 'pending' AND created_at IS NOT NULL;
DROP INDEX idem_deliveries_endpoint;
CREATE INDEX idem_deliveries_endpoint ON idem_deliveries (endpoint, id)
	WHERE state = 'pending' AND endpoint IS NOT NULL;
