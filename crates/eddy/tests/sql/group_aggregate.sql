-- final
-- An unbounded GROUP BY over an insert-only input: every call, FILTER, DISTINCT, HAVING.
SELECT
  `user`,
  COUNT(*) AS n,
  COUNT(amount) AS priced,
  SUM(qty) AS qty_sum,
  SUM(amount) AS amount_sum,
  MIN(url) AS first_url,
  MAX(amount) AS top,
  AVG(qty) AS avg_qty,
  AVG(amount) AS avg_amount,
  COUNT(DISTINCT url) AS urls,
  SUM(DISTINCT qty) AS distinct_qty,
  COUNT(*) FILTER (WHERE qty >= 3) AS big,
  MAX(ts) AS last_ts
FROM clicks
GROUP BY `user`
HAVING COUNT(*) > 1
