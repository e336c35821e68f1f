-- Outer interval joins (append-only in Flink): each /home click with the non-/home clicks
-- of its user in the next 4 seconds, or alone once none can come (LEFT); and, FULL, the
-- /CHECKOUT clicks with a /cart click of the user 0 to 3 seconds before, padded on
-- whichever side found nothing.
SELECT 'left', a.`user`, CAST(a.ts AS TIMESTAMP(3)), CAST(b.ts AS TIMESTAMP(3)), b.url
FROM clicks a LEFT JOIN clicks b
  ON a.`user` = b.`user` AND b.url <> '/home'
  AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '4' SECOND
WHERE a.url = '/home'
UNION ALL
SELECT 'full', COALESCE(c.`user`, k.`user`), CAST(c.ts AS TIMESTAMP(3)), CAST(k.ts AS TIMESTAMP(3)), k.url
FROM (SELECT * FROM clicks WHERE url LIKE '/cart%') c
FULL JOIN (SELECT * FROM clicks WHERE url = '/CHECKOUT') k
  ON c.`user` = k.`user` AND k.ts BETWEEN c.ts AND c.ts + INTERVAL '3' SECOND
