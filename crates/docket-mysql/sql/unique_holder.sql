-- unique_holder: the unfinished job holding unique key ?, if any.
SELECT id FROM jobs WHERE unique_active = ?
