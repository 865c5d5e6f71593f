-- name: attempts_overview
-- description: every stored attempt in round order: candidate, status, runs, declared
-- expectations and whether ingest found an integrity error for it
WITH declared AS (
    SELECT campaign_id, attempt_id, COUNT(*) AS expectations
    FROM expectations
    GROUP BY campaign_id, attempt_id
),
flagged AS (
    SELECT campaign_id, attempt_id, COUNT(*) AS integrity_errors
    FROM integrity
    WHERE attempt_id IS NOT NULL
    GROUP BY campaign_id, attempt_id
)
SELECT
    a.campaign_id,
    a.round,
    a.attempt_id,
    a.candidate,
    a.status,
    a.n_lines AS runs,
    COALESCE(d.expectations, 0) AS expectations,
    COALESCE(f.integrity_errors, 0) AS integrity_errors,
    a.hypothesis
FROM attempts AS a
LEFT JOIN declared AS d ON a.campaign_id = d.campaign_id AND a.attempt_id = d.attempt_id
LEFT JOIN flagged AS f ON a.campaign_id = f.campaign_id AND a.attempt_id = f.attempt_id
ORDER BY a.campaign_id, a.round, a.attempt_id
