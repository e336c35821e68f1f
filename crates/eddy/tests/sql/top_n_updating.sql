-- final
-- Top-N over inputs that retract (Flink's RetractStrategy): the two users with the most
-- clicks of each url, with their row number, over a GROUP BY that updates; and the most
-- expensive product of each shelf, over CDC changes that update and delete.
SELECT url AS k, `user` AS v, n, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY url ORDER BY n DESC, `user`) AS rn
  FROM (SELECT url, `user`, COUNT(*) AS n FROM clicks GROUP BY url, `user`)
)
WHERE rn <= 2
UNION ALL
SELECT shelf, name, CAST(price * 100 AS BIGINT), CAST(1 AS BIGINT) FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY shelf ORDER BY price DESC, name) AS rn
  FROM products_debezium
)
WHERE rn = 1
