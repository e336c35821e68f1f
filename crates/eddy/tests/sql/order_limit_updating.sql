-- final
-- ORDER BY … LIMIT over a GROUP BY whose sums change: the three urls with the largest
-- totals (a row that falls out of the three is deleted, the one that moves up inserted).
SELECT * FROM (
  SELECT url, SUM(amount) AS total FROM clicks GROUP BY url
)
ORDER BY total DESC, url
LIMIT 3
