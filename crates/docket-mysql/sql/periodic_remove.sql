-- periodic_remove: removes a definition. Parameters: name.
DELETE FROM periodic WHERE name = ?
