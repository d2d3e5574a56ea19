-- duckdb_metrics.sql: the metric views of epistore (docs/metrics.md §H), hand-written for
-- DuckDB (>= 1.3) over the RAW package files of a population. This is the baseline
-- that benches/bench.py times against epistore, and an independent cross-check of
-- queries/*.sql: it is written from the contracts (docs/format.md and docs/metrics.md),
-- not copied from the shipped views.
--
-- Input: a root folder searched recursively; a package is a directory holding
-- manifest.json (the outermost one wins: a manifest.json below another package's
-- directory is an artifact of that package). Traces are traces/<name>.jsonl inside the
-- package directory. Archives (.tar, .tar.gz, .tar.zst) are not read here.
--
-- Parameter: the root folder, absolute, without a trailing slash:
--     SET VARIABLE root = '/tmp/epistore-bench/10000/population';
-- then run this file, e.g. with the DuckDB CLI:
--     duckdb bench.duckdb -cmd "SET VARIABLE root = '/abs/path'" -f benches/duckdb_metrics.sql
-- (bench.py sets the variable itself and runs the sections one by one).
--
-- Sections (a section ends where the next `-- @section` begins):
--   list         glob the tree: packages and the trace files each one has;
--   reader_text  table macros src_<file>() reading the files with read_text and
--                parsing them with from_json (one JSON document / one per line);
--   reader_json  the same macros with read_json(..., filename = true): the reader the
--                issue asked for. DuckDB's read_json has a large per-file cost on many
--                small files, so bench.py times both readers (each in a fresh
--                database). Run as a whole, this file defines reader_json last, so
--                read_json is the one used;
--   load         typed tables from the src_*() macros (only the fields the metrics
--                need; the field defaults of docs/format.md §5 applied while reading);
--   derive       derived state of docs/format.md §6: observed/bound/final revision, freshness,
--                evidence posture (materialised, as epistore derives them at ingest);
--   views        the metric views (cheap: CREATE VIEW);
--   suite        SELECT * FROM each docs/metrics.md §H view (cell keys first, key order).
-- bench.py times list + reader + load + derive as "DuckDB load" and suite as "suite".
--
-- Differences from epistore that do not change the metrics on valid packages: nothing
-- is validated (an invalid package is read as far as DuckDB can, or fails the load),
-- episodes are keyed by package directory (epistore keys by the blake3 episode_id, so
-- two byte-identical packages are one episode there and two here), and unknown fields
-- are dropped.
--
-- Contract readings shared with epistore where the contract is loose:
--   * a requirement is its id: an id listed twice in the manifest counts once;
--   * a check without `actor` is no agent check; one without `result` counts as run;
--   * a location is split at its last colon only when what follows is `N` or `N-M`
--     (a reversed range `M-N` is read as `N-M`); otherwise it is a path (whole file);
--   * verifier_stats has no row for a verifier with no verdict on a known candidate;
--     verifier_pairs has a row for every pair of verifiers that have such verdicts.

-- @section list

-- Every file the metrics read, found by listing the tree (not by reading it): a trace
-- file that is present but empty yields no records, so "has trace" comes from here.
CREATE OR REPLACE TABLE listing AS
SELECT file
FROM glob(getvariable('root') || '/**')
WHERE suffix(file, '/manifest.json')
   OR suffix(file, '/outcome.json')
   OR regexp_matches(file, '/traces/(actions|tools|context|verification|attribution|interventions|entropy)\.jsonl$');

-- Packages: directories holding manifest.json that do not lie inside another package.
CREATE OR REPLACE TABLE packages AS
WITH manifest_dirs AS (
    SELECT left(file, length(file) - length('/manifest.json')) AS dir
    FROM listing
    WHERE suffix(file, '/manifest.json')
),
ancestors AS (
    SELECT dir,
           unnest(list_transform(range(1, len(string_split(dir, '/'))),
                                 lambda i: array_to_string(string_split(dir, '/')[1:i], '/'))) AS ancestor
    FROM manifest_dirs
),
nested AS (
    SELECT DISTINCT a.dir FROM ancestors a JOIN manifest_dirs m ON m.dir = a.ancestor
)
SELECT row_number() OVER (ORDER BY dir) AS pkg, dir
FROM manifest_dirs
WHERE dir NOT IN (SELECT dir FROM nested);

CREATE OR REPLACE TABLE trace_files AS
SELECT p.pkg, t.trace, t.file
FROM (
    SELECT file,
           regexp_extract(file, '^(.*)/traces/([a-z]+)\.jsonl$', 1) AS dir,
           regexp_extract(file, '^(.*)/traces/([a-z]+)\.jsonl$', 2) AS trace
    FROM listing
    WHERE regexp_matches(file, '/traces/[a-z]+\.jsonl$')
) t
JOIN packages p ON p.dir = t.dir;

CREATE OR REPLACE TABLE outcome_files AS
SELECT p.pkg, l.file
FROM listing l
JOIN packages p ON p.dir = left(l.file, length(l.file) - length('/outcome.json'))
WHERE suffix(l.file, '/outcome.json');

-- File lists for the readers. '/dev/null' keeps a list non-empty (read_json refuses an
-- empty list or a glob matching nothing) and contributes no record.
SET VARIABLE manifest_files = (SELECT list(dir || '/manifest.json') FROM packages);
SET VARIABLE outcome_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM outcome_files);
SET VARIABLE actions_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'actions');
SET VARIABLE tools_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'tools');
SET VARIABLE context_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'context');
SET VARIABLE verification_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'verification');
SET VARIABLE attribution_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'attribution');
SET VARIABLE interventions_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'interventions');
SET VARIABLE entropy_files = (SELECT coalesce(list(file), []) || ['/dev/null'] FROM trace_files WHERE trace = 'entropy');

-- @section reader_text

-- The non-blank lines of JSON Lines files (a line is split on \n; a \r before it and
-- lines of only whitespace are dropped, as docs/format.md §2 says).
CREATE OR REPLACE MACRO jsonl_lines(files) AS TABLE
SELECT filename, line
FROM (SELECT filename, unnest(string_split(content, chr(10))) AS line FROM read_text(files))
WHERE trim(line, ' ' || chr(9) || chr(13)) <> '';

CREATE OR REPLACE MACRO src_manifest() AS TABLE
SELECT unnest(from_json(content, '{"episode": "VARCHAR", "model": {"name": "VARCHAR"},
        "harness": {"level": "VARCHAR"}, "task": {"id": "VARCHAR", "cluster": "VARCHAR"},
        "requirements": [{"id": "VARCHAR"}], "seed": "BIGINT", "attempt": "BIGINT",
        "trace_complete": "BOOLEAN"}')), filename
FROM read_text(getvariable('manifest_files'));

CREATE OR REPLACE MACRO src_outcome() AS TABLE
SELECT unnest(from_json(content, '{"label": "VARCHAR", "correct": "BOOLEAN", "admission": "VARCHAR",
        "stop_reason": "VARCHAR", "start_state": "VARCHAR", "score": "DOUBLE",
        "fault_locations": "JSON"}')), filename
FROM read_text(getvariable('outcome_files'))
WHERE trim(content) <> '';

CREATE OR REPLACE MACRO src_actions() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "kind": "VARCHAR", "mutates": "BOOLEAN", "ok": "BOOLEAN"}')), filename
FROM jsonl_lines(getvariable('actions_files'));

CREATE OR REPLACE MACRO src_tools() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "exit_code": "BIGINT", "timed_out": "BOOLEAN",
        "failure_type": "VARCHAR", "recovered_by": "BIGINT"}')), filename
FROM jsonl_lines(getvariable('tools_files'));

CREATE OR REPLACE MACRO src_context() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "used": "BOOLEAN"}')), filename
FROM jsonl_lines(getvariable('context_files'));

CREATE OR REPLACE MACRO src_verification() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "check_id": "VARCHAR", "actor": "VARCHAR",
        "method": "VARCHAR", "result": "VARCHAR", "requirements": ["VARCHAR"], "revision": "BIGINT",
        "verifier": "VARCHAR", "verdict": "VARCHAR", "score": "DOUBLE"}')), filename
FROM jsonl_lines(getvariable('verification_files'));

CREATE OR REPLACE MACRO src_attribution() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "failure_seq": "BIGINT", "location": "VARCHAR", "rank": "BIGINT"}')), filename
FROM jsonl_lines(getvariable('attribution_files'));

CREATE OR REPLACE MACRO src_interventions() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "missing_responsibility": "VARCHAR"}')), filename
FROM jsonl_lines(getvariable('interventions_files'));

CREATE OR REPLACE MACRO src_entropy() AS TABLE
SELECT unnest(from_json(line, '{"seq": "BIGINT", "severity": "BIGINT", "phase": "VARCHAR"}')), filename
FROM jsonl_lines(getvariable('entropy_files'));

-- @section reader_json

-- The same macros with read_json: JSON documents (manifest, outcome) with
-- format 'auto', traces as newline-delimited JSON (blank lines are skipped).
CREATE OR REPLACE MACRO src_manifest() AS TABLE
SELECT * FROM read_json(getvariable('manifest_files'), format = 'auto', records = true, filename = true,
        columns = {episode: 'VARCHAR', model: 'STRUCT(name VARCHAR)', harness: 'STRUCT(level VARCHAR)',
                   task: 'STRUCT(id VARCHAR, "cluster" VARCHAR)', requirements: 'STRUCT(id VARCHAR)[]',
                   seed: 'BIGINT', attempt: 'BIGINT', trace_complete: 'BOOLEAN'});

CREATE OR REPLACE MACRO src_outcome() AS TABLE
SELECT * FROM read_json(getvariable('outcome_files'), format = 'auto', records = true, filename = true,
        columns = {label: 'VARCHAR', correct: 'BOOLEAN', admission: 'VARCHAR', stop_reason: 'VARCHAR',
                   start_state: 'VARCHAR', score: 'DOUBLE', fault_locations: 'JSON'});

CREATE OR REPLACE MACRO src_actions() AS TABLE
SELECT * FROM read_json(getvariable('actions_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', kind: 'VARCHAR', mutates: 'BOOLEAN', ok: 'BOOLEAN'});

CREATE OR REPLACE MACRO src_tools() AS TABLE
SELECT * FROM read_json(getvariable('tools_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', exit_code: 'BIGINT', timed_out: 'BOOLEAN', failure_type: 'VARCHAR',
                   recovered_by: 'BIGINT'});

CREATE OR REPLACE MACRO src_context() AS TABLE
SELECT * FROM read_json(getvariable('context_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', used: 'BOOLEAN'});

CREATE OR REPLACE MACRO src_verification() AS TABLE
SELECT * FROM read_json(getvariable('verification_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', check_id: 'VARCHAR', actor: 'VARCHAR', method: 'VARCHAR',
                   result: 'VARCHAR', requirements: 'VARCHAR[]', revision: 'BIGINT',
                   verifier: 'VARCHAR', verdict: 'VARCHAR', score: 'DOUBLE'});

CREATE OR REPLACE MACRO src_attribution() AS TABLE
SELECT * FROM read_json(getvariable('attribution_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', failure_seq: 'BIGINT', location: 'VARCHAR', rank: 'BIGINT'});

CREATE OR REPLACE MACRO src_interventions() AS TABLE
SELECT * FROM read_json(getvariable('interventions_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', missing_responsibility: 'VARCHAR'});

CREATE OR REPLACE MACRO src_entropy() AS TABLE
SELECT * FROM read_json(getvariable('entropy_files'), format = 'newline_delimited', filename = true,
        columns = {seq: 'BIGINT', severity: 'BIGINT', phase: 'VARCHAR'});

-- @section load

CREATE OR REPLACE TABLE manifests AS
SELECT p.pkg,
       m.episode,
       m.model.name AS model,
       m.harness.level AS harness_level,
       m.task.id AS task,
       coalesce(m.task."cluster", m.task.id) AS "cluster",
       m.seed,
       coalesce(m.attempt, 1) AS attempt,
       coalesce(m.trace_complete, true) AS trace_complete,
       -- a requirement is its id (listed twice, it counts once)
       list_distinct(list_transform(coalesce(m.requirements, []), lambda r: r.id)) AS requirements
FROM src_manifest() m
JOIN packages p ON m.filename = p.dir || '/manifest.json';

CREATE OR REPLACE TABLE outcomes AS
SELECT p.pkg, o.label, o.correct, o.admission,
       coalesce(o.stop_reason, 'completed') AS stop_reason,
       o.start_state, o.score, o.fault_locations
FROM src_outcome() o
JOIN packages p ON o.filename = p.dir || '/outcome.json';

-- Ground truth for localisation: entries are {"location": ...} objects or bare strings.
CREATE OR REPLACE TABLE fault_locations AS
SELECT pkg, location
FROM (
    SELECT pkg, CASE WHEN json_type(e) = 'VARCHAR' THEN e ->> '$' ELSE e ->> '$.location' END AS location
    FROM (
        SELECT pkg, unnest(json_extract(fault_locations, '$[*]')) AS e
        FROM outcomes
        WHERE json_type(fault_locations) = 'ARRAY'
    )
)
WHERE location IS NOT NULL;

-- actions: mutates defaults to true for edit/create/delete (false otherwise, also
-- without kind); ok defaults to true.
CREATE OR REPLACE TABLE actions AS
SELECT f.pkg, a.seq, a.kind,
       coalesce(a.mutates, coalesce(a.kind IN ('edit', 'create', 'delete'), false)) AS mutates,
       coalesce(a.ok, true) AS ok
FROM src_actions() a
JOIN trace_files f ON f.file = a.filename;

-- tools: the written failure_type is the truth; absent, it is derived (docs/format.md §5.3).
CREATE OR REPLACE TABLE tools AS
SELECT f.pkg, t.seq,
       coalesce(t.failure_type,
                CASE WHEN coalesce(t.timed_out, false) THEN 'timeout'
                     WHEN t.exit_code IS NOT NULL AND t.exit_code <> 0 THEN 'nonzero_exit'
                     ELSE 'none' END) AS failure_type,
       t.recovered_by
FROM src_tools() t
JOIN trace_files f ON f.file = t.filename;

CREATE OR REPLACE TABLE context AS
SELECT f.pkg, c.seq, coalesce(c.used, true) AS used
FROM src_context() c
JOIN trace_files f ON f.file = c.filename;

CREATE OR REPLACE TABLE verification AS
SELECT f.pkg, v.seq, v.check_id, v.actor, v.method, v.result,
       coalesce(v.requirements, []) AS requirements,
       v.revision AS recorded_revision, v.verifier, v.verdict, v.score
FROM src_verification() v
JOIN trace_files f ON f.file = v.filename;

CREATE OR REPLACE TABLE attribution AS
SELECT f.pkg, a.seq, a.failure_seq, a.location, a.rank
FROM src_attribution() a
JOIN trace_files f ON f.file = a.filename;

-- missing_responsibility: null or absent means "not a missing-harness intervention".
CREATE OR REPLACE TABLE interventions AS
SELECT f.pkg, i.seq, i.missing_responsibility
FROM src_interventions() i
JOIN trace_files f ON f.file = i.filename;

-- phase defaults to post.
CREATE OR REPLACE TABLE entropy AS
SELECT f.pkg, e.seq, e.severity, coalesce(e.phase, 'post') AS phase
FROM src_entropy() e
JOIN trace_files f ON f.file = e.filename;

-- @section derive

-- Observed revision (docs/format.md §6.1): the revision at seq s is the number of ok mutating
-- actions with a smaller seq. `revision_after` numbers the mutations in seq order, so
-- the observed revision at s is revision_after of the last mutation before s (0 if none).
CREATE OR REPLACE TABLE mutations AS
SELECT pkg, seq, row_number() OVER (PARTITION BY pkg ORDER BY seq) AS revision_after
FROM actions
WHERE mutates AND ok;

-- Final revision: the number of ok mutating actions (0 without an actions trace).
CREATE OR REPLACE TABLE finals AS
SELECT p.pkg, coalesce(m.n, 0) AS final_revision
FROM packages p
LEFT JOIN (SELECT pkg, count(*) AS n FROM mutations GROUP BY pkg) m ON m.pkg = p.pkg;

-- Checks with their bound revision: the recorded `revision`, else the observed
-- revision at the check's seq; freshness against the final revision.
CREATE OR REPLACE TABLE checks AS
SELECT v.pkg, v.seq, v.check_id, v.actor, v.method, v.result, v.requirements,
       v.verifier, v.verdict, v.score, v.recorded_revision,
       coalesce(m.revision_after, 0) AS observed_revision,
       coalesce(v.recorded_revision, coalesce(m.revision_after, 0)) AS revision,
       fi.final_revision,
       CASE WHEN coalesce(v.recorded_revision, coalesce(m.revision_after, 0)) = fi.final_revision
            THEN 'current' ELSE 'stale' END AS freshness
FROM verification v
ASOF LEFT JOIN mutations m ON m.pkg = v.pkg AND v.seq > m.seq
JOIN finals fi ON fi.pkg = v.pkg;

-- One row per episode: identity, outcome, final revision, posture, trace presence.
CREATE OR REPLACE TABLE episodes AS
WITH agent AS (
    SELECT pkg,
           count(*) AS agent_checks,
           coalesce(bool_or(revision = final_revision AND result IN ('fail', 'timeout', 'error')), false) AS failed_on_final,
           coalesce(bool_or(revision = final_revision AND result = 'pass'), false) AS passed_on_final,
           coalesce(bool_or(revision < final_revision), false) AS checked_earlier
    FROM checks
    WHERE actor = 'agent'
    GROUP BY pkg
),
present AS (
    SELECT pkg,
           bool_or(trace = 'actions') AS has_actions,
           bool_or(trace = 'tools') AS has_tools,
           bool_or(trace = 'context') AS has_context,
           bool_or(trace = 'verification') AS has_verification,
           bool_or(trace = 'attribution') AS has_attribution,
           bool_or(trace = 'interventions') AS has_interventions,
           bool_or(trace = 'entropy') AS has_entropy
    FROM trace_files
    GROUP BY pkg
)
SELECT p.pkg, p.dir, m.episode, m.model, m.harness_level, m.task, m."cluster", m.seed, m.attempt,
       m.trace_complete, m.requirements,
       o.label, o.correct, o.admission, o.stop_reason, o.start_state, o.score,
       fi.final_revision,
       -- evidence posture, docs/format.md §6.3: the first rule that holds
       CASE WHEN NOT m.trace_complete THEN 'unknown'
            WHEN coalesce(a.failed_on_final, false) THEN 'failure'
            WHEN fi.final_revision > 0 AND NOT coalesce(a.passed_on_final, false)
                 AND coalesce(a.checked_earlier, false) THEN 'stale'
            WHEN coalesce(a.agent_checks, 0) = 0 THEN 'gap'
            WHEN a.passed_on_final THEN 'current'
            ELSE 'unknown' END AS posture,
       coalesce(t.has_actions, false) AS has_actions,
       coalesce(t.has_tools, false) AS has_tools,
       coalesce(t.has_context, false) AS has_context,
       coalesce(t.has_verification, false) AS has_verification,
       coalesce(t.has_attribution, false) AS has_attribution,
       coalesce(t.has_interventions, false) AS has_interventions,
       coalesce(t.has_entropy, false) AS has_entropy
FROM packages p
JOIN manifests m ON m.pkg = p.pkg
JOIN outcomes o ON o.pkg = p.pkg
JOIN finals fi ON fi.pkg = p.pkg
LEFT JOIN agent a ON a.pkg = p.pkg
LEFT JOIN present t ON t.pkg = p.pkg;

-- @section views

-- A ratio of pooled counts; NULL when the denominator is 0.
CREATE OR REPLACE MACRO ratio(num, den) AS CASE WHEN den = 0 THEN NULL ELSE CAST(num AS DOUBLE) / den END;
-- 1 when the condition holds, else 0 (also when it is NULL: unknown never counts).
CREATE OR REPLACE MACRO flag(b) AS CASE WHEN b THEN 1 ELSE 0 END;

-- Cell keys of every episode (every per-cell view has a row per cell).
CREATE OR REPLACE VIEW cells AS
SELECT DISTINCT model, harness_level, task FROM episodes;

-- Per-episode numerators and denominators of docs/metrics.md §A, §B, §C (pooled below).
CREATE OR REPLACE VIEW episode_counts AS
WITH
agent_checks AS (
    SELECT * FROM checks WHERE actor = 'agent'
),
check_counts AS (
    SELECT pkg,
           count(*) AS agent_checks,
           count(*) FILTER (WHERE revision < final_revision) AS stale_checks,
           min(seq) FILTER (WHERE result = 'pass') AS first_pass_seq
    FROM agent_checks
    GROUP BY pkg
),
-- requirements (manifest ids) covered by a passing agent check on the final revision
covered AS (
    SELECT e.pkg,
           len(list_filter(e.requirements,
                           lambda r: list_contains(c.ids, r))) AS requirements_verified
    FROM episodes e
    JOIN (SELECT pkg, flatten(list(requirements)) AS ids
          FROM agent_checks
          WHERE result = 'pass' AND revision = final_revision
          GROUP BY pkg) c ON c.pkg = e.pkg
),
failed_obs AS (
    SELECT pkg, seq FROM tools WHERE failure_type <> 'none'
    UNION ALL
    SELECT pkg, seq FROM agent_checks WHERE result IN ('fail', 'timeout', 'error')
),
attributed AS (
    SELECT f.pkg,
           count(*) AS failed_observations,
           count(*) FILTER (WHERE EXISTS (SELECT 1 FROM attribution a
                                          WHERE a.pkg = f.pkg AND a.failure_seq = f.seq)) AS attributed
    FROM failed_obs f
    GROUP BY f.pkg
),
tool_counts AS (
    SELECT pkg, count(*) AS failed_tools, count(recovered_by) AS recovered_tools
    FROM tools WHERE failure_type <> 'none' GROUP BY pkg
),
intervention_counts AS (
    SELECT pkg, count(missing_responsibility) AS missing_harness
    FROM interventions GROUP BY pkg
),
entropy_sums AS (
    SELECT pkg,
           coalesce(sum(severity) FILTER (WHERE phase = 'post'), 0)
         - coalesce(sum(severity) FILTER (WHERE phase = 'pre'), 0) AS delta
    FROM entropy GROUP BY pkg
),
context_counts AS (
    SELECT pkg, count(*) AS records, count(*) FILTER (WHERE used) AS used
    FROM context GROUP BY pkg
),
verify_then_edit AS (
    SELECT c.pkg
    FROM check_counts c
    WHERE c.first_pass_seq IS NOT NULL
      AND EXISTS (SELECT 1 FROM mutations m WHERE m.pkg = c.pkg AND m.seq > c.first_pass_seq)
)
SELECT e.pkg, e.model, e.harness_level, e.task,
       flag(e.label = 'autonomous_verified_success') AS avs,
       CASE WHEN e.has_interventions THEN coalesce(i.missing_harness, 0) END AS missing_harness,
       CASE WHEN e.has_interventions THEN flag(coalesce(i.missing_harness, 0) > 0) END AS missing_harness_incident,
       coalesce(cv.requirements_verified, 0) AS requirements_verified,
       len(e.requirements) AS requirements_total,
       coalesce(af.attributed, 0) AS attributed_failures,
       coalesce(af.failed_observations, 0) AS failed_observations,
       coalesce(tc.recovered_tools, 0) AS recovered_tools,
       coalesce(tc.failed_tools, 0) AS failed_tools,
       CASE WHEN e.has_entropy THEN coalesce(en.delta, 0) END AS entropy_delta,
       coalesce(cx.used, 0) AS context_used,
       coalesce(cx.records, 0) AS context_records,
       coalesce(ck.stale_checks, 0) AS stale_agent_checks,
       coalesce(ck.agent_checks, 0) AS agent_checks,
       flag(ck.first_pass_seq IS NOT NULL) AS with_passing_check,
       flag(vte.pkg IS NOT NULL) AS verify_then_edit,
       flag(e.correct IS NOT NULL) AS correct_known,
       flag(e.correct IS NOT NULL AND e.admission = 'accepted') AS accepted_known,
       flag(e.correct IS TRUE AND e.admission = 'accepted') AS accepted_correct,
       flag(e.correct IS FALSE AND e.admission = 'accepted') AS accepted_wrong,
       flag(e.stop_reason = 'budget_exhausted') AS budget_exhausted,
       flag(e.start_state = 'wrong' AND e.correct IS NOT NULL) AS wrong_start_known,
       flag(e.start_state = 'wrong' AND e.correct IS TRUE) AS repaired,
       flag(e.start_state = 'correct' AND e.correct IS NOT NULL) AS correct_start_known,
       flag(e.start_state = 'correct' AND e.correct IS FALSE) AS regressed,
       e.score
FROM episodes e
LEFT JOIN check_counts ck ON ck.pkg = e.pkg
LEFT JOIN covered cv ON cv.pkg = e.pkg
LEFT JOIN attributed af ON af.pkg = e.pkg
LEFT JOIN tool_counts tc ON tc.pkg = e.pkg
LEFT JOIN intervention_counts i ON i.pkg = e.pkg
LEFT JOIN entropy_sums en ON en.pkg = e.pkg
LEFT JOIN context_counts cx ON cx.pkg = e.pkg
LEFT JOIN verify_then_edit vte ON vte.pkg = e.pkg;

CREATE OR REPLACE VIEW cell_metrics AS
SELECT model, harness_level, task,
       count(*) AS episodes,
       ratio(sum(avs), count(*)) AS avs_rate,
       -- episodes without an interventions trace are left out (missing_harness NULL)
       ratio(coalesce(sum(missing_harness), 0), count(missing_harness)) AS m_hir,
       ratio(coalesce(sum(missing_harness_incident), 0), count(missing_harness_incident)) AS m_hir_incidence,
       ratio(sum(requirements_verified), sum(requirements_total)) AS verification_autonomy,
       ratio(sum(attributed_failures), sum(failed_observations)) AS attribution_completeness,
       ratio(sum(recovered_tools), sum(failed_tools)) AS tool_recovery,
       ratio(coalesce(sum(entropy_delta), 0), count(entropy_delta)) AS entropy_delta,
       ratio(sum(context_used), sum(context_records)) AS context_use,
       ratio(sum(stale_agent_checks), sum(agent_checks)) AS stale_check_rate,
       ratio(sum(verify_then_edit), sum(with_passing_check)) AS verify_then_edit_rate,
       ratio(sum(accepted_known), sum(correct_known)) AS coverage,
       ratio(sum(accepted_wrong), sum(accepted_known)) AS selective_risk,
       ratio(sum(accepted_correct), sum(correct_known)) AS sound_completion,
       ratio(sum(accepted_wrong), sum(correct_known)) AS unsafe_completion,
       ratio(sum(budget_exhausted), count(*)) AS budget_exhaustion,
       ratio(sum(repaired), sum(wrong_start_known)) AS repair_from_wrong,
       ratio(sum(regressed), sum(correct_start_known)) AS regression_from_correct,
       ratio(coalesce(sum(score), 0), count(score)) AS mean_score
FROM episode_counts
GROUP BY model, harness_level, task
ORDER BY model, harness_level, task;

CREATE OR REPLACE VIEW label_shares AS
WITH labels(label, position) AS (
    VALUES ('autonomous_verified_success', 1), ('assisted_verified_success', 2),
           ('unverified_success', 3), ('failed', 4), ('unsafe_invalid', 5)
)
SELECT c.model, c.harness_level, c.task, l.label,
       count(e.pkg) AS episodes,
       ratio(count(e.pkg), max(t.total)) AS share
FROM cells c
CROSS JOIN labels l
JOIN (SELECT model, harness_level, task, count(*) AS total FROM episodes GROUP BY ALL) t
  USING (model, harness_level, task)
LEFT JOIN episodes e
  ON e.model = c.model AND e.harness_level = c.harness_level AND e.task = c.task AND e.label = l.label
GROUP BY c.model, c.harness_level, c.task, l.label, l.position
ORDER BY c.model, c.harness_level, c.task, l.position;

CREATE OR REPLACE VIEW posture_shares AS
WITH postures(posture, position) AS (
    VALUES ('current', 1), ('stale', 2), ('failure', 3), ('gap', 4), ('unknown', 5)
)
SELECT c.model, c.harness_level, c.task, l.posture,
       count(e.pkg) AS episodes,
       ratio(count(e.pkg), max(t.total)) AS share
FROM cells c
CROSS JOIN postures l
JOIN (SELECT model, harness_level, task, count(*) AS total FROM episodes GROUP BY ALL) t
  USING (model, harness_level, task)
LEFT JOIN episodes e
  ON e.model = c.model AND e.harness_level = c.harness_level AND e.task = c.task AND e.posture = l.posture
GROUP BY c.model, c.harness_level, c.task, l.posture, l.position
ORDER BY c.model, c.harness_level, c.task, l.position;

-- D. Oracle verdicts: evaluator oracle records with result pass or fail; of several on
-- one (episode, bound revision) the highest seq wins. y = 1 correct, 0 wrong.
CREATE OR REPLACE VIEW oracle AS
SELECT e.model, e.harness_level, e.task, c.pkg, c.revision,
       arg_max(CASE WHEN c.result = 'pass' THEN 1 ELSE 0 END, c.seq) AS y
FROM checks c JOIN episodes e ON e.pkg = c.pkg
WHERE c.actor = 'evaluator' AND c.method = 'oracle' AND c.result IN ('pass', 'fail')
GROUP BY e.model, e.harness_level, e.task, c.pkg, c.revision;

-- Y(k, t): the verdict at the highest evaluated revision s <= t, for t from 0 to the
-- cell's largest evaluated revision; episodes with no evaluated revision <= t are left out.
CREATE OR REPLACE VIEW revision_correctness AS
WITH
span AS (
    SELECT model, harness_level, task, max(revision) AS last FROM oracle GROUP BY ALL
),
grid AS (
    SELECT model, harness_level, task, unnest(range(0, last + 1)) AS t FROM span
),
held AS (
    SELECT g.model, g.harness_level, g.task, g.t, o.pkg,
           arg_max(o.y, o.revision) AS y_t,
           max(o.y) AS ever
    FROM grid g
    JOIN oracle o ON o.model = g.model AND o.harness_level = g.harness_level AND o.task = g.task
                 AND o.revision <= g.t
    GROUP BY g.model, g.harness_level, g.task, g.t, o.pkg
)
SELECT model, harness_level, task, t AS revision,
       count(*) AS n,
       avg(y_t::DOUBLE) AS current_correctness,
       avg(ever::DOUBLE) AS ever_correct,
       avg(ever::DOUBLE) - avg(y_t::DOUBLE) AS lost_correctness
FROM held
GROUP BY model, harness_level, task, t
ORDER BY model, harness_level, task, revision;

CREATE OR REPLACE VIEW revision_transitions AS
WITH
pairs AS (
    SELECT model, harness_level, task,
           lag(y) OVER (PARTITION BY pkg ORDER BY revision) AS y0, y AS y1
    FROM oracle
),
counts AS (
    SELECT model, harness_level, task,
           count(*) FILTER (WHERE y0 = 0) AS from_wrong,
           count(*) FILTER (WHERE y0 = 0 AND y1 = 1) AS repaired,
           count(*) FILTER (WHERE y0 = 1) AS from_correct,
           count(*) FILTER (WHERE y0 = 1 AND y1 = 0) AS regressed
    FROM pairs WHERE y0 IS NOT NULL
    GROUP BY ALL
)
SELECT c.model, c.harness_level, c.task,
       ratio(k.repaired, k.from_wrong) AS repair_rate,
       ratio(k.regressed, k.from_correct) AS regression_rate
FROM cells c
LEFT JOIN counts k USING (model, harness_level, task)
ORDER BY c.model, c.harness_level, c.task;

-- E. Candidates (episode, revision) with known truth: the oracle verdict at that exact
-- revision, else outcome.correct for the final revision. A verifier's winning verdict
-- on a candidate is its highest-seq one.
CREATE OR REPLACE VIEW judgements AS
WITH
verdicts AS (
    SELECT verifier, pkg, revision,
           arg_max(CASE WHEN verdict = 'accept' THEN 1 ELSE 0 END, seq) AS accept,
           arg_max_null(score, seq) AS score  -- the winning record's score (NULL if it has none)
    FROM checks
    WHERE actor = 'verifier'
    GROUP BY verifier, pkg, revision
),
truth AS (
    SELECT e.pkg, e.final_revision AS revision, e.correct::INT AS y
    FROM episodes e
    WHERE e.correct IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM oracle o WHERE o.pkg = e.pkg AND o.revision = e.final_revision)
    UNION ALL
    SELECT pkg, revision, y FROM oracle
)
SELECT v.verifier, v.pkg, v.revision, v.accept, v.score, t.y
FROM verdicts v JOIN truth t ON t.pkg = v.pkg AND t.revision = v.revision;

CREATE OR REPLACE VIEW verifier_stats AS
SELECT verifier,
       count(*) AS n,
       ratio(sum(accept), count(*)) AS verifier_coverage,
       ratio(count(*) FILTER (WHERE accept = 1 AND y = 0), sum(accept)) AS verifier_risk,
       ratio(count(*) FILTER (WHERE accept = 1 AND y = 0), count(*) FILTER (WHERE y = 0)) AS false_accept_rate,
       ratio(count(*) FILTER (WHERE accept = y), count(*)) AS verifier_accuracy
FROM judgements
GROUP BY verifier
ORDER BY verifier;

CREATE OR REPLACE VIEW verifier_pairs AS
WITH
names AS (SELECT DISTINCT verifier FROM judgements),
tables AS (
    SELECT i.verifier AS verifier_i, j.verifier AS verifier_j,
           count(*) FILTER (WHERE i.y = 0) AS n0,
           count(*) FILTER (WHERE i.y = 0 AND i.accept = 1 AND j.accept = 1) AS n11,
           count(*) FILTER (WHERE i.y = 0 AND i.accept = 1 AND j.accept = 0) AS n10,
           count(*) FILTER (WHERE i.y = 0 AND i.accept = 0 AND j.accept = 1) AS n01,
           count(*) FILTER (WHERE i.y = 0 AND i.accept = 0 AND j.accept = 0) AS n00
    FROM judgements i
    JOIN judgements j ON j.pkg = i.pkg AND j.revision = i.revision AND i.verifier < j.verifier
    GROUP BY ALL
),
full_tables AS (
    SELECT a.verifier AS verifier_i, b.verifier AS verifier_j,
           coalesce(t.n0, 0) AS n0, coalesce(t.n11, 0) AS n11, coalesce(t.n10, 0) AS n10,
           coalesce(t.n01, 0) AS n01, coalesce(t.n00, 0) AS n00
    FROM names a JOIN names b ON a.verifier < b.verifier
    LEFT JOIN tables t ON t.verifier_i = a.verifier AND t.verifier_j = b.verifier
)
SELECT verifier_i, verifier_j, n0, n11, n10, n01, n00,
       ratio(n11 + n10, n0) AS f_i,
       ratio(n11 + n01, n0) AS f_j,
       ratio(n11, n0) AS joint_false_accept,
       ratio(n11, n0) - ratio(n11 + n10, n0) * ratio(n11 + n01, n0) AS excess_joint,
       CASE WHEN n0 = 0 THEN NULL
            ELSE ratio(n11::DOUBLE * n00 - n10::DOUBLE * n01,
                       sqrt((n11 + n10)::DOUBLE * (n01 + n00) * (n11 + n01) * (n10 + n00))) END AS phi
FROM full_tables
ORDER BY verifier_i, verifier_j;

-- F. Locations: `path`, `path:line` or `path:start-end` split at the last colon when
-- what follows is a line or a range (reversed ranges are read in order); a bare path
-- is the whole file (lo = 0, hi = NULL: overlaps every range of that path).
CREATE OR REPLACE MACRO loc_path(s) AS
    CASE WHEN regexp_matches(trim(s), '^.*:\s*\+?[0-9]+\s*(-\s*\+?[0-9]+\s*)?$')
         THEN regexp_extract(trim(s), '^(.*):[^:]*$', 1) ELSE trim(s) END;
CREATE OR REPLACE MACRO loc_a(s) AS
    TRY_CAST(regexp_extract(trim(s), ':\s*\+?([0-9]+)\s*(-\s*\+?([0-9]+)\s*)?$', 1) AS UBIGINT);
CREATE OR REPLACE MACRO loc_b(s) AS
    coalesce(TRY_CAST(nullif(regexp_extract(trim(s), ':\s*\+?([0-9]+)\s*(-\s*\+?([0-9]+)\s*)?$', 3), '') AS UBIGINT), loc_a(s));
CREATE OR REPLACE MACRO loc_overlaps(p, t) AS
    loc_path(p) = loc_path(t)
    AND (loc_a(p) IS NULL OR loc_a(t) IS NULL
         OR (least(loc_a(p), loc_b(p)) <= greatest(loc_a(t), loc_b(t))
             AND least(loc_a(t), loc_b(t)) <= greatest(loc_a(p), loc_b(p))));

CREATE OR REPLACE VIEW localisation AS
WITH
truths AS (SELECT DISTINCT pkg, location FROM fault_locations),
predictions AS (
    SELECT pkg, rank, location FROM attribution WHERE rank IS NOT NULL AND location IS NOT NULL
),
regions AS (
    -- best (lowest) rank of a prediction matching each truth region
    SELECT t.pkg, t.location, min(p.rank) AS best
    FROM truths t
    LEFT JOIN predictions p ON p.pkg = t.pkg AND loc_overlaps(p.location, t.location)
    GROUP BY t.pkg, t.location
),
per_episode AS (
    SELECT pkg,
           CASE WHEN count(best) = count(*) THEN max(best) END AS rank_all,
           min(best) AS rank_any
    FROM regions GROUP BY pkg
),
counts AS (
    SELECT e.model, e.harness_level, e.task, count(*) AS n,
           count(*) FILTER (WHERE rank_all <= 1) AS all1, count(*) FILTER (WHERE rank_any <= 1) AS any1,
           count(*) FILTER (WHERE rank_all <= 3) AS all3, count(*) FILTER (WHERE rank_any <= 3) AS any3,
           count(*) FILTER (WHERE rank_all <= 5) AS all5, count(*) FILTER (WHERE rank_any <= 5) AS any5
    FROM per_episode p JOIN episodes e ON e.pkg = p.pkg
    GROUP BY ALL
)
SELECT c.model, c.harness_level, c.task, coalesce(k.n, 0) AS n,
       ratio(k.all1, k.n) AS top1_all, ratio(k.any1, k.n) AS top1_any,
       ratio(k.all3, k.n) AS top3_all, ratio(k.any3, k.n) AS top3_any,
       ratio(k.all5, k.n) AS top5_all, ratio(k.any5, k.n) AS top5_any
FROM cells c
LEFT JOIN counts k USING (model, harness_level, task)
ORDER BY c.model, c.harness_level, c.task;

-- @section suite
SELECT * FROM cell_metrics;
SELECT * FROM label_shares;
SELECT * FROM posture_shares;
SELECT * FROM revision_correctness;
SELECT * FROM revision_transitions;
SELECT * FROM verifier_stats;
SELECT * FROM verifier_pairs;
SELECT * FROM localisation;
