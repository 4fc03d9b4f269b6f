-- Reverts 0003.
DROP TABLE IF EXISTS herald.expo_tickets;
