-- name: runs_per_side
-- description: runs per campaign, attempt and side: ok and failed runs, median metric of the ok runs
SELECT
    campaign_id,
    attempt_id,
    side,
    SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS ok_runs,
    SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed_runs,
    MEDIAN(CASE WHEN status = 'ok' THEN metric END) AS median_metric
FROM samples
GROUP BY campaign_id, attempt_id, side
ORDER BY campaign_id, attempt_id, side
