-- final
-- Left, right and full outer joins (over updating and insert-only inputs, with ON
-- conditions on one side and WHERE after the join), and an inner join of two updating
-- inputs.
SELECT 'left' AS k, c.`user`, c.n, u.city
FROM (SELECT `user`, COUNT(*) AS n FROM clicks GROUP BY `user`) AS c
LEFT JOIN users AS u ON c.`user` = u.name AND u.born > 1992
UNION ALL
SELECT 'right', u.name, CAST(c.qty AS BIGINT), u.city
FROM (SELECT * FROM clicks WHERE qty >= 5) AS c
RIGHT JOIN users AS u ON c.`user` = u.name AND c.url LIKE '/item%'
UNION ALL
SELECT 'full', c.`user`, c.m, u.city
FROM (SELECT `user`, CAST(MAX(qty) AS BIGINT) AS m FROM clicks WHERE url LIKE '/search%' GROUP BY `user`) AS c
FULL JOIN (SELECT * FROM users WHERE born < 1999) AS u ON c.`user` = u.name
WHERE c.m IS NULL OR c.m > 1
UNION ALL
SELECT 'inner', a.`user`, a.n, CAST(b.n AS STRING)
FROM (SELECT `user`, COUNT(*) AS n FROM clicks GROUP BY `user`) AS a
JOIN (SELECT `user`, COUNT(*) AS n FROM clicks WHERE qty > 2 GROUP BY `user`) AS b
ON a.`user` = b.`user` AND a.n > b.n + 10
