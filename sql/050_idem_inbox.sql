-- 050_idem_inbox.sql: the tenant of a signed source ([inbox "NAME"]).
--
-- A source's messages are keyed like any idempotent request, under a
-- tenant of their own: an api_keys row per source, named "inbox:NAME",
-- whose secret_hash is the SHA-256 of random bytes nobody keeps (no
-- Authorization can present it).  idem_inbox_tenant() makes it on the
-- first message; the unique inbox column lets two processes race for it.
ALTER TABLE api_keys ADD COLUMN inbox text UNIQUE
	CHECK (inbox IS NULL OR inbox ~ '^[a-z0-9_-]{1,64}$');
