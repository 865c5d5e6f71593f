-- name: counters_per_attempt
-- description: mean of each work counter over the ok runs of each side, and candidate / baseline
WITH per_side AS (
    SELECT c.campaign_id, c.attempt_id, c.counter, c.side, AVG(c.value) AS mean_value,
           COUNT(*) AS runs
    FROM counters AS c
    JOIN samples AS s
      ON c.campaign_id = s.campaign_id AND c.attempt_id = s.attempt_id
     AND c.side = s.side AND c.repetition = s.repetition
    WHERE s.status = 'ok'
    GROUP BY c.campaign_id, c.attempt_id, c.counter, c.side
)
SELECT
    b.campaign_id,
    b.attempt_id,
    b.counter,
    b.runs AS baseline_runs,
    b.mean_value AS baseline_mean,
    c.runs AS candidate_runs,
    c.mean_value AS candidate_mean,
    CASE WHEN b.mean_value > 0 THEN c.mean_value / b.mean_value END AS candidate_over_baseline
FROM per_side AS b
JOIN per_side AS c
  ON b.campaign_id = c.campaign_id AND b.attempt_id = c.attempt_id AND b.counter = c.counter
WHERE b.side = 'baseline' AND c.side = 'candidate'
ORDER BY b.campaign_id, b.attempt_id, b.counter
