-- leader_update: owner leads until expires_at; the caller checked under the row lock that
-- it leads already or that the term expired. Parameters: owner, expires_at (ms).
UPDATE leader SET owner = ?, expires_at = ? WHERE name = 'maintenance'
