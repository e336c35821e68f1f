-- final
-- The three largest amounts of each user with their row number (ties by arrival), and
-- the best url per user without it.
SELECT `user`, url, amount, rn
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY amount DESC, qty) AS rn
  FROM clicks
  WHERE amount IS NOT NULL
)
WHERE rn <= 3
UNION ALL
SELECT `user`, url, CAST(NULL AS DECIMAL(10, 2)), CAST(0 AS BIGINT)
FROM (
  SELECT `user`, url, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY qty DESC) AS r
  FROM clicks
)
WHERE r = 1
