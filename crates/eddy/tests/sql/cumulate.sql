SELECT `user`, window_start, window_end, COUNT(*) AS n, SUM(amount) AS spent
FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))
GROUP BY `user`, window_start, window_end
