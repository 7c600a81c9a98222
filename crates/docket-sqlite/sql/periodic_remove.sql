-- periodic_remove: removes definition ?1.
DELETE FROM periodic WHERE name = ?1
