-- idem_digest64.sql: the first 64 bits of a SHA-256 digest, big-endian,
-- signed: what the library computes for the advisory lock id.
CREATE OR REPLACE FUNCTION idem_digest64(p_digest bytea)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT ('x' || encode(substr(p_digest, 1, 8), 'hex'))::bit(64)::bigint
$$;
