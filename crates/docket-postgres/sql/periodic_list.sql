-- periodic_list: every periodic definition, by name.
-- No parameters.
SELECT * FROM {{schema}}.periodic ORDER BY name
