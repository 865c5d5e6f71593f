-- name: passes_not_explained
-- description: attempts whose final verdict is PASS although their mechanism is not explained
-- (not declared, contradicted, unsupported or unverifiable), with the outcomes that say why
WITH why AS (
    SELECT campaign_id, attempt_id,
           SUM(CASE WHEN outcome = 'contradicted' THEN 1 ELSE 0 END) AS contradicted,
           SUM(CASE WHEN outcome = 'unsupported' THEN 1 ELSE 0 END) AS unsupported,
           SUM(CASE WHEN outcome = 'unverifiable' THEN 1 ELSE 0 END) AS unverifiable
    FROM outcomes
    GROUP BY campaign_id, attempt_id
)
SELECT
    a.campaign_id,
    a.round,
    a.attempt_id,
    a.candidate,
    a.decision,
    a.improvement_pct,
    a.paired_estimate,
    a.explanation,
    COALESCE(w.contradicted, 0) AS contradicted,
    COALESCE(w.unsupported, 0) AS unsupported,
    COALESCE(w.unverifiable, 0) AS unverifiable
FROM assessments AS a
LEFT JOIN why AS w ON a.campaign_id = w.campaign_id AND a.attempt_id = w.attempt_id
WHERE a.verdict = 'PASS' AND a.explanation <> 'explained'
ORDER BY a.campaign_id, a.round, a.attempt_id
