SELECT window_start, window_end, COUNT(*) AS n, MAX(qty) AS q
FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
WHERE url <> '/home'
GROUP BY window_start, window_end
