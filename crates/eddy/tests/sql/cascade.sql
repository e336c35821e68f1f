SELECT window_start, window_end, MAX(n) AS busiest, COUNT(*) AS users
FROM (
  SELECT `user`, window_start, window_end, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY `user`, window_start, window_end
)
GROUP BY window_start, window_end
