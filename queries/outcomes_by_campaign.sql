-- name: outcomes_by_campaign
-- description: expectation outcomes per campaign: how many declared expectations were confirmed,
-- contradicted, unsupported, unverifiable, consistent or assumed, by target and expected direction
SELECT
    campaign_id,
    target,
    expect,
    outcome,
    COUNT(*) AS expectations,
    COUNT(DISTINCT attempt_id) AS attempts
FROM outcomes
GROUP BY campaign_id, target, expect, outcome
ORDER BY campaign_id, target, expect, outcome
