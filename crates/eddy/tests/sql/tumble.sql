SELECT `user`, window_start, window_end,
  COUNT(*) AS n, SUM(qty) AS q, MIN(amount) AS lo, MAX(amount) AS hi, AVG(amount) AS avg_amount, AVG(qty) AS avg_qty,
  COUNT(DISTINCT url) AS urls, SUM(qty) FILTER (WHERE amount > 5) AS big_qty, COUNT(amount) AS priced
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY `user`, window_start, window_end
