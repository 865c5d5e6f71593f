-- name: region_share
-- description: regions by share of step time (mean over the ok runs) per attempt and side,
-- with the mean seconds per run; the largest regions first
WITH ok AS (
    SELECT b.campaign_id, b.attempt_id, b.side, b.repetition, b.step, b.region, b.seconds
    FROM breakdown AS b
    JOIN samples AS s
      ON b.campaign_id = s.campaign_id AND b.attempt_id = s.attempt_id
     AND b.side = s.side AND b.repetition = s.repetition
    WHERE s.status = 'ok'
),
steps AS (
    SELECT campaign_id, attempt_id, side, repetition, step, SUM(seconds) AS step_seconds
    FROM ok
    GROUP BY campaign_id, attempt_id, side, repetition, step
)
SELECT
    ok.campaign_id,
    ok.attempt_id,
    ok.side,
    ok.region,
    AVG(CASE WHEN steps.step_seconds > 0 THEN ok.seconds / steps.step_seconds END) AS share_of_step,
    SUM(ok.seconds) / COUNT(DISTINCT ok.repetition) AS seconds_per_run
FROM ok
JOIN steps
  ON ok.campaign_id = steps.campaign_id AND ok.attempt_id = steps.attempt_id
 AND ok.side = steps.side AND ok.repetition = steps.repetition AND ok.step = steps.step
GROUP BY ok.campaign_id, ok.attempt_id, ok.side, ok.region
ORDER BY ok.campaign_id, ok.attempt_id, ok.side, share_of_step DESC
