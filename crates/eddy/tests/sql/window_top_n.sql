-- The two users with the most clicks in each 10-second window (a window TopN over a
-- window aggregation, with the row number), and each window's first click by time on
-- the TVF itself (a window TopN of one without it).
SELECT window_start, window_end, `user`, clicks, rn
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY clicks DESC, `user`) AS rn
  FROM (
    SELECT window_start, window_end, `user`, COUNT(*) AS clicks
    FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, `user`
  )
)
WHERE rn <= 2
UNION ALL
SELECT window_start, window_end, `user`, CAST(qty AS BIGINT), CAST(0 AS BIGINT)
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY ts ASC, url) AS rn
  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '20' SECOND))
)
WHERE rn = 1
