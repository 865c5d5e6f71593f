-- name: best_attempts
-- description: the best attempt of every campaign (the eligible attempt with the largest median
-- improvement, or paired estimate under the paired decision; ties to the lowest round)
SELECT
    campaign_id,
    round,
    attempt_id,
    candidate,
    decision,
    require_explanation,
    improvement_pct,
    paired_estimate,
    paired_low,
    paired_high,
    explanation,
    verdict
FROM assessments
WHERE best
ORDER BY campaign_id
