-- name: median_vs_paired
-- description: attempts whose verdict differs between the median rule and the paired rule,
-- with the median improvement and the paired interval of the metric
SELECT
    campaign_id,
    round,
    attempt_id,
    candidate,
    n_pairs,
    improvement_pct,
    median_verdict,
    median_reason,
    paired_estimate,
    paired_low,
    paired_high,
    paired_verdict,
    paired_reason,
    decision,
    verdict
FROM assessments
WHERE median_verdict <> paired_verdict
ORDER BY campaign_id, round, attempt_id
