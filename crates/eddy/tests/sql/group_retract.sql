-- final
-- A GROUP BY over another's updating result: counts move between groups, groups empty
-- and are deleted, MIN and MAX lose their extremes, DISTINCT counts go back down.
SELECT
  n,
  COUNT(*) AS users,
  MIN(total) AS min_total,
  MAX(total) AS max_total,
  SUM(total) AS sum_total,
  AVG(n) AS avg_n,
  COUNT(DISTINCT top_url) AS top_urls,
  MAX(top_url) FILTER (WHERE total > 10) AS big_top
FROM (
  SELECT `user`, COUNT(*) / 10 AS n, SUM(qty) AS total, MAX(url) AS top_url
  FROM clicks
  GROUP BY `user`
)
GROUP BY n
