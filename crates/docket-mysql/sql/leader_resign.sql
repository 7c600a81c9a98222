-- leader_resign: owner ? gives up leadership.
DELETE FROM leader WHERE name = 'maintenance' AND owner = ?
