-- idem_key_digest64.sql: the key's digest as the library computes it:
-- SHA-256 of the tenant's secret hash and the key's bytes; 64 bits of it.
CREATE OR REPLACE FUNCTION idem_key_digest64(p_secret_hash bytea,
    p_key text)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
	SELECT idem_digest64(sha256(p_secret_hash || convert_to(p_key, 'UTF8')))
$$;
