-- A processing-time lookup join against a file table (declared with the legacy options,
-- as Flink's lookup source of files is), inner and left (users without a row in
-- user_lookup.csv keep NULLs), with a condition beyond the key.
CREATE TABLE user_lookup (
  name STRING,
  city STRING,
  born INT
) WITH (
  'connector.type' = 'filesystem',
  'connector.path' = '${DATA}/user_lookup.csv',
  'format.type' = 'csv'
);

SELECT c.`user`, c.url, u.city, u.born
FROM (SELECT *, PROCTIME() AS pt FROM clicks) AS c
LEFT JOIN user_lookup FOR SYSTEM_TIME AS OF c.pt AS u
ON c.`user` = u.name AND u.born > 1991
WHERE c.qty >= 4
UNION ALL
SELECT c.`user`, 'inner', u.city, u.born
FROM (SELECT *, PROCTIME() AS pt FROM clicks) AS c
JOIN user_lookup FOR SYSTEM_TIME AS OF c.pt AS u
ON TRIM(c.`user`) = u.name
WHERE c.qty = 1
