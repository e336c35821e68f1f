SELECT a.`user`, a.ts, CAST(b.ts AS TIMESTAMP(3)) AS next_ts, b.url
FROM clicks a, clicks b
WHERE a.`user` = b.`user` AND a.url = '/home' AND b.url <> '/home'
  AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '4' SECOND
