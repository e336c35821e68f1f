SELECT L.`user`, L.window_start, L.n, R.q
FROM (
  SELECT `user`, window_start, window_end, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY `user`, window_start, window_end
) L
JOIN (
  SELECT `user`, window_start, window_end, SUM(qty) AS q
  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  WHERE url <> '/home'
  GROUP BY `user`, window_start, window_end
) R
ON L.`user` = R.`user` AND L.window_start = R.window_start AND L.window_end = R.window_end
