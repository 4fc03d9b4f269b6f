-- Grants, last: EXECUTE on every function above is revoked from PUBLIC and granted by role
-- (herald.apply_grants in 02_security.sql), so a function added to any file is callable only
-- by the roles that function lists allow.
SELECT herald.apply_grants();
