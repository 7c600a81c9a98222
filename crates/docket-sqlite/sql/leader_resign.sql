-- leader_resign: owner ?1 gives up leadership (someone else takes over at once).
DELETE FROM leader WHERE name = 'maintenance' AND owner = ?1
