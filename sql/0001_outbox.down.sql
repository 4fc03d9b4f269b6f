-- Reverts 0001: drops everything Herald owns. Destroys queued jobs and history.
DROP SCHEMA IF EXISTS herald CASCADE;
